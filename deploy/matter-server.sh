#!/usr/bin/env bash
# The real python-matter-server 8.1.2 for the tests (RealMatterServerTests) and for trying the gateway:
#   eval "$(./deploy/matter-server.sh start)"   # prints the LBS_MATTER_SERVER_URL / _LOG exports
#   ./deploy/matter-server.sh stop
# It needs Python 3.12 or newer (a python3.12/3.13 on PATH or under pyenv), Debian's libnl-3-200 and
# libnl-route-3-200, and a writable /data (the CHIP stack writes /data/chip_factory.ini). Without Python 3.12
# it says so on stderr and prints nothing: the test is then reported as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
state=.build/matter-server
mkdir -p "$state"

find_python() {
  for candidate in python3.13 python3.12; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
      command -v "$candidate"; return 0
    fi
  done
  for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3 /usr/local/bin/python3.1[2-9]; do
    if [ -x "$candidate" ] && "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}

case "${1:-start}" in
start)
  if [ -f "$state/pid" ]; then kill "$(cat "$state/pid")" 2>/dev/null || true; rm -f "$state/pid"; fi
  python=$(find_python) || { echo "matter-server: no Python 3.12+ found; the real-server test will be skipped" >&2; exit 0; }
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  if ! dpkg -s libnl-3-200 libnl-route-3-200 >/dev/null 2>&1; then
    $sudo_cmd apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq libnl-3-200 libnl-route-3-200 >&2
  fi
  $sudo_cmd mkdir -p /data
  if [ ! -x "$state/venv/bin/matter-server" ]; then
    "$python" -m venv "$state/venv" >&2
    "$state/venv/bin/pip" install -q "python-matter-server[server]==8.1.2" >&2 \
      || { echo "matter-server: pip could not install python-matter-server 8.1.2; the real-server test will be skipped" >&2; exit 0; }
  fi
  port=$("$state/venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  rm -rf "$state/storage"; mkdir -p "$state/storage/paa"
  nohup "$state/venv/bin/matter-server" --storage-path "$state/storage" --port "$port" --listen-address 127.0.0.1 \
    --paa-root-cert-dir "$state/storage/paa" --log-level debug > "$state/server.log" 2>&1 &
  echo $! > "$state/pid"
  for _ in $(seq 120); do
    if "$state/venv/bin/python" -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/info', timeout=1)" 2>/dev/null; then
      echo "export LBS_MATTER_SERVER_URL=ws://127.0.0.1:$port/ws"
      echo "export LBS_MATTER_SERVER_LOG=$PWD/$state/server.log"
      echo "matter-server: python-matter-server 8.1.2 on ws://127.0.0.1:$port/ws (log $state/server.log)" >&2
      exit 0
    fi
    kill -0 "$(cat "$state/pid")" 2>/dev/null || break
    sleep 1
  done
  echo "matter-server: the server did not start; last lines of its log:" >&2
  tail -20 "$state/server.log" >&2 || true
  exit 0
  ;;
stop)
  if [ -f "$state/pid" ]; then kill "$(cat "$state/pid")" 2>/dev/null || true; rm -f "$state/pid"; fi
  ;;
esac
