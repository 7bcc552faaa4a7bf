#!/usr/bin/env bash
# Fresh Debian 12 → a running gateway with the demo vendor against a local mosquitto.
# --with-simulators: also every vendor that has a simulator (lbs-sim: Powerwall, SolarEdge, Enphase, Awair, Flume, Neurio, Emporia, Sense, Matter) and the Green
# Button sample files, each against its simulator, so all of them can be seen without hardware.
# Then, in another terminal:  mosquitto_sub -t 'lbs/#' -v
set -euo pipefail
cd "$(dirname "$0")/.."
with_simulators=false
[ "${1:-}" = "--with-simulators" ] && with_simulators=true
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
extra=""
if $with_simulators; then
  swift build -c release --product lbs-sim
  # Secrets go through files, as in production; the simulators read the same ones.
  printf 'powerwall\n' > .quickstart/powerwall-password
  printf 'solaredge\n' > .quickstart/solaredge-key
  printf 'enphase\n' > .quickstart/envoy-token
  printf 'awair\n' > .quickstart/awair-token
  printf 'flume\n' > .quickstart/flume-secret
  printf 'flume\n' > .quickstart/flume-password
  printf 'emporia-password\n' > .quickstart/emporia-password
  printf 'sense\n' > .quickstart/sense-password
  chmod 600 .quickstart/powerwall-password .quickstart/solaredge-key .quickstart/envoy-token .quickstart/awair-token \
    .quickstart/flume-secret .quickstart/flume-password .quickstart/emporia-password .quickstart/sense-password
  .build/release/lbs-sim powerwall --port 18441 --password-file .quickstart/powerwall-password > .quickstart/powerwall-sim.log 2>&1 &
  .build/release/lbs-sim solaredge --port 18442 --api-key-file .quickstart/solaredge-key > .quickstart/solaredge-sim.log 2>&1 &
  .build/release/lbs-sim enphase --port 18443 --token-file .quickstart/envoy-token > .quickstart/enphase-sim.log 2>&1 &
  .build/release/lbs-sim awair --port 18444 --token-file .quickstart/awair-token > .quickstart/awair-sim.log 2>&1 &
  .build/release/lbs-sim awair --port 18445 --local awair-elem-1419e1.local > .quickstart/awair-local-sim.log 2>&1 &
  .build/release/lbs-sim neurio --port 18447 > .quickstart/neurio-sim.log 2>&1 &
  .build/release/lbs-sim sense --port 18449 --password-file .quickstart/sense-password > .quickstart/sense-sim.log 2>&1 &
  .build/release/lbs-sim emporia --port 18448 --username home@example.com --password-file .quickstart/emporia-password > .quickstart/emporia-sim.log 2>&1 &
  .build/release/lbs-sim matter --port 18450 --nodes Tests/Fixtures/matter/nodes > .quickstart/matter-sim.log 2>&1 &
  .build/release/lbs-sim flume --port 18446 --client-secret-file .quickstart/flume-secret --password-file .quickstart/flume-password > .quickstart/flume-sim.log 2>&1 &
  trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
  for p in 18441 18442 18443 18444 18445 18446 18447 18448 18449 18450; do for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/"$p") 2>/dev/null && break; sleep 0.1; done; done
  mkdir -p .quickstart/green-button
  cp Tests/Fixtures/green_button/*.xml .quickstart/green-button/
  extra="
  - {type: powerwall, id: pw, url: \"http://127.0.0.1:18441\", password_file: powerwall-password, energy_home: [grid_power, battery_power, battery_level, grid_import_energy, grid_export_energy, battery_charge_energy, battery_discharge_energy, home_power, home_energy]}
  - {type: solaredge, id: se, url: \"http://127.0.0.1:18442/v2\", api_key_file: solaredge-key}
  - {type: enphase, id: envoy, url: \"http://127.0.0.1:18443\", token_file: envoy-token}
  - {type: green_button, id: utility, path: green-button, energy_home: [gas_volume]}
  - {type: awair, id: awair, url: \"http://127.0.0.1:18444/v1\", token_file: awair-token}
  - {type: awair_local, id: air, url: \"http://127.0.0.1:18445\", room: Office}
  - {type: flume, id: flume, url: \"http://127.0.0.1:18446\", client_id: flume, client_secret_file: flume-secret, username: flume@example.com, password_file: flume-password}
  - {type: neurio, id: neurio, url: \"http://127.0.0.1:18447\", energy_home: []}
  - {type: emporia, id: vue, url: \"http://127.0.0.1:18448\", auth_url: \"http://127.0.0.1:18448/\", username: home@example.com, password_file: emporia-password, energy_home: []}
  - {type: sense, id: sense, url: \"http://127.0.0.1:18449/apiservice/api/v1\", realtime_url: \"ws://127.0.0.1:18449\", email: sense@example.com, password_file: sense-password, energy_home: []}
  - {type: matter, id: matter, url: \"ws://127.0.0.1:18450/ws\"}"
fi
cat > .quickstart/config.yaml <<YAML
mqtt:
  url: mqtt://127.0.0.1:$port
vendors:
  - type: demo
    id: demo$extra
storage:
  path: gateway.sqlite
YAML
echo "lbs-gateway running with the demo vendor$($with_simulators && echo ', the Powerwall, SolarEdge, Enphase, Awair, Flume, Neurio, Emporia, Sense and Matter simulators and the Green Button samples'); try: mosquitto_sub -t 'lbs/#' -v"
if $with_simulators; then
  .build/release/lbs-gateway run --config .quickstart/config.yaml
else
  exec .build/release/lbs-gateway run --config .quickstart/config.yaml
fi
