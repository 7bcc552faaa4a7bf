#!/usr/bin/env bash
# Runs deploy/install.sh under a real systemd: a fresh Debian 12 (debootstrap bookworm) booted by
# qemu-system-x86_64 with systemd as PID 1, driven by a oneshot unit inside the image that runs the checks below
# at boot, writes PASS/FAIL lines to a shared folder (9p) and powers off. Not part of CI (it boots a VM and
# downloads packages); a maintainer runs it after changing deploy/ or the gateway's start/stop/notify paths.
#   sudo ./deploy/systemd-test.sh [--binary PATH] [--rebuild-image] [--timeout SECONDS] [--kvm]
# --binary: a release build (default .build/release/lbs-gateway, built by deploy/build-release.sh when missing);
# it is split here (stripped binary + lbs-gateway.debug beside it) as a build box would ship it.
# Needs root (debootstrap, qemu); installs qemu-system-x86, qemu-utils, debootstrap, e2fsprogs and binutils
# with apt-get when missing. Software emulation (TCG) by default: the dev machines are VMs whose /dev/kvm
# opens but never runs a guest; --kvm uses hardware virtualisation where it works. The image
# (~1 GB) is cached in /var/tmp/lbs-systemd-test, so later runs skip debootstrap; every run starts from a
# fresh copy-on-write layer over it. Inside the VM, on a fresh box:
#   install.sh --no-build (exactly as documented) → unit active (running), runtime packages and mosquitto
#   installed, stripped binary and its .debug, credentials drop-in; a /set round trip on the demo light; a
#   secret file added to the config reaches the service as a credential after install.sh again; kill -9 →
#   restarted; SIGSTOP → watchdog restart; systemctl stop → bridge/state retained offline; the journal has no
#   "thread priority" line and no error at start; uninstall.sh leaves no unit.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=/var/tmp/lbs-systemd-test
binary=""; rebuild=false; limit=900; accel=tcg
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="${2:?--binary needs a path}"; shift 2 ;;
    --rebuild-image) rebuild=true; shift ;;
    --timeout) limit="${2:?--timeout needs seconds}"; shift 2 ;;
    --kvm) accel=kvm; shift ;;
    *) echo "systemd-test.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "systemd-test.sh: run as root (debootstrap, qemu)" >&2; exit 2; }
started=$(date +%s)
log() { printf '[%4ds] %s\n' "$(( $(date +%s) - started ))" "$*"; }

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v qemu-img >/dev/null || need+=(qemu-utils)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v objcopy >/dev/null || need+=(binutils)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The image: bump the recipe number when the steps below change, so cached images are rebuilt.
recipe=1
if $rebuild || [ "$(cat "$cache/recipe" 2>/dev/null)" != "$recipe" ]; then
  log "building the Debian 12 image (debootstrap bookworm; a few minutes, once)"
  rm -rf "$cache" && mkdir -p "$cache"
  rootfs="$cache/rootfs"
  debootstrap --variant=minbase --include=systemd-sysv,udev,dbus,kmod,iproute2,procps,linux-image-amd64 \
    bookworm "$rootfs" http://deb.debian.org/debian > "$cache/debootstrap.log" 2>&1 \
    || { tail -20 "$cache/debootstrap.log"; exit 1; }
  echo lbs-test > "$rootfs/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 lbs-test\n::1 localhost\n' > "$rootfs/etc/hosts"
  printf '/dev/vda / ext4 defaults 0 1\nlbs /mnt/lbs 9p trans=virtio,version=9p2000.L,msize=1048576 0 0\n' > "$rootfs/etc/fstab"
  mkdir -p "$rootfs/mnt/lbs"
  # qemu's user network: DHCP and a DNS forwarder at 10.0.2.3.
  printf '[Match]\nName=en*\n\n[Network]\nDHCP=yes\n' > "$rootfs/etc/systemd/network/20-wired.network"
  rm -f "$rootfs/etc/resolv.conf"; echo 'nameserver 10.0.2.3' > "$rootfs/etc/resolv.conf"
  printf 'deb http://deb.debian.org/debian bookworm main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
    > "$rootfs/etc/apt/sources.list"
  # The test runs at boot from the shared folder (so changing it needs no new image), then powers off.
  cat > "$rootfs/etc/systemd/system/lbs-systemd-test.service" <<'UNIT'
