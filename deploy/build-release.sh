#!/usr/bin/env bash
# The release build for edge boxes: the Swift standard library and Foundation linked in (no Swift toolchain on
# the box), every function in a section of its own (so the link can drop what is unused and put what runs
# together, following deploy/lbs-gateway.order), unused sections dropped, and only the part of ICU's data the
# gateway uses (below). Ends by running the binary's `self-test` (time zones, calendar, date formats, YAML), so a
# build whose data lacks something the gateway needs fails here. Output: .build/release/lbs-gateway.
#   ./deploy/build-release.sh [extra swift build arguments]
#   LBS_ICU_DATA=full ./deploy/build-release.sh   links ICU's full data package (34 MB) instead
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
flags=(-c release --static-swift-stdlib -Xswiftc -Xfrontend -Xswiftc -function-sections -Xlinker --gc-sections)
bin=$(swift build "${flags[@]}" "$@" --show-bin-path)

# ICU's data: Foundation's static ICU links all of it (34 MB: every locale, character set converters, dictionaries)
# as one symbol, icudt<N>_dat. lbs-icu-data (Sources/ICUDataFilter) writes the items the gateway uses (4.7 MB:
# time zones, root and English bundles, Unicode properties) to a package of their own; the link defines the symbol
# as that package (--defsym), so the archive member holding the full one is never pulled in. Prints the extra
# link arguments; fails when this toolchain does not ship ICU's data that way.
filtered_icu_data() {
  local toolchain tools lib member symbol size dir
  toolchain=$(dirname "$(dirname "$(command -v swift)")")
  tools="$toolchain/bin"
  lib="$toolchain/lib/swift_static/linux/lib_FoundationICU.a"
  [ -f "$lib" ] || { echo "no $lib" >&2; return 1; }
  read -r member symbol size < <("$tools/llvm-nm" -A -S --defined-only "$lib" 2>/dev/null \
    | awk '$NF ~ /^icudt[0-9]+_dat$/ && $2 ~ /^0+$/ { split($1, path, ":"); print path[2], $NF, $3; exit }') || true
  [ -n "${member:-}" ] || { echo "no icudt<N>_dat at offset 0 of a member of $lib" >&2; return 1; }
  dir="$bin/icu-data"
  mkdir -p "$dir"
  (cd "$dir" && "$tools/llvm-ar" x "$lib" "$member")
  "$tools/llvm-objcopy" -O binary --only-section=.rodata "$dir/$member" "$dir/full.dat"
  [ "$(stat -c %s "$dir/full.dat")" -eq $((16#$size)) ] || { echo "$member: .rodata is not just $symbol" >&2; return 1; }
  swift build "${flags[@]}" "$@" --product lbs-icu-data >&2
  "$bin/lbs-icu-data" "$dir/full.dat" "$dir/filtered.dat" >&2
  cat > "$dir/icu-data.S" <<EOF
    .section .rodata.lbs_icu_data,"a",@progbits
    .globl lbs_icu_data
    .type lbs_icu_data,@object
    .balign 16
lbs_icu_data:
    .incbin "$dir/filtered.dat"
    .size lbs_icu_data, . - lbs_icu_data
    .section .note.GNU-stack,"",@progbits
EOF
  "$tools/clang" -c "$dir/icu-data.S" -o "$dir/icu-data.new.o"
  # swift build does not track a file given with -Xlinker: when the data changed, the old link must go.
  if ! cmp -s "$dir/icu-data.new.o" "$dir/icu-data.o"; then
    mv "$dir/icu-data.new.o" "$dir/icu-data.o"
    rm -f "$bin/lbs-gateway"
  fi
  # One argument a line: the build folder's path may hold spaces.
  printf '%s\n' -Xlinker "$dir/icu-data.o" -Xlinker "--defsym=$symbol=lbs_icu_data"
}

icu_flags=()
if [ "${LBS_ICU_DATA:-filtered}" != full ]; then
  if link=$(filtered_icu_data "$@"); then
    mapfile -t icu_flags <<< "$link"
  else
    echo "build-release.sh: linking ICU's full data (above: why it could not be filtered)" >&2
  fi
fi
swift build "${flags[@]}" "${icu_flags[@]}" --product lbs-gateway "$@"
"$bin/lbs-gateway" self-test
