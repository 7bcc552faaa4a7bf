#!/usr/bin/env bash
# Installs lbs-gateway on an edge box (Debian 12): the runtime packages, a stripped release binary (its debug
# symbols in /usr/local/lib/debug), the systemd unit, a config skeleton, the broker password, and a drop-in that
# passes the config and every secret file it names to the service as credentials; then starts the service and
# waits until it is running (READY=1), or prints its journal and fails. Run again to upgrade, or after naming a
# new secret file in the config: the binary, unit and drop-in are replaced, the config, secrets and cache kept.
#   sudo ./deploy/install.sh                   # build (release, static stdlib), install, enable and start
#   sudo ./deploy/install.sh --no-build        # install the existing .build/release/lbs-gateway
#   ./deploy/install.sh --root /tmp/stage      # stage into a folder (no apt-get, no systemctl), e.g. for packaging or tests
# --no-packages: install no Debian packages (runtime libraries, mosquitto, binutils for stripping).
# --no-broker: do not install mosquitto, even when the config's broker is local and nothing listens there.
# The broker password is read from LBS_MQTT_PASSWORD (or asked for on a terminal), never from the command line.
# A binary with "<binary>.debug" beside it is taken as already stripped (deploy/systemd-test.sh ships it so).
set -euo pipefail
cd "$(dirname "$0")/.."
root=""; build=true; packages=true; broker=true
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root="${2:?--root needs a folder}"; shift 2 ;;
    --no-build) build=false; shift ;;
    --no-packages) packages=false; shift ;;
    --no-broker) broker=false; shift ;;
    *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
# Staging touches nothing outside the folder.
[ -n "$root" ] && packages=false
export PATH="/opt/swift/usr/bin:$PATH"
say() { echo "install.sh: $*"; }

# Debian packages, installed only when missing; the package lists are updated once (a fresh box has none).
updated=false
apt_install() {
  local missing=() p log
  for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || { say "apt-get not found; install ${missing[*]} yourself" >&2; return 1; }
  say "installing ${missing[*]}"
  log=$(mktemp)
  if ! { $updated || apt-get update -q; } > "$log" 2>&1 \
     || ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >> "$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; echo "install.sh: apt-get failed (above)" >&2; return 1
  fi
  updated=true; rm -f "$log"
}

if $build; then
  ./deploy/build-release.sh
fi
binary="${LBS_INSTALL_BINARY:-.build/release/lbs-gateway}"
[ -x "$binary" ] || { echo "install.sh: $binary is missing; build it or drop --no-build" >&2; exit 1; }

# What the binary links dynamically (readelf -d): the rest (Swift, FoundationEssentials) is inside it.
# ca-certificates: the CA store for mqtts:// and the vendors' https. tzdata: the time zones (LocalZone reads them).
if $packages; then
  apt_install libsqlite3-0 libssl3 libmosquitto1 libcurl4 libstdc++6 ca-certificates tzdata
fi
# Time zones (from tzdata: /usr/share/zoneinfo), the local date and YAML against known answers, on this machine
# and for this binary (one built elsewhere with --no-build is checked the same way).
if ! "$binary" self-test > /dev/null 2>&1; then
  "$binary" self-test >&2 || true
  echo "install.sh: $binary failed its self-test (above); not installed" >&2; exit 1
fi

install -d "$root/usr/local/bin" "$root/usr/local/lib/debug/usr/local/bin" "$root/etc/lbs-gateway" \
  "$root/etc/systemd/system/lbs-gateway.service.d" "$root/var/lib/lbs-gateway"
# Stripped (33 MB instead of 121 MB): the symbols go to a .debug file that gdb finds by the debug link, with
# `set debug-file-directory /usr/local/lib/debug` (the same layout as Debian's /usr/lib/debug).
debug_file="$root/usr/local/lib/debug/usr/local/bin/lbs-gateway.debug"
objcopy_tool=$(command -v objcopy || command -v llvm-objcopy || true)
if [ -e "$binary.debug" ]; then
  install -m 0755 "$binary" "$root/usr/local/bin/lbs-gateway"
  install -m 0644 "$binary.debug" "$debug_file"
else
  if [ -z "$objcopy_tool" ] && $packages; then apt_install binutils && objcopy_tool=$(command -v objcopy || true); fi
  if [ -n "$objcopy_tool" ]; then
    split=$(mktemp -d); trap 'rm -rf "$split"' EXIT
    "$objcopy_tool" --only-keep-debug "$binary" "$split/lbs-gateway.debug"
    "$objcopy_tool" --strip-all --add-gnu-debuglink="$split/lbs-gateway.debug" "$binary" "$split/lbs-gateway"
    install -m 0755 "$split/lbs-gateway" "$root/usr/local/bin/lbs-gateway"
    install -m 0644 "$split/lbs-gateway.debug" "$debug_file"
  else
    say "no objcopy: installing the binary unstripped"
    install -m 0755 "$binary" "$root/usr/local/bin/lbs-gateway"
  fi
fi
install -m 0644 deploy/lbs-gateway.service "$root/etc/systemd/system/lbs-gateway.service"
config="$root/etc/lbs-gateway/config.yaml"
if [ ! -e "$config" ]; then
  # Root's only: the service reads its credential copy (the unit binds it over this path).
  install -m 0600 deploy/config.example.yaml "$config"
  say "wrote $config (edit the broker URL and add your vendors)"
else
  say "kept the existing $config"