[Unit]
Description=lbs-gateway under a real systemd (deploy/systemd-test.sh)
Wants=network-online.target
After=network-online.target
RequiresMountsFor=/mnt/lbs
[Service]
Type=oneshot
ExecStart=/bin/bash /mnt/lbs/guest.sh
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity
ExecStopPost=/bin/systemctl --no-block poweroff
[Install]
WantedBy=multi-user.target
UNIT
  chroot "$rootfs" systemctl enable systemd-networkd systemd-networkd-wait-online lbs-systemd-test >/dev/null 2>&1
  chroot "$rootfs" systemctl mask serial-getty@ttyS0.service getty@tty1.service >/dev/null 2>&1
  chroot "$rootfs" apt-get clean
  cp -L "$rootfs/vmlinuz" "$cache/vmlinuz" && cp -L "$rootfs/initrd.img" "$cache/initrd.img"
  mkfs.ext4 -q -F -L lbs-root -d "$rootfs" "$cache/base.img" 3G
  rm -rf "$rootfs"
  echo "$recipe" > "$cache/recipe"
  log "image ready: $cache/base.img"
fi

# What the VM sees at /mnt/lbs: the repository's deploy/ and a split release binary, as a build box ships them.
run="$cache/run"
rm -rf "$run" && mkdir -p "$run/share/repo/.build/release"
cp -a deploy "$run/share/repo/"
if [ -z "$binary" ]; then
  binary=.build/release/lbs-gateway
  [ -x "$binary" ] || { log "building the release binary"; ./deploy/build-release.sh; }
fi
[ -x "$binary" ] || { echo "systemd-test.sh: $binary is missing" >&2; exit 1; }
out="$run/share/repo/.build/release"
objcopy --only-keep-debug "$binary" "$out/lbs-gateway.debug"
objcopy --strip-all --add-gnu-debuglink="$out/lbs-gateway.debug" "$binary" "$out/lbs-gateway"
log "binary: $(stat -c %s "$binary") bytes, stripped $(stat -c %s "$out/lbs-gateway"), debug file $(stat -c %s "$out/lbs-gateway.debug")"
sed -n '/^# GUEST-BEGIN$/,/^# GUEST-END$/p' "$0" | sed '1d;$d' > "$run/share/guest.sh"
qemu-img create -q -f qcow2 -F raw -b "$cache/base.img" "$run/disk.qcow2"

log "booting the VM (accelerator: $accel; console log: $run/console.log)"
boot=$(date +%s)
timeout "$limit" qemu-system-x86_64 -accel "$accel" -cpu max -m 2048 -smp 2 -no-reboot \
  -display none -monitor none -serial "file:$run/console.log" \
  -kernel "$cache/vmlinuz" -initrd "$cache/initrd.img" -append "root=/dev/vda rw console=ttyS0 loglevel=3" \
  -drive "file=$run/disk.qcow2,if=virtio,format=qcow2" \
  -netdev user,id=n0 -device virtio-net-pci,netdev=n0 \
  -virtfs "local,path=$run/share,mount_tag=lbs,security_model=none,id=lbs" &
qemu=$!
# The results as they come; a boot that ends in emergency mode would otherwise wait for the timeout.
shown=0
while kill -0 "$qemu" 2>/dev/null; do
  sleep 2
  if [ -f "$run/share/results.log" ]; then
    total=$(wc -l < "$run/share/results.log")
    [ "$total" -gt "$shown" ] && sed -n "$((shown + 1)),${total}p" "$run/share/results.log" && shown=$total
  fi
  if grep -q 'emergency mode' "$run/console.log" 2>/dev/null; then log "the VM is in emergency mode"; kill "$qemu"; fi
done
set +e; wait "$qemu"; status=$?; set -e
log "VM stopped after $(( $(date +%s) - boot )) s (qemu exit $status)"
if [ ! -s "$run/share/results.log" ]; then
  echo "systemd-test.sh: no results from the VM; the console's last lines:" >&2
  tail -40 "$run/console.log" >&2
  exit 1
