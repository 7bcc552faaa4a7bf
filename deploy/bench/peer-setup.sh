#!/usr/bin/env bash
# A venv for deploy/bench/peer-bridge.py (the comparison peer of `lbs-bench peer`), with pinned versions:
#   ./deploy/bench/peer-setup.sh [venv folder, default .build/peer-venv]   -> prints the venv's python
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${1:-.build/peer-venv}
if ! "$venv/bin/python3" -c 'import paho.mqtt, requests' 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q "paho-mqtt==2.1.0" "requests==2.32.3" >&2
fi
echo "$PWD/$venv/bin/python3"
