#!/usr/bin/env bash
# The release build for edge boxes: the Swift standard library and Foundation linked in (no Swift toolchain on
# the box), every function in a section of its own (so the link can drop what is unused and put what runs
# together, following deploy/lbs-gateway.order), unused sections dropped. Output: .build/release/lbs-gateway.
#   ./deploy/build-release.sh [extra swift build arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
exec swift build -c release --static-swift-stdlib \
  -Xswiftc -Xfrontend -Xswiftc -function-sections \
  -Xlinker --gc-sections \
  --product lbs-gateway "$@"