fi
[ -f "$run/share/results.log" ] && sed -n "$((shown + 1)),\$p" "$run/share/results.log"
grep -q '^DONE' "$run/share/results.log" || { echo "FAIL the test did not finish (timeout $limit s?)"; exit 1; }
if grep -q '^FAIL' "$run/share/results.log"; then
  log "FAILED (logs: $run/share)"; exit 1
fi
log "all passed"
exit 0

# The checks, run as root inside the VM by lbs-systemd-test.service; extracted into the shared folder per run.
# GUEST-BEGIN
set -u
share=/mnt/lbs
results=$share/results.log
exec > >(tee -a "$results") 2>&1
failures=0
printf 'boot: %.1f s from the kernel start to the test\n' "$(cut -d' ' -f1 /proc/uptime)"
# check NAME COMMAND…: PASS or FAIL with the time it took; a failure shows what the command printed.
check() {
  local name=$1; shift
  local begin end output
  begin=$(date +%s.%N)
  output=$("$@" 2>&1); local rc=$?
  end=$(date +%s.%N)
  if [ $rc -eq 0 ]; then
    printf 'PASS %-66s %6.1f s%s\n' "$name" "$(awk "BEGIN{print $end-$begin}")" \
      "${output:+  ($(echo "$output" | tail -1))}"
  else
    printf 'FAIL %-66s %6.1f s\n' "$name" "$(awk "BEGIN{print $end-$begin}")"
    echo "$output" | tail -25 | sed 's/^/     | /'
    failures=$((failures + 1))
  fi
}
main_pid() { systemctl show -p MainPID --value lbs-gateway; }
is_running() { [ "$(systemctl show -p ActiveState --value lbs-gateway)/$(systemctl show -p SubState --value lbs-gateway)" = active/running ]; }
# Waits up to $1 s for the unit to run again under a main PID other than $2; says how long since $3 (date +%s.%N).
wait_restarted() {
  local limit=$1 old=$2 since=$3 pid
  while [ "$(awk "BEGIN{print ($(date +%s.%N) - $since < $limit)}")" = 1 ]; do
    pid=$(main_pid)
    if [ "$pid" != 0 ] && [ "$pid" != "$old" ] && is_running; then
      echo "running again as PID $pid, $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $since}") s after the signal"; return 0
    fi
    sleep 0.2
  done
  systemctl --no-pager status lbs-gateway; return 1
}

cd "$share/repo" || exit 1
# install.sh's lines with the seconds since it started: where the time goes.
stamped() {
  local begin; begin=$(date +%s.%N)
  while IFS= read -r line; do printf '%6.1f s  %s\n' "$(awk "BEGIN{print $(date +%s.%N) - $begin}")" "$line"; done
}
install_step() {
  ./deploy/install.sh --no-build </dev/null 2>&1 | stamped > "$share/install.log"; local rc=${PIPESTATUS[0]}
  tail -1 "$share/install.log"; return "$rc"
}
check "install.sh --no-build on a fresh Debian 12 (exit 0 once active)" install_step
check "the unit is active (running)" is_running
packages() {
  dpkg-query -W -f='${db:Status-Status} ${Package} ${Version}\n' libsqlite3-0 libssl3 libmosquitto1 libcurl4 mosquitto > /tmp/packages.txt || return 1
  cat /tmp/packages.txt; ! grep -v '^installed' /tmp/packages.txt && systemctl is-active mosquitto
}
check "runtime packages and mosquitto installed by install.sh" packages
stripped() {
  local size; size=$(stat -c %s /usr/local/bin/lbs-gateway)
  [ "$size" -lt 100000000 ] && [ -s /usr/local/lib/debug/usr/local/bin/lbs-gateway.debug ] && echo "binary $size bytes, debug file beside it"
}
check "the installed binary is stripped, its .debug under /usr/local/lib/debug" stripped
credentials() {
  stat -c '%a uid %u %n' /etc/lbs-gateway/config.yaml /etc/lbs-gateway/mqtt-password /run/credentials/lbs-gateway.service/config.yaml || return 1
  [ "$(stat -c %a/%U /etc/lbs-gateway/config.yaml)" = 600/root ] && [ -f /run/credentials/lbs-gateway.service/config.yaml ]
}
check "config.yaml stays 0600 root, the service reads it as a credential" credentials
first_start() {
  local journal; journal=$(journalctl -u lbs-gateway -b --no-pager -o cat)
  ! echo "$journal" | grep -iE 'error|warn|fail|thread priority' && echo "$(echo "$journal" | wc -l) journal lines, none an error"
}
check "no error or thread-priority line in the journal at start" first_start

DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mosquitto-clients curl > "$share/apt-tools.log" 2>&1
roundtrip() {
  local level=$((RANDOM % 90 + 5)) got
  mosquitto_sub -t lbs/device/demo_light -W 15 > /tmp/light.txt & local sub=$!
  sleep 0.5
  mosquitto_pub -t lbs/device/demo_light/set -m "{\"state\":\"ON\",\"brightness\":$level}"
  local waited=0
  while ! grep -q "\"brightness\":$level[,}]" /tmp/light.txt && [ $waited -lt 100 ]; do sleep 0.1; waited=$((waited + 1)); done
  kill $sub 2>/dev/null
  grep -q "\"brightness\":$level[,}]" /tmp/light.txt && echo "brightness $level confirmed in lbs/device/demo_light"
}
check "/set round trip on the demo light (mosquitto_pub → state)" roundtrip

# A secret file added later: install.sh again passes it as a credential; the HTTP listener then needs the token.
secret_file() {
  (umask 077; printf 'token-%s' "$RANDOM$RANDOM" > /etc/lbs-gateway/http-token)
  sed -i 's|^  listen: 127.0.0.1:8099.*|&\n  token_file: http-token|' /etc/lbs-gateway/config.yaml
  ./deploy/install.sh --no-build </dev/null > "$share/install-2.log" 2>&1 || { tail -30 "$share/install-2.log"; return 1; }
  grep -q 'http-token' /etc/systemd/system/lbs-gateway.service.d/credentials.conf || { cat /etc/systemd/system/lbs-gateway.service.d/credentials.conf; return 1; }
  local without with
  without=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8099/metrics)
  with=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat /etc/lbs-gateway/http-token)" http://127.0.0.1:8099/metrics)
  echo "/metrics without the token: $without, with it: $with"
  [ "$without" = 401 ] && [ "$with" = 200 ]
}
check "a secret file named later (http.token_file) reaches the service" secret_file

kill9() { local old; old=$(main_pid); kill -9 "$old"; wait_restarted 30 "$old" "$(date +%s.%N)"; }
check "kill -9 of the main process → restarted by systemd" kill9
watchdog() {
  local old; old=$(main_pid); kill -STOP "$old"
  wait_restarted 90 "$old" "$(date +%s.%N)" && journalctl -u lbs-gateway -b --no-pager | grep -q 'Watchdog timeout'
}
check "SIGSTOP → watchdog timeout → restarted" watchdog
stopped() {
  local begin; begin=$(date +%s.%N)
  systemctl stop lbs-gateway || return 1
  echo "stopped in $(awk "BEGIN{printf \"%.2f\", $(date +%s.%N) - $begin}") s"
  mosquitto_sub -t lbs/bridge/state -C 1 -W 5 | tee /dev/stderr | grep -q offline
}
check "systemctl stop → retained lbs/bridge/state offline" stopped
noise() {
  local count; count=$(journalctl -u lbs-gateway -b --no-pager | grep -c 'thread priority')
  echo "$count thread-priority lines over $(journalctl -u lbs-gateway -b --no-pager | grep -c 'Started lbs-gateway') starts"; [ "$count" -eq 0 ]
}
check "no thread-priority line in the whole journal (all starts)" noise
journalctl -u lbs-gateway -b --no-pager > "$share/journal.txt" 2>&1
uninstalled() {
  ./deploy/uninstall.sh > "$share/uninstall.log" 2>&1 || return 1
  local units; units=$(systemctl list-unit-files 'lbs-gateway*' --no-legend | wc -l)
  local left; left=$(ls -d /etc/systemd/system/lbs-gateway.service* /usr/local/bin/lbs-gateway /usr/local/lib/debug/usr/local/bin/lbs-gateway.debug 2>/dev/null)
  echo "unit files: $units, left: ${left:-nothing}"
  [ "$units" -eq 0 ] && [ -z "$left" ] && ! systemctl is-active -q lbs-gateway
}
check "uninstall.sh leaves no unit, drop-in, binary or debug file" uninstalled
echo "DONE: $failures failure(s)"
# GUEST-END
