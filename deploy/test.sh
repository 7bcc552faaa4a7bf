#!/usr/bin/env bash
# Installs what the tests need and runs them: unit tests plus integration tests against real
# mosquitto brokers (started by the tests on free loopback ports), real SQLite files and simulators.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
export PATH="/opt/swift/usr/bin:$PATH"
swift build --build-tests
# The HomeKit tests pair with a real accessory: HAP-python 5.0.0 in a venv (PyPI). Without it they are skipped
# and say so; LBS_REQUIRE_HAP=1 (CI) makes a failed setup an error instead.
if [ -z "${LBS_HAP_PYTHON:-}" ]; then
  if hap_python=$(./deploy/homekit/peer-setup.sh | tail -n1); then
    export LBS_HAP_PYTHON="$hap_python"
  elif [ "${LBS_REQUIRE_HAP:-}" = 1 ]; then
    echo "test.sh: the HomeKit test peer could not be set up (deploy/homekit/peer-setup.sh)" >&2
    exit 1
  fi
fi
# In parallel: unit suites run freely; the suites marked `.integration` (real brokers, gateways, simulators)
# take one of a few machine-wide slots (cores + 1, at least 3; LBS_TEST_SUITES overrides), see
# Sources/TestTraits/SharedMachine.swift.
swift test --skip-build --parallel "$@"
