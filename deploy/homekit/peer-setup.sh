#!/usr/bin/env bash
# Creates the Python venv for the HomeKit test peer (deploy/homekit/hap-peer.py) and the
# aiohomekit cross-check (deploy/homekit/aiohomekit-check.py).
#
#   deploy/homekit/peer-setup.sh            # venv at ${LBS_HAP_VENV:-.build/hap-venv}
#   PY=$(deploy/homekit/peer-setup.sh | tail -n1)
#
# Idempotent: does nothing when the venv already has the pinned versions. Needs PyPI only.
# The last line printed is the venv's python.
set -euo pipefail

HAP_PYTHON_VERSION=5.0.0
AIOHOMEKIT_VERSION=3.2.20

cd "$(dirname "$0")/../.."
VENV=${LBS_HAP_VENV:-.build/hap-venv}
PY="$VENV/bin/python"

installed() {
    [ -x "$PY" ] && "$PY" - "$HAP_PYTHON_VERSION" "$AIOHOMEKIT_VERSION" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if (version("HAP-python"), version("aiohomekit")) == (sys.argv[1], sys.argv[2]) else 1)
EOF
}

if ! installed; then
    if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
        echo "peer-setup: python3 cannot create venvs; on Debian: apt-get install -y python3-venv" >&2
        exit 1
    fi
    [ -x "$PY" ] || python3 -m venv "$VENV" >&2
    # Versions this was last checked with (Python 3.11); the two pins above are the ones that matter.
    CONSTRAINTS=$(mktemp)
    trap 'rm -f "$CONSTRAINTS"' EXIT
    cat >"$CONSTRAINTS" <<'EOF'
chacha20poly1305-reuseable==0.13.2
cryptography==50.0.2
h11==0.16.0
orjson==3.13.0
zeroconf==0.154.0
EOF
    "$PY" -m pip install --quiet --disable-pip-version-check -c "$CONSTRAINTS" \
        "HAP-python==$HAP_PYTHON_VERSION" "aiohomekit==$AIOHOMEKIT_VERSION" >&2
    installed || { echo "peer-setup: pinned versions not importable after install" >&2; exit 1; }
fi

# Absolute path, so callers can use it from any directory.
echo "$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")"
