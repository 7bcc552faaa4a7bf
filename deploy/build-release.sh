#!/usr/bin/env bash
# The release build for edge boxes: the Swift standard library and FoundationEssentials linked in (no Swift
# toolchain on the box), every function in a section of its own (so the link can drop what is unused and put what
# runs together, following deploy/lbs-gateway.order), unused sections dropped. No gateway module imports full
# Foundation, so neither it nor ICU is in the binary: time zones come from the system's tzdata (LocalZone). Ends by
# running the binary's `self-test` (time zones, the local date, Cognito's timestamp, YAML), so a build or a machine
# that lacks something the gateway needs fails here. Output: .build/release/lbs-gateway.
#   ./deploy/build-release.sh [extra swift build arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
flags=(-c release --static-swift-stdlib -Xswiftc -Xfrontend -Xswiftc -function-sections -Xlinker --gc-sections)
bin=$(swift build "${flags[@]}" "$@" --show-bin-path)

swift build "${flags[@]}" --product lbs-gateway "$@"
"$bin/lbs-gateway" self-test
