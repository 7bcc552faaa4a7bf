#!/usr/bin/env bash
# Builds the fuzz targets with libFuzzer and AddressSanitizer and runs each for a bounded time over its
# committed corpus. Exit status 0: no crash, no hang, no broken invariant. A finding is written to
# .build/fuzz/artifacts/<target>-… (add it to the corpus and as a regression test).
#
#   command-parser  the command parser and the strict JSON parser   Fuzz/CommandParserFuzz, corpus Fuzz/corpus/command-parser
#   config          the config loader (YAML → GatewayConfig)          Fuzz/ConfigFuzz, corpus Fuzz/corpus/config
#   vendors         every vendor decoder (JSON, XML, stream frames)   Fuzz/VendorFuzz, corpus Fuzz/corpus/vendors + Tests/Fixtures
#
#   ./deploy/fuzz.sh                           # all: 60 s command parser, 30 s config, 60 s vendors
#   FUZZ_SECONDS=600 ./deploy/fuzz.sh          # every target 600 s (or FUZZ_SECONDS_CONFIG=… per target)
#   FUZZ_TARGETS="config vendors" ./deploy/fuzz.sh
#   ./deploy/fuzz.sh vendors <file>            # replay one input (e.g. an artifact); without a target: command-parser
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
# libFuzzer and ASan report crashes themselves; Swift's interactive backtracer would only slow that down.
export SWIFT_BACKTRACE=enable=no
# Leaks inside Foundation's XML parser are not ours to fix (see the file).
export LSAN_OPTIONS="suppressions=$PWD/Fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

out=.build/fuzz
all_targets=(command-parser config vendors)
declare -A seconds=(
    [command-parser]="${FUZZ_SECONDS:-${FUZZ_SECONDS_COMMAND_PARSER:-60}}"
    [config]="${FUZZ_SECONDS:-${FUZZ_SECONDS_CONFIG:-30}}"
    [vendors]="${FUZZ_SECONDS:-${FUZZ_SECONDS_VENDORS:-60}}"
)
# The corpora: the first one of each takes the new inputs and is never committed.
declare -A corpora=(
    [command-parser]="$out/work-corpus-command-parser Fuzz/corpus/command-parser"
    [config]="$out/work-corpus-config Fuzz/corpus/config"
    [vendors]="$out/work-corpus-vendors Fuzz/corpus/vendors Tests/Fixtures"
)
declare -A options=(
    [command-parser]="-dict=Fuzz/command-parser.dict -max_len=4096"
    # No leak check after every input: the loader and the vendors keep caches and state, so allocations rarely
    # balance and each check scans the heap (25 runs/s instead of hundreds). Leaks are still reported at exit.
    [config]="-dict=Fuzz/config.dict -max_len=8192 -detect_leaks=0"
    # Recorded answers run to 15 kB (Enphase's production.json); longer ones are cut. The dictionary holds numeric
    # extremes (the harness also runs each input with its numbers replaced by them).
    [vendors]="-dict=Fuzz/vendors.dict -max_len=16384 -detect_leaks=0"
)

replay_target=""
if [[ $# -gt 0 ]]; then
    if [[ -n "${seconds[$1]+set}" ]]; then replay_target="$1"; shift; else replay_target=command-parser; fi
    [[ $# -gt 0 ]] || { echo "usage: $0 [target] <input>" >&2; exit 2; }
    targets=("$replay_target")
else
    read -r -a targets <<< "${FUZZ_TARGETS:-${all_targets[*]}}"
fi
mkdir -p "$out/artifacts"
wanted() { [[ " ${targets[*]} " == *" $1 "* ]]; }
# The linker's notes on ASan's local symbols are noise.
quiet() { { grep -v "Cannot export local symbol '__asan" || true; } >&2; }

build_start=$SECONDS
# Every harness is a package target (the command parser's links the `CommandParsing` target): SwiftPM builds
# the dependencies in the usual scratch path, unchanged, so the test build reuses them; LBS_FUZZ=1 instruments the gateway's
# own modules (see Package.swift). The binaries are copied out: the next normal build replaces them with the
# replay tools of the same name.
declare -A products=([command-parser]=CommandParserFuzz [config]=ConfigFuzz [vendors]=VendorFuzz)
for target in command-parser config vendors; do
    wanted "$target" || continue
    product=${products[$target]}
    echo "fuzz: building the $target target ($product)"
    LBS_FUZZ=1 swift build --product "$product" 2>&1 | quiet
    cp "$(LBS_FUZZ=1 swift build --product "$product" --show-bin-path)/$product" "$out/$target-fuzz"
done
echo "fuzz: built in $((SECONDS - build_start)) s"

if [[ -n "$replay_target" ]]; then
    exec "$out/$replay_target-fuzz" "$@"
fi

failed=0
for target in "${targets[@]}"; do
    read -r -a dirs <<< "${corpora[$target]}"
    read -r -a extra <<< "${options[$target]}"
    mkdir -p "${dirs[0]}"
    log="$out/$target.log"
    echo "fuzz: $target for ${seconds[$target]} s over ${dirs[*]:1}"
    # libFuzzer reports every new coverage point; its full log stays in $log, the summary is printed.
    if ! "$out/$target-fuzz" "${dirs[@]}" "${extra[@]}" -max_total_time="${seconds[$target]}" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$out/artifacts/$target-" -print_final_stats=1 > "$log" 2>&1; then
        tail -n 60 "$log" >&2
        echo "fuzz: $target FAILED (the input is in $out/artifacts/; replay it with ./deploy/fuzz.sh $target <file>)" >&2
        failed=1
        continue
    fi
    grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec)' "$log" || true
done
[[ $failed -eq 0 ]] || exit 1
echo "fuzz: ok (no crash, no broken invariant in ${targets[*]})"
