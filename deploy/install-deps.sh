#!/usr/bin/env bash
# Installs the native libraries and the broker the gateway and its tests need (Debian 12).
set -euo pipefail
# tzdata: the time zones the gateway reads (LocalZone) and its tests compare with Foundation's.
packages=(mosquitto mosquitto-clients tzdata valgrind libmosquitto-dev libsqlite3-dev libcurl4-openssl-dev libssl-dev libxml2 openssl socat pkg-config)
# python3-venv: the HomeKit tests' real accessory (HAP-python in a venv, deploy/homekit/peer-setup.sh).
packages+=(python3-venv)
# Avahi: the HomeKit vendor finds accessories over mDNS through it (avahi-browse), as on an edge box.
packages+=(avahi-daemon avahi-utils dbus)
# Debian's Chromium for the status page's browser test (driven by Playwright; no browser download).
packages+=(chromium)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi
if ! command -v swift >/dev/null 2>&1; then
  for d in /opt/swift/usr/bin /usr/share/swift/usr/bin; do [ -x "$d/swift" ] && export PATH="$d:$PATH"; done
fi
command -v swift >/dev/null 2>&1 || { echo "Swift 6.x is required: install it from https://www.swift.org/install/linux/ and re-run." >&2; exit 1; }
# The distro starts a broker on :1883 after install; quickstart uses it, tests start their own on free ports.
# The Prometheus text-format parser the metrics test checks /metrics with (the reference implementation's).
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import prometheus_client' 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check prometheus-client==0.26.0 >/dev/null 2>&1 \
    || python3 -m pip install -q --disable-pip-version-check --break-system-packages prometheus-client==0.26.0 >/dev/null 2>&1 \
    || echo "install-deps: prometheus-client not installed; the metrics test checks the text format itself" >&2
fi
# Playwright drives Debian's chromium in the status page test (executable_path; `playwright install` is never run).
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import playwright' 2>/dev/null; then
  # (Debian's own python3 refuses pip outside a venv: PEP 668; the second form is for that one.)
  python3 -m pip install -q --disable-pip-version-check playwright==1.65.2 >/dev/null 2>&1 \
    || python3 -m pip install -q --disable-pip-version-check --break-system-packages playwright==1.65.2 >/dev/null 2>&1 \
    || echo "install-deps: playwright not installed; the status page's browser test will be skipped" >&2
fi
