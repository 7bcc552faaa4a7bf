#!/bin/sh
# Regenerates deploy/lbs-gateway.order: the functions a running gateway executes, which the release link
# (Package.swift) places together at the start of .text. The kernel maps code in 64 KB runs around every page
# touched, so 2.4 MB of hot functions spread over 27 MB of code cost ~19 MB of resident memory; packed, they
# cost little more than their size. The order is a layout hint only: a stale or missing name changes nothing
# but the layout, so regenerate it after big changes, not for every commit. Functions of the current order that
# the binary still has are kept (a profile misses some rarely run code); start from an empty file to drop them.
#
#   deploy/hot-order.sh BINARY [seconds]
#
# BINARY: the static release build with symbols (./deploy/build-release.sh, as CI and install.sh build it): a dynamic
# build runs Foundation and the standard library from shared libraries, so their functions would be missing from
# the order. Needs valgrind, mosquitto (with mosquitto_rr), curl, and consciousness-sim (CONSCIOUSNESS_SIM, by
# default .build/release/consciousness-sim from `swift build -c release`) and lbs-sim (LBS_SIM, likewise).
# Four runs under callgrind (which records every function run): the memory benchmark's (`lbs-bench rss`) without
# and with the cache: 1,000 demo devices polled every second, plus /metrics scrapes and a status page read; the
# command path of `lbs-bench peer` with the cache: `/set` → the consciousness backend over HTTP → state; and the
# demo with an HTTP vendor beside it (an Awair monitor from lbs-sim, as `lbs-bench rss` measures it).
set -eu
binary=$1
seconds=${2:-120}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
http_port=$(free_port)
cleanup() {
    [ -n "${gateway:-}" ] && kill -9 "$gateway" 2>/dev/null || true
    [ -n "${broker:-}" ] && kill "$broker" 2>/dev/null || true
    [ -n "${simulator_pid:-}" ] && kill "$simulator_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

# valgrind cannot read the DWARF 5 the Swift compiler writes; the symbol table is all this needs.
objcopy --strip-debug "$binary" "$work/lbs-gateway"
printf 'listener %s 127.0.0.1\nallow_anonymous true\n' "$port" > "$work/mosquitto.conf"
mosquitto -c "$work/mosquitto.conf" > "$work/mosquitto.log" 2>&1 &
broker=$!
# One run without the cache (what `lbs-bench rss` measures) and one with it; the order is what either ran.
profile() {
    name=$1
    storage=$2
    vendors=${3:-"[{type: demo, id: demo, poll_interval: 1, devices: 1000}]"}
    cat > "$work/$name.yaml" <<EOF
mqtt: {url: "mqtt://127.0.0.1:$port", client_id: hot-order-$name}
log_level: error
$storage
http: {listen: "127.0.0.1:$http_port"}
vendors: $vendors
EOF
    valgrind --tool=callgrind --demangle=no --dump-instr=no --fair-sched=yes \
        --callgrind-out-file="$work/callgrind-$name.out" \
        "$work/lbs-gateway" run --config "$work/$name.yaml" > "$work/gateway-$name.log" 2>&1 &
    gateway=$!
    # Under callgrind the gateway runs ~50 times slower: wait for its listener before the requests.
    waited=0
    until curl -fsS -m 60 "http://127.0.0.1:$http_port/metrics" > /dev/null 2>&1; do
        waited=$((waited + 1))
        [ "$waited" -lt 300 ] || { echo "the gateway did not answer on /metrics; its log:" >&2; cat "$work/gateway-$name.log" >&2; exit 1; }
        sleep 1
    done
    curl -fsS -m 60 "http://127.0.0.1:$http_port/api/status" > /dev/null
    curl -fsS -m 60 "http://127.0.0.1:$http_port/" > /dev/null
    if [ -n "${4:-}" ]; then
        # Commands, as `lbs-bench peer` sends them: each waits for its reply (MQTT 5 response topic) before the next.
        for round in $(seq 1 "$4"); do
            for word in ON OFF; do
                if ! mosquitto_rr -p "$port" -t "lbs/device/house_lights-kitchen/set" -e "replies/hot-order" -m "$word" \
                    -W 120 > /dev/null 2>&1; then
                    echo "the gateway did not answer a /set within 120 s; its log:" >&2
                    cat "$work/gateway-$name.log" >&2
                    exit 1
                fi
            done
        done
    fi
    sleep "$seconds"
    curl -fsS -m 60 "http://127.0.0.1:$http_port/metrics" > /dev/null
    # Dump while it runs, then SIGKILL: shutdown code is not part of the resident set the order is for.
    callgrind_control --dump "$gateway" > /dev/null
    sleep 2
    kill -9 "$gateway"
    wait "$gateway" 2>/dev/null || true
    gateway=
}
profile plain ""
profile cache "storage: {path: \"$work/cache.sqlite\"}"
# The command path: the consciousness backend fake, commands through the outbox.
simulator=${CONSCIOUSNESS_SIM:-$here/../.build/release/consciousness-sim}
sim_port=$(free_port)
printf 'hot-order' > "$work/password"
"$simulator" --port "$sim_port" --password-file "$work/password" > "$work/simulator.log" 2>&1 &
simulator_pid=$!
profile commands "storage: {path: \"$work/commands.sqlite\"}" \
    "[{type: consciousness, id: house, url: \"http://127.0.0.1:$sim_port\", username: admin, password_file: \"$work/password\", poll_interval: 3600}]" 100
kill "$simulator_pid" 2>/dev/null || true
simulator_pid=
# An HTTP vendor polled beside the demo (lbs-bench rss's second case): libcurl's client, a vendor's parsing, the breaker.
sim=${LBS_SIM:-$here/../.build/release/lbs-sim}
awair_port=$(free_port)
"$sim" awair --local awair-elem-1419e1.local --port "$awair_port" --fixtures "$here/../Tests/Fixtures/awair" > "$work/awair.log" 2>&1 &
simulator_pid=$!
profile http "" "[{type: demo, id: demo, poll_interval: 1, devices: 1000}, {type: awair_local, id: air, url: \"http://127.0.0.1:$awair_port\", poll_interval: 1}]"
kill "$simulator_pid" 2>/dev/null || true

cat "$work"/callgrind-*.out* > "$work/profile"
python3 "$here/hot-order.py" "$work/profile" "$work/lbs-gateway" "$here/lbs-gateway.order" > "$work/order"
{
    echo "# Functions the gateway runs, for lld --symbol-ordering-file. Made by deploy/hot-order.sh; do not edit."
    cat "$work/order"
} > "$here/lbs-gateway.order"
echo "wrote $here/lbs-gateway.order ($(grep -vc '^#' "$here/lbs-gateway.order") functions)" >&2
