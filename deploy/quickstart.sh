#!/usr/bin/env bash
# Fresh Debian 12 → a running gateway with the demo vendor against a local mosquitto.
# Then, in another terminal:  mosquitto_sub -t 'lbs/#' -v
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
export PATH="/opt/swift/usr/bin:$PATH"
port="${LBS_BROKER_PORT:-1883}"
if ! (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
  echo "starting mosquitto on 127.0.0.1:$port"
  mkdir -p .quickstart
  # set_tcp_nodelay: without it mosquitto holds a QoS 1 reply ~40 ms behind its PUBACK (Nagle).
  printf 'listener %s 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\n' "$port" > .quickstart/mosquitto.conf
  mosquitto -d -c .quickstart/mosquitto.conf
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
fi
swift build -c release --product lbs-gateway
mkdir -p .quickstart
cat > .quickstart/config.yaml <<YAML
mqtt:
  url: mqtt://127.0.0.1:$port
vendors:
  - type: demo
    id: demo
storage:
  path: gateway.sqlite
YAML
echo "lbs-gateway running with the demo vendor; try: mosquitto_sub -t 'lbs/#' -v"
exec .build/release/lbs-gateway run --config .quickstart/config.yaml
