#!/usr/bin/env bash
# Installs what the tests need and runs them: unit tests plus integration tests against real
# mosquitto brokers (started by the tests on free loopback ports), real SQLite files and simulators.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
export PATH="/opt/swift/usr/bin:$PATH"
swift build --build-tests
# Serially: the integration tests start real brokers, gateways and simulators with real timeouts;
# run in parallel on a two-core box they starve each other and time out.
swift test --skip-build --no-parallel "$@"
