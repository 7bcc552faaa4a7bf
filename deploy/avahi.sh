#!/usr/bin/env bash
# Starts the system's mDNS daemon (Avahi) for the HomeKit mDNS tests when none runs, as on an edge box:
#   ./deploy/avahi.sh start    # the system D-Bus and avahi-daemon, if not running (needs root or sudo)
# install-deps.sh installs avahi-daemon, avahi-utils and dbus. On a machine with systemd both run already.
# Uses no procps (pgrep): a minimal machine has none. Liveness is asked of the daemons themselves.
set -euo pipefail
sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
bus_socket=/run/dbus/system_bus_socket
bus_pid_file=/run/dbus/pid
avahi_pid_file=/run/avahi-daemon/pid

avahi_answers() { avahi-browse --parsable --terminate _lbs-probe._tcp >/dev/null 2>&1; }
bus_answers() {
  [ -S "$bus_socket" ] || return 1
  dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.GetId >/dev/null 2>&1
}
# Alive: the pid file names a process that is not a zombie (a daemon killed while its parent lives).
pid_alive() {
  local pid
  pid="$(cat "$1" 2>/dev/null)" || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/status" ] || return 1
  ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status"
}

start_bus() {
  if pid_alive "$bus_pid_file"; then
    # A bus daemon lives but does not answer yet (just started by the package's postinst): give it a moment.
    for _ in $(seq 1 30); do bus_answers && return 0; sleep 0.1; done
    echo "avahi.sh: dbus-daemon (pid $(cat "$bus_pid_file")) runs but does not answer on $bus_socket" >&2
    return 1
  fi
  # A pid file left by a daemon that is gone (a snapshot, a crash) makes dbus-daemon refuse to start.
  $sudo_cmd rm -f "$bus_pid_file"
  $sudo_cmd mkdir -p /run/dbus
  $sudo_cmd dbus-daemon --system --fork
  for _ in $(seq 1 30); do bus_answers && return 0; sleep 0.1; done
  echo "avahi.sh: dbus-daemon started but does not answer on $bus_socket" >&2
  return 1
}

case "${1:-start}" in
start)
  avahi_answers && exit 0
  bus_was_up=1
  if ! bus_answers; then bus_was_up=0; start_bus; fi
  if pid_alive "$avahi_pid_file"; then
    # An avahi-daemon that was there before the bus came up holds no bus connection: restart it.
    if [ "$bus_was_up" -eq 0 ]; then
      $sudo_cmd avahi-daemon --kill 2>/dev/null || true
      for _ in $(seq 1 30); do pid_alive "$avahi_pid_file" || break; sleep 0.1; done
    fi
  fi
  if ! pid_alive "$avahi_pid_file"; then
    $sudo_cmd rm -f "$avahi_pid_file"   # left by a daemon that is gone: avahi-daemon would refuse to start
    $sudo_cmd avahi-daemon --daemonize --no-drop-root
  fi
  for _ in $(seq 1 50); do
    avahi_answers && exit 0
    sleep 0.1
  done
  echo "avahi.sh: avahi-daemon did not come up; avahi-browse says:" >&2
  avahi-browse --parsable --terminate _lbs-probe._tcp >&2 || true
  exit 1
  ;;
*)
  echo "usage: $0 start" >&2
  exit 2
  ;;
esac