fi
if [ ! -e "$root/etc/lbs-gateway/mqtt-password" ]; then
  password="${LBS_MQTT_PASSWORD:-}"
  if [ -z "$password" ] && [ -t 0 ]; then read -r -s -p "Broker password for the gateway (empty: none): " password; echo; fi
  # umask first, so the password is never readable by others, not even for a moment.
  (umask 077; printf '%s' "$password" > "$root/etc/lbs-gateway/mqtt-password")
fi
chmod 0600 "$root/etc/lbs-gateway/mqtt-password"

# Every file the config names reaches the service (a dynamic user, which cannot read root's 0600 files) as a
# credential: systemd copies it into the service's credentials folder, readable by the service alone, and the
# copy is bound read-only over the original path in the service's namespace, so the config stays as written.
# Made from the config on every install; a file the config names later needs install.sh again.
if ! references=$("$root/usr/local/bin/lbs-gateway" config-paths --config "$config"); then
  echo "install.sh: cannot list what $config names (above); fix it and run install.sh again" >&2
  exit 1
fi
dropin="$root/etc/systemd/system/lbs-gateway.service.d/credentials.conf"
{
  echo "# Made by deploy/install.sh from /etc/lbs-gateway/config.yaml (lbs-gateway config-paths); replaced on every"
  echo "# install. Each file the config names: a credential (readable by the service alone) bound over its path."
  echo "[Service]"
} > "$dropin.new"
broker_url=""
while read -r kind path; do
  case "$kind" in
    broker) broker_url=$path; continue ;;
    file) ;;
    *) continue ;;
  esac
  path=${path#"$root"}
  # Unit-file syntax: ':' separates, '%' and blanks would need escaping; such paths are refused, not guessed at.
  if ! [[ "$path" =~ ^/[A-Za-z0-9._/@+-]+$ ]]; then
    echo "install.sh: the config names '$path'; use a path of letters, digits and . _ - + @ / only" >&2
    rm -f "$dropin.new"; exit 1
  fi
  if [ ! -f "$root$path" ]; then
    say "warning: the config names $path, which does not exist; create it and run install.sh again" >&2
    continue
  fi
  name="file${path//[^A-Za-z0-9._-]/_}"
  printf 'LoadCredential=%s:%s\nBindReadOnlyPaths=%%d/%s:%s\n' "$name" "$path" "$name" "$path" >> "$dropin.new"
done <<< "$references"
chmod 0644 "$dropin.new" && mv "$dropin.new" "$dropin"

if [ -n "$root" ]; then
  say "done (staged in $root)"
  exit 0
fi

# A fresh box with the example config (broker on localhost): Debian's mosquitto, which listens on the loopback
# interface only and lets local clients in without a login.
if $packages && $broker && [[ "$broker_url" =~ ^mqtts?://(localhost|127\.0\.0\.1|\[::1\])(:([0-9]+))?$ ]]; then
  port=${BASH_REMATCH[3]:-1883}
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    say "the config's broker ($broker_url) is local and nothing listens on port $port: installing mosquitto (--no-broker: not)"
    apt_install mosquitto
    # Answer the gateway's QoS 1 messages at once: by default mosquitto holds its PUBACKs behind Nagle's algorithm,
    # which paces every QoS 1 round trip at ~40 ms (a restart's announcements took seconds instead of ~0.2 s).
    # And room for a start's burst: past max_queued_messages (default 1,000) Debian's mosquitto drops every packet
    # to the client, PUBACKs included (lbs-bench overload 5000 … installed measures both settings together).
    if [ -d /etc/mosquitto/conf.d ] && [ ! -e /etc/mosquitto/conf.d/lbs-gateway.conf ]; then
      printf '# Written by lbs-gateway install.sh: PUBACKs without Nagle delay; room for a start-up burst.\nset_tcp_nodelay true\nmax_queued_messages 10000\n' \
        > /etc/mosquitto/conf.d/lbs-gateway.conf
    fi
    systemctl enable mosquitto >/dev/null 2>&1 || true
    systemctl restart mosquitto >/dev/null 2>&1 || true
  fi
fi

# HomeKit (the bridge announcing itself, accessories found by their id) uses the box's Avahi daemon for mDNS.
if $packages && grep -Eq '^homekit:|type:[[:space:]]*homekit' "$config"; then
  say "the config uses HomeKit: installing Avahi for mDNS (avahi-daemon, avahi-utils)"
  apt_install avahi-daemon avahi-utils
  systemctl enable --now avahi-daemon >/dev/null 2>&1 || true
fi

/usr/local/bin/lbs-gateway check-config --config /etc/lbs-gateway/config.yaml || \
  echo "install.sh: the config needs attention before the service can start (see above)" >&2
systemctl daemon-reload
systemctl enable lbs-gateway >/dev/null 2>&1
# Type=notify: systemctl returns once the gateway said READY=1 (cache restored, broker connected) or the start
# failed; restart, so an upgrade runs the new binary.
wait_limit=${LBS_INSTALL_WAIT:-90}
say "starting lbs-gateway (waiting up to $wait_limit s for READY=1)"
if timeout "$wait_limit" systemctl restart lbs-gateway && systemctl is-active -q lbs-gateway; then
  systemctl --no-pager status lbs-gateway | head -n 8 || true
  say "done: lbs-gateway is running"
else
  echo "install.sh: lbs-gateway did not start ($(systemctl is-active lbs-gateway 2>/dev/null || true)); its journal:" >&2
  journalctl -u lbs-gateway -n 50 --no-pager >&2 || true
  exit 1
fi
