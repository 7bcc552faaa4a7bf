#!/usr/bin/env bash
# Installs what the tests need and runs them: unit tests plus integration tests against real
# mosquitto brokers (started by the tests on free loopback ports), real SQLite files and simulators.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
export PATH="/opt/swift/usr/bin:$PATH"
swift build --build-tests
# In parallel: unit suites run freely; the suites marked `.integration` (real brokers, gateways, simulators)
# take one of a few machine-wide slots (cores + 1, at least 3; LBS_TEST_SUITES overrides), see
# Sources/TestTraits/SharedMachine.swift.
swift test --skip-build --parallel "$@"
