#!/usr/bin/env bash
# Installs lbs-gateway on an edge box: a release build, the systemd unit, a config skeleton and the broker
# password as a credential file (0600, root only; the unit hands it to the service). Run again to upgrade:
# the binary and unit are replaced, the config, credentials and cache are kept.
#   sudo ./deploy/install.sh                   # build (release, static stdlib), install, enable and start
#   sudo ./deploy/install.sh --no-build        # install the existing .build/release/lbs-gateway
#   ./deploy/install.sh --root /tmp/stage      # stage into a folder (no systemctl), e.g. for packaging or tests
# The broker password is read from LBS_MQTT_PASSWORD (or asked for on a terminal), never from the command line.
set -euo pipefail
cd "$(dirname "$0")/.."
root=""; build=true
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root="${2:?--root needs a folder}"; shift 2 ;;
    --no-build) build=false; shift ;;
    *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
export PATH="/opt/swift/usr/bin:$PATH"
if $build; then
  ./deploy/build-release.sh
fi
binary="${LBS_INSTALL_BINARY:-.build/release/lbs-gateway}"
[ -x "$binary" ] || { echo "install.sh: $binary is missing; build it or drop --no-build" >&2; exit 1; }

install -d "$root/usr/local/bin" "$root/etc/lbs-gateway" "$root/etc/systemd/system" "$root/var/lib/lbs-gateway"
install -m 0755 "$binary" "$root/usr/local/bin/lbs-gateway"
install -m 0644 deploy/lbs-gateway.service "$root/etc/systemd/system/lbs-gateway.service"
if [ ! -e "$root/etc/lbs-gateway/config.yaml" ]; then
  install -m 0640 deploy/config.example.yaml "$root/etc/lbs-gateway/config.yaml"
  echo "install.sh: wrote $root/etc/lbs-gateway/config.yaml (edit the broker URL and add your vendors)"
else
  echo "install.sh: kept the existing $root/etc/lbs-gateway/config.yaml"
fi
if [ ! -e "$root/etc/lbs-gateway/mqtt-password" ]; then
  password="${LBS_MQTT_PASSWORD:-}"
  if [ -z "$password" ] && [ -t 0 ]; then read -r -s -p "Broker password for the gateway (empty: none): " password; echo; fi
  # umask first, so the password is never readable by others, not even for a moment.
  (umask 077; printf '%s' "$password" > "$root/etc/lbs-gateway/mqtt-password")
fi
chmod 0600 "$root/etc/lbs-gateway/mqtt-password"

if [ -z "$root" ]; then
  "$root/usr/local/bin/lbs-gateway" check-config --config /etc/lbs-gateway/config.yaml || \
    echo "install.sh: the config needs attention before the service can start (see above)" >&2
  systemctl daemon-reload
  systemctl enable --now lbs-gateway || true
  systemctl --no-pager status lbs-gateway || true
fi
echo "install.sh: done"
