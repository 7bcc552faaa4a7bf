#!/usr/bin/env bash
# Starts the system's mDNS daemon (Avahi) for the HomeKit mDNS tests when none runs, as on an edge box:
#   ./deploy/avahi.sh start    # dbus-daemon --system and avahi-daemon, if not running (needs root or sudo)
# install-deps.sh installs avahi-daemon and avahi-utils. On a machine with systemd, Avahi runs already.
set -euo pipefail
sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
case "${1:-start}" in
start)
  if avahi-browse --parsable --terminate _lbs-probe._tcp >/dev/null 2>&1; then exit 0; fi
  if ! pgrep -x dbus-daemon >/dev/null 2>&1 || [ ! -S /run/dbus/system_bus_socket ]; then
    $sudo_cmd mkdir -p /run/dbus
    $sudo_cmd dbus-daemon --system --fork
  fi
  pgrep -x avahi-daemon >/dev/null 2>&1 || $sudo_cmd avahi-daemon --daemonize --no-drop-root
  for _ in $(seq 1 50); do
    avahi-browse --parsable --terminate _lbs-probe._tcp >/dev/null 2>&1 && exit 0
    sleep 0.1
  done
  echo "avahi.sh: avahi-daemon did not come up" >&2
  exit 1
  ;;
*)
  echo "usage: $0 start" >&2
  exit 2
  ;;
esac
