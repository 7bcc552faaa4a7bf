#!/usr/bin/env bash
# Builds the command-parser fuzz target with libFuzzer and AddressSanitizer and runs it for a bounded
# time over the committed corpus (Fuzz/corpus/command-parser). Exit status 0: no crash, no broken
# invariant. A finding is written to .build/fuzz/artifacts/ (add it to the corpus and as a regression test).
#
#   ./deploy/fuzz.sh                 # 60 s
#   FUZZ_SECONDS=600 ./deploy/fuzz.sh
#   ./deploy/fuzz.sh crash-<hash>    # replay one input (e.g. an artifact)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
# libFuzzer and ASan report crashes themselves; Swift's interactive backtracer would only slow that down.
export SWIFT_BACKTRACE=enable=no

seconds="${FUZZ_SECONDS:-60}"
out=.build/fuzz
corpus=Fuzz/corpus/command-parser
mkdir -p "$out/work-corpus" "$out/artifacts"

# GatewayModel as its own module (it has no dependencies), then CommandParser.swift and the harness
# against it: the package itself is not involved, so the target builds without SwiftPM.
flags=(-parse-as-library -O -sanitize=fuzzer,address -swift-version 6 -enable-upcoming-feature ExistentialAny
       -enable-upcoming-feature MemberImportVisibility -warnings-as-errors)
echo "fuzz: building the command-parser target"
swiftc "${flags[@]}" -emit-library -static -emit-module -module-name GatewayModel \
    -emit-module-path "$out/GatewayModel.swiftmodule" -o "$out/libGatewayModel.a" \
    Sources/GatewayModel/*.swift Sources/GatewayModel/Errors/*.swift
swiftc "${flags[@]}" -module-name CommandParserFuzz -I "$out" -L "$out" -lGatewayModel \
    Sources/Gateway/Routing/CommandParser.swift Fuzz/CommandParserFuzz/main.swift \
    -o "$out/command-parser-fuzz" 2> >(grep -v "Cannot export local symbol '__asan" >&2)

if [[ $# -gt 0 ]]; then
    exec "$out/command-parser-fuzz" "$@"
fi

# New inputs go to the work corpus, never into the committed one; -max_len covers the deep payloads.
echo "fuzz: running for ${seconds} s over $(ls "$corpus" | wc -l) corpus inputs"
# libFuzzer reports every new coverage point; its full log stays in $out/fuzz.log, the summary is printed.
if ! "$out/command-parser-fuzz" "$out/work-corpus" "$corpus" \
    -dict=Fuzz/command-parser.dict -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$out/artifacts/" -print_final_stats=1 > "$out/fuzz.log" 2>&1; then
    tail -n 60 "$out/fuzz.log" >&2
    echo "fuzz: FAILED (the input is in $out/artifacts/; replay it with ./deploy/fuzz.sh <file>)" >&2
    exit 1
fi
grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec)' "$out/fuzz.log" || true
echo "fuzz: ok (no crash, no broken invariant in ${seconds} s)"
