#!/usr/bin/env python3
"""The comparison peer for `lbs-bench peer`: a minimal one-vendor MQTT bridge of the kind people run today
(paho-mqtt + requests, blocking HTTP in the MQTT callback, no durability, no breaker), written for this
comparison only. It bridges the consciousness backend the way lbs-gateway does, on the same topics:

  <base>/device/<prefix>_<id>          retained state {"state":"ON"|"OFF"} (published after login and after a command)
  <base>/device/<prefix>_<id>/set      {"state":"ON"|"OFF"} -> PUT /api/v1/devices/<id>/control -> new state
  <base>/bridge/state                  online / offline (last will)

  peer-bridge.py --broker-port P [--broker-host H] [--base lbs] --backend URL [--username admin] --password-file F

Set up with deploy/bench/peer-setup.sh (a venv with pinned paho-mqtt and requests).
"""
import argparse
import json
import sys

import paho.mqtt.client as mqtt
import requests


def compact(value):
    return json.dumps(value, separators=(",", ":"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker-host", default="127.0.0.1")
    parser.add_argument("--broker-port", type=int, required=True)
    parser.add_argument("--base", default="lbs")
    parser.add_argument("--prefix", default="house")
    parser.add_argument("--backend", required=True)
    parser.add_argument("--username", default="admin")
    parser.add_argument("--password-file", required=True)
    args = parser.parse_args()
    with open(args.password_file, encoding="utf-8") as handle:
        password = handle.read().rstrip("\r\n")

    api = args.backend.rstrip("/") + "/api/v1"
    http = requests.Session()
    token = {"value": None}

    def login():
        answer = http.post(api + "/auth/login", json={"username": args.username, "password": password}, timeout=10)
        answer.raise_for_status()
        token["value"] = answer.json()["access_token"]

    def call(method, path, body=None):
        for _ in range(2):
            if token["value"] is None:
                login()
            answer = http.request(method, api + path, json=body, timeout=10,
                                  headers={"Authorization": "Bearer " + token["value"]})
            if answer.status_code == 401:
                token["value"] = None
                continue
            answer.raise_for_status()
            return answer.json()
        raise RuntimeError("the backend refused the login")

    def state_of(device):
        status = device.get("status")
        power = (device.get("properties") or {}).get("power")
        on = status == "active" or (status != "inactive" and power is True)
        return {"state": "ON" if on else "OFF"}

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="peer-bridge-" + args.base)
    client.will_set(args.base + "/bridge/state", "offline", qos=1, retain=True)

    def on_connect(mqtt_client, _userdata, _flags, _reason, _properties):
        mqtt_client.subscribe(args.base + "/device/+/set", qos=1)
        for device in call("GET", "/devices").get("devices", []):
            mqtt_client.publish("%s/device/%s_%s" % (args.base, args.prefix, device["id"]), compact(state_of(device)), qos=0, retain=True)
        mqtt_client.publish(args.base + "/bridge/state", "online", qos=1, retain=True)
        print("peer-bridge: online", flush=True)

    def on_message(mqtt_client, _userdata, message):
        try:
            device_id = message.topic.split("/")[-2]
            if not device_id.startswith(args.prefix + "_"):
                return
            wanted = str(json.loads(message.payload).get("state", "")).upper()
            action = {"ON": "turn_on", "OFF": "turn_off"}.get(wanted)
            if action is None:
                print("peer-bridge: %s: no state ON/OFF" % message.topic, file=sys.stderr, flush=True)
                return
            answer = call("PUT", "/devices/%s/control" % device_id[len(args.prefix) + 1:], {"action": action, "value": None})
            if answer.get("status") == "success":
                mqtt_client.publish("%s/device/%s" % (args.base, device_id), compact({"state": wanted}), qos=0, retain=True)
        except Exception as error:  # a bridge of this kind logs and carries on
            print("peer-bridge: %s failed: %s" % (message.topic, error), file=sys.stderr, flush=True)

    client.on_connect = on_connect
    client.on_message = on_message
    client.connect(args.broker_host, args.broker_port, keepalive=60)
    try:
        client.loop_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
