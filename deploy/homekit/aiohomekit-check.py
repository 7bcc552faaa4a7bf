#!/usr/bin/env python3
"""Pair with a HAP accessory over IP using aiohomekit (Home Assistant's controller), no mDNS.

    aiohomekit-check.py --host 127.0.0.1 --port P --setup-code 031-45-154 --pairing-file F
        pair-setup (retried once: stock HAP-python fails ~1 in 70 pair-setups on an SRP
        leading-zero bug; hap-peer.py fixes it unless --stock-srp), save the pairing to F, pair-verify, GET /accessories
    aiohomekit-check.py --host 127.0.0.1 --port P --pairing-file F --verify-only
        reload the saved pairing, pair-verify, GET /accessories

Options for checks: --compare FIXTURE (served vs recorded database), --write AID.IID=JSON
(controller write), --subscribe AID.IID --control-port C --set JSON (subscribe, change the
value through hap-peer's control channel, wait for the EVENT), --wait SECONDS.
--swap FIXTURE --control-port C: after those checks, POST /database on the peer and, over the
same HAP session, GET /accessories again and compare it with FIXTURE; --swap-subscribe AID.IID
--swap-set JSON then checks an EVENT from the new database. GET /info gives c# before/after.
With --set, "event_timing" gives time.time() stamps: posted_at (before POST /set), event_at
(aiohomekit's event callback), sent_at (from the reply, hap-peer --event-delay 0 only) and
event_after_post_ms / event_after_sent_ms. --repeat N (with --subscribe/--set, a number) sets
value, value+1, ... N times on the same subscription and adds "latency_ms" min/median/max
(event_after_post_ms; event_after_sent_ms when sent_at is reported).

Prints one JSON object: {"accessories": N, "paired": true, ...}.
The host/port pairing works because aiohomekit's IpDiscovery only needs a HomeKitService
record (address, port, feature flags); we build it by hand instead of browsing zeroconf.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
import urllib.error
import urllib.request

from aiohomekit.characteristic_cache import CharacteristicCacheMemory
from aiohomekit.controller.ip.controller import IpController
from aiohomekit.controller.ip.discovery import IpDiscovery
from aiohomekit.model import Accessories, Categories
from aiohomekit.model.feature_flags import FeatureFlags
from aiohomekit.model.status_flags import StatusFlags
from aiohomekit.zeroconf import HAP_TYPE_TCP, HomeKitService

ALIAS = "hap-peer"
META_KEYS = ("type", "perms", "format", "unit", "minValue", "maxValue", "minStep", "maxLen",
             "valid-values", "valid-values-range", "description", "value")


def full_uuid(t: str) -> str:
    t = str(t).upper()
    return t if "-" in t else t.rjust(8, "0") + "-0000-1000-8000-0026BB765291"


def index(accessories):
    """{(aid, 's'|'c', iid): normalised record} for a /accessories list."""
    out = {}
    for acc in accessories:
        aid = acc["aid"]
        for svc in acc["services"]:
            out[(aid, "s", svc["iid"])] = {
                "type": full_uuid(svc["type"]),
                "primary": svc.get("primary"),
                "hidden": svc.get("hidden"),
                "linked": svc.get("linked"),
            }
            for ch in svc["characteristics"]:
                rec = {k: ch.get(k) for k in META_KEYS}
                rec["type"] = full_uuid(ch["type"])
                rec["service"] = svc["iid"]
                out[(aid, "c", ch["iid"])] = rec
    return out


def compare(served, recorded):
    got, want = index(served), index(recorded)
    diffs = []
    for key in sorted(set(got) | set(want), key=str):
        if key not in got:
            diffs.append(f"{key}: missing from served")
        elif key not in want:
            diffs.append(f"{key}: not in fixture")
        elif got[key] != want[key]:
            for k in want[key]:
                if got[key].get(k) != want[key].get(k):
                    diffs.append(f"{key} {k}: served {got[key].get(k)!r} recorded {want[key].get(k)!r}")
    return diffs


def control(port: int, method: str, path: str, payload=None):
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as ex:
        return json.loads(ex.read())


async def control_async(port: int, method: str, path: str, payload=None):
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, lambda: control(port, method, path, payload))


async def subscribe_and_wait(pairing, args, target: str, value, result: dict, prefix: str = ""):
    """Subscribe to target, optionally POST /set value on the peer, wait for the EVENT."""
    aid, iid = parse_id(target)
    loop = asyncio.get_running_loop()
    got = loop.create_future()

    def on_event(event):
        if (aid, iid) in event and "value" in event[(aid, iid)] and not got.done():
            got.set_result((event[(aid, iid)]["value"], time.time()))

    unsub = pairing.dispatcher_connect(on_event)
    try:
        status = await pairing.subscribe([(aid, iid)])
        result[prefix + "subscribe_status"] = {f"{k[0]}.{k[1]}": v for k, v in (status or {}).items()}
        repeat = max(1, getattr(args, "repeat", 1) or 1) if not prefix else 1
        samples = []
        for n in range(repeat):
            if n:
                got = loop.create_future()
            posted_at = time.time()
            if args.control_port and value is not None:
                val = json.loads(value)
                if n and isinstance(val, (int, float)) and not isinstance(val, bool):
                    val += n
                result[prefix + "control_set"] = await control_async(
                    args.control_port, "POST", "/set", {"aid": aid, "iid": iid, "value": val})
            try:
                ev_value, event_at = await asyncio.wait_for(got, args.wait)
                result[prefix + "event"] = {target: ev_value}
            except asyncio.TimeoutError:
                result[prefix + "event"] = None
                break
            if args.control_port and value is not None:
                sent_at = (result[prefix + "control_set"] or {}).get("sent_at")
                timing = {"posted_at": posted_at, "event_at": event_at, "sent_at": sent_at,
                          "event_after_post_ms": round((event_at - posted_at) * 1000, 3),
                          "event_after_sent_ms": None if sent_at is None else round((event_at - sent_at) * 1000, 3)}
                result[prefix + "event_timing"] = timing
                samples.append(timing)
        if len(samples) > 1:
            def stats(key):
                vals = sorted(t[key] for t in samples if t[key] is not None)
                if not vals:
                    return None
                return {"n": len(vals), "min": vals[0], "median": vals[len(vals) // 2], "max": vals[-1]}
            result[prefix + "latency_ms"] = {"event_after_post": stats("event_after_post_ms"),
                                             "event_after_sent": stats("event_after_sent_ms")}
    finally:
        if callable(unsub):
            unsub()


def parse_id(text: str):
    aid, iid = text.split(".")
    return int(aid), int(iid)


async def pair(controller, host, port, code):
    desc = HomeKitService(
        name="hap-peer", id="00:00:00:00:00:00", model="", feature_flags=FeatureFlags(0),
        status_flags=StatusFlags(1), config_num=1, state_num=1, category=Categories.OTHER,
        protocol_version="1.1", type=HAP_TYPE_TCP, address=host, addresses=[host], port=port,
    )
    for attempt in (1, 2):
        discovery = IpDiscovery(controller, desc)
        try:
            finish = await discovery.async_start_pairing(ALIAS)
            return await finish(code), attempt
        except Exception as ex:  # pylint: disable=broad-except
            await discovery.close()
            if attempt == 2:
                raise
            logging.warning("pair-setup attempt 1 failed (%s: %s); retrying once", type(ex).__name__, ex)
    raise AssertionError("unreachable")


async def run(args) -> dict:
    controller = IpController(char_cache=CharacteristicCacheMemory(), zeroconf_instance=None)
    result: dict = {}
    if args.verify_only:
        with open(args.pairing_file, encoding="utf-8") as fh:
            data = json.load(fh)[ALIAS]
        data["AccessoryIP"], data["AccessoryIPs"], data["AccessoryPort"] = args.host, [args.host], args.port
        pairing = controller.load_pairing(ALIAS, data)
    else:
        pairing, attempts = await pair(controller, args.host, args.port, args.setup_code)
        result["pair_setup_attempts"] = attempts
        with open(args.pairing_file, "w", encoding="utf-8") as fh:
            json.dump({ALIAS: pairing.pairing_data}, fh, indent=2)
    try:
        await pairing._ensure_connected()  # pair-verify  # pylint: disable=protected-access
        raw = (await pairing.connection.get_json("/accessories"))["accessories"]
        parsed = await pairing.list_accessories_and_characteristics()  # aiohomekit's own parse
        Accessories.from_list(parsed)
        result.update(accessories=len(raw), paired=True, accessory_id=pairing.pairing_data["AccessoryPairingID"])
        if args.dump:
            with open(args.dump, "w", encoding="utf-8") as fh:
                json.dump(raw, fh, indent=2)
        if args.compare:
            with open(args.compare, encoding="utf-8") as fh:
                diffs = compare(raw, json.load(fh))
            result["differences"] = diffs
        if args.write:
            target, _, value = args.write.partition("=")
            aid, iid = parse_id(target)
            result["write"] = {f"{k[0]}.{k[1]}": v for k, v in
                               (await pairing.put_characteristics([(aid, iid, json.loads(value))])).items()}
            result["read_back"] = {f"{k[0]}.{k[1]}": v for k, v in
                                   (await pairing.get_characteristics([(aid, iid)])).items()}
        if args.subscribe:
            await subscribe_and_wait(pairing, args, args.subscribe, args.set, result)
        if args.swap:
            swap: dict = {}
            result["swap"] = swap
            swap["c#_before"] = (await control_async(args.control_port, "GET", "/info"))["c#"]
            swap["reply"] = await control_async(args.control_port, "POST", "/database", {"fixture": args.swap})
            swap["c#_after"] = (await control_async(args.control_port, "GET", "/info"))["c#"]
            # same session (same TCP connection, same pair-verify keys) as above
            raw2 = (await pairing.connection.get_json("/accessories"))["accessories"]
            swap["accessories"] = len(raw2)
            with open(args.swap, encoding="utf-8") as fh:
                swap["differences"] = compare(raw2, json.load(fh))
            if args.dump:
                with open(args.dump + ".swapped", "w", encoding="utf-8") as fh:
                    json.dump(raw2, fh, indent=2)
            swap["pairings"] = await control_async(args.control_port, "GET", "/pairings")
            if args.swap_subscribe:
                await subscribe_and_wait(pairing, args, args.swap_subscribe, args.swap_set, swap)
    finally:
        await pairing.close()
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--setup-code", default="031-45-154")
    p.add_argument("--pairing-file", required=True)
    p.add_argument("--verify-only", action="store_true")
    p.add_argument("--dump", help="write the served /accessories list here")
    p.add_argument("--compare", help="fixture to compare the served database with")
    p.add_argument("--write", help="AID.IID=JSON value to write as the controller")
    p.add_argument("--subscribe", help="AID.IID to subscribe to and wait for an event")
    p.add_argument("--control-port", type=int, help="hap-peer control port, for --set")
    p.add_argument("--set", help="JSON value to POST /set on the peer after subscribing")
    p.add_argument("--swap", help="fixture to POST /database on the peer (needs --control-port)")
    p.add_argument("--swap-subscribe", help="AID.IID in the new database to subscribe to")
    p.add_argument("--swap-set", help="JSON value to POST /set on it after subscribing")
    p.add_argument("--repeat", type=int, default=1, help="with --set: N value changes, latency stats")
    p.add_argument("--wait", type=float, default=5.0, help="seconds to wait for the event")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.DEBUG if args.verbose else logging.WARNING)
    try:
        result = asyncio.run(run(args))
    except Exception as ex:  # pylint: disable=broad-except
        print(json.dumps({"accessories": 0, "paired": False, "error": f"{type(ex).__name__}: {ex}"}))
        return 1
    print(json.dumps(result))
    ok = result.get("paired") and not result.get("differences")
    if args.subscribe and not result.get("event"):
        ok = False
    if args.swap:
        swap = result.get("swap") or {}
        if not (swap.get("reply") or {}).get("ok") or swap.get("differences"):
            ok = False
        if not isinstance(swap.get("c#_after"), int) or swap["c#_after"] <= swap.get("c#_before", 0):
            ok = False
        if args.swap_subscribe and not swap.get("event"):
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
