#!/usr/bin/env python3
"""hap-controller: Home Assistant's HomeKit controller (aiohomekit) driven over stdin/stdout.

An independent HAP-over-IP controller for integration tests of a HAP accessory server (the
gateway's HomeKit bridge, or deploy/homekit/hap-peer.py). Run it with the venv's python
(deploy/homekit/peer-setup.sh prints its path):

    $PY deploy/homekit/hap-controller.py [-v]

One JSON object per line on stdin; for each, exactly one JSON line on stdout (flushed):
{"ok":true, ...result} or {"ok":false,"error":"<ExceptionClass>: <message>"}. Logs go to
stderr only (stdout is reserved for the replies, even for stray prints from libraries).
Commands are handled one at a time, in order, on one asyncio loop that lives as long as the
process; the pairing's HAP connection stays open between commands and EVENT frames that
arrive on it at any time are buffered.

  {"cmd":"pair","host":"127.0.0.1","port":P,"setup_code":"XXX-XX-XXX","pairing_file":"/path"
   [,"alias":"hap-peer"][,"verify":false][,"attempts":1]}
      pair-setup (M1-M6) without mDNS, save the pairing as {alias: pairing_data} (aiohomekit's
      pairing-file format, readable by aiohomekit-check.py --verify-only), make it the current
      pairing. -> {"accessory_id":"XX:XX:..","pairing_id":"<our controller pairing id>"}
      Pair-verify happens lazily on the next command that talks to the accessory, or at once
      with "verify":true (then also "connected":true). "attempts" (default 1) retries a failed
      pair-setup, e.g. against stock HAP-python's SRP leading-zero bug; no retries by default
      so that a refusal is reported as such. A refusal is ok:false with aiohomekit's exception
      class: "UnavailableError: ..." (already paired), "AuthenticationError: ..." (wrong
      code), "MalformedPinError: ..." (code not DDD-DD-DDD), "MaxPeersError", "BusyError", ...
      The current pairing (if any) is only replaced when the new pair-setup succeeded.
  {"cmd":"load","pairing_file":"/path"[,"host":H,"port":P][,"alias":A]}
      load a saved pairing (as after a controller restart; host/port override the saved
      AccessoryIP(s)/AccessoryPort) and connect (pair-verify, 10 s timeout as in aiohomekit).
      -> {"accessory_id":..,"pairing_id":..,"connected":true}. The file may hold
      {alias: data} (alias picked by "alias", or the only entry) or the bare data dict.
  {"cmd":"accessories"}
      GET /accessories (fresh, over the pairing's session) -> {"accessories":[...]} exactly as
      received (before aiohomekit normalises types). It is then parsed by aiohomekit's model
      (Accessories.from_list, what Home Assistant does) and becomes the pairing's accessory
      map; if that parse fails the reply is ok:false, with the raw list still in "accessories".
  {"cmd":"read","ids":["2.9","2.10"]}
      aiohomekit get_characteristics (GET /characteristics?id=...) ->
      {"values":{"2.9":true},"statuses":{"2.10":-70402}}; statuses only for failed items.
      "missing":[..] lists requested ids absent from the response (only when non-empty).
  {"cmd":"write","items":[["2.9",true],["2.10",50]]}
      aiohomekit put_characteristics (one PUT /characteristics) -> {"statuses":{"2.10":-70404}}
      (only non-zero statuses; empty when all succeeded). If an id is not in the accessory map
      aiohomekit would crash before sending (KeyError/AttributeError); such a write is sent
      with aiohomekit's connection directly (same PUT body) and the reply has "raw":true.
  {"cmd":"subscribe","ids":["2.9"]} / {"cmd":"unsubscribe","ids":[..]}
      PUT /characteristics with ev:true/false (aiohomekit sends one PUT per aid run) ->
      {"statuses":{..}} (non-zero only). aiohomekit remembers subscriptions even if refused
      and re-subscribes after a reconnect.
  {"cmd":"events"[,"wait":2.0][,"min":1]}
      wait up to "wait" seconds (default 0) until at least "min" (default 1) events are
      buffered, then return and clear them all (fewer than min after a timeout) ->
      {"events":[{"id":"2.9","value":true,"t":<time.time() on arrival>},...]}. One entry per
      characteristic in each EVENT/1.0 frame, in arrival order; items carrying a "status" get
      "status" too. Only real EVENT frames are buffered (aiohomekit also feeds its listeners
      with the values of its own writes; those are not events and are not buffered).
  {"cmd":"list_pairings"}
      -> {"pairings":[{"id":"..","admin":true,"permissions":1,"public_key":"<hex>"},...]}
  {"cmd":"add_pairing","pairing_file":"/path2"[,"admin":false][,"id":..]}
      (extra) make a new controller identity, add it on the accessory (POST /pairings
      AddPairing, aiohomekit add_pairing; "admin" default false) and write a pairing file
      for it that another hap-controller can "load" (e.g. to test a non-admin controller).
      With "id"+"public_key" (hex Ed25519) instead, adds that controller; no file.
      -> {"id":..,"admin":..,"public_key":..}
  {"cmd":"remove_pairing"[,"id":"<controller pairing id>"]}
      remove a pairing on the accessory (POST /pairings RemovePairing); no id = our own, i.e.
      unpair: aiohomekit then shuts the pairing down (connection closed, the pairing file is
      left as it is) -> {"removed":"<id>","own":true|false}
  {"cmd":"status"}
      -> {"loaded":bool,"connected":bool,"accessory_id":..,"subscriptions":[..],"buffered":N}
  {"cmd":"close"}
      close the connection, reply {"ok":true}, exit 0. stdin EOF (or SIGTERM) does the same
      without a reply.

Every command takes an optional "timeout" (seconds, default 60); when it expires the reply
is ok:false "TimeoutError: ..." (aiohomekit then drops the connection, as it does on its own
30 s request timeout, and reconnects on the next command).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import logging
import os
import signal
import sys
import threading
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from aiohomekit.characteristic_cache import CharacteristicCacheMemory
from aiohomekit.controller.ip.controller import IpController
from aiohomekit.controller.ip.discovery import IpDiscovery
from aiohomekit.controller.ip.pairing import IpPairing, format_characteristic_list
from aiohomekit.exceptions import AccessoryDisconnectedError, HttpErrorResponse
from aiohomekit.model import Accessories, AccessoriesState, Categories
from aiohomekit.model.feature_flags import FeatureFlags
from aiohomekit.model.status_flags import StatusFlags
from aiohomekit.protocol.statuscodes import to_status_code
from aiohomekit.uuid import normalize_uuid
from aiohomekit.zeroconf import HAP_TYPE_TCP, HomeKitService

logger = logging.getLogger("hap-controller")

DEFAULT_ALIAS = "hap-peer"  # same key as aiohomekit-check.py, so its --verify-only reads our files
DEFAULT_TIMEOUT = 60.0


class CommandError(Exception):
    """A bad command (reported as ok:false, like any other exception)."""


def parse_id(text: Any) -> Tuple[int, int]:
    if isinstance(text, (list, tuple)) and len(text) == 2:
        return int(text[0]), int(text[1])
    aid, sep, iid = str(text).partition(".")
    if not sep:
        raise CommandError(f"bad characteristic id {text!r} (want \"aid.iid\")")
    return int(aid), int(iid)


def fmt_id(key: Tuple[int, int]) -> str:
    return f"{key[0]}.{key[1]}"


def error_text(ex: BaseException) -> str:
    return f"{type(ex).__name__}: {ex}"


class Controller:
    def __init__(self) -> None:
        self.controller = IpController(char_cache=CharacteristicCacheMemory(), zeroconf_instance=None)
        self.pairing: Optional[IpPairing] = None
        self.events: List[Dict[str, Any]] = []
        self.events_changed = asyncio.Event()

    # -- helpers -------------------------------------------------------------------------

    def _require(self) -> IpPairing:
        if self.pairing is None:
            raise CommandError("no pairing (use pair or load first)")
        return self.pairing

    def _hook_events(self, pairing: IpPairing) -> None:
        """Buffer every EVENT frame the connection hands to the pairing."""
        original = pairing.event_received

        def event_received(event: Any) -> None:
            arrived = time.time()
            try:
                for item in event.get("characteristics", []) if isinstance(event, dict) else []:
                    if not isinstance(item, dict) or "aid" not in item or "iid" not in item:
                        logger.warning("malformed event item: %r", item)
                        continue
                    rec: Dict[str, Any] = {"id": f"{item['aid']}.{item['iid']}", "value": item.get("value"),
                                           "t": arrived}
                    if "status" in item:
                        rec["status"] = item["status"]
                    self.events.append(rec)
                self.events_changed.set()
            except Exception:  # pylint: disable=broad-except
                logger.exception("could not buffer event %r", event)
            logger.debug("EVENT %r", event)
            original(copy.deepcopy(event))  # aiohomekit's format_characteristic_list mutates it

        pairing.event_received = event_received  # type: ignore[method-assign]

    async def _replace_pairing(self, new: Optional[IpPairing]) -> None:
        old, self.pairing = self.pairing, new
        if old is not None and old is not new:
            try:
                await old.close()
            except Exception:  # pylint: disable=broad-except
                logger.exception("closing the previous pairing")
        self.events.clear()

    async def _ensure_accessories(self, pairing: IpPairing) -> None:
        if not pairing.accessories:
            await pairing.list_accessories_and_characteristics()

    # -- commands ------------------------------------------------------------------------

    @staticmethod
    async def _connect_discovery(discovery: IpDiscovery) -> None:
        """Plain TCP connect for pair-setup, with the 10 s limit aiohomekit uses for pairings
        (IpDiscovery itself would retry a refused connection for ever)."""
        try:
            await asyncio.wait_for(discovery.connection.ensure_connection(), 10)
        except asyncio.TimeoutError:
            last = discovery.connection.last_connector_error
            raise AccessoryDisconnectedError(
                f"could not connect to {discovery.description.address}:{discovery.description.port}"
                + (f": {last} ({type(last).__name__})" if last else "")) from None

    async def cmd_pair(self, req: Dict[str, Any]) -> Dict[str, Any]:
        host = req.get("host", "127.0.0.1")
        port = int(req["port"])
        code = req["setup_code"]
        path = req["pairing_file"]
        alias = req.get("alias", DEFAULT_ALIAS)
        attempts = max(1, int(req.get("attempts", 1)))
        desc = HomeKitService(
            name=alias, id="00:00:00:00:00:00", model="", feature_flags=FeatureFlags(0),
            status_flags=StatusFlags(1), config_num=1, state_num=1, category=Categories.OTHER,
            protocol_version="1.1", type=HAP_TYPE_TCP, address=host, addresses=[host], port=port,
        )
        pairing = None
        for attempt in range(1, attempts + 1):
            discovery = IpDiscovery(self.controller, desc)
            try:
                await self._connect_discovery(discovery)
                finish = await discovery.async_start_pairing(alias)
                pairing = await finish(code)
                break
            except BaseException as ex:  # pylint: disable=broad-except
                await discovery.close()  # also stops aiohomekit's reconnect loop
                if attempt == attempts or not isinstance(ex, Exception):
                    raise
                logger.warning("pair-setup attempt %d failed (%s); retrying", attempt, error_text(ex))
        assert pairing is not None
        data = dict(pairing.pairing_data)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({alias: data}, fh, indent=2)
        os.replace(tmp, path)
        self._hook_events(pairing)
        await self._replace_pairing(pairing)
        result: Dict[str, Any] = {"accessory_id": data["AccessoryPairingID"], "pairing_id": data["iOSPairingId"]}
        if attempts > 1:
            result["attempts"] = attempt
        if req.get("verify"):
            await pairing._ensure_connected()  # pylint: disable=protected-access
            result["connected"] = bool(pairing.is_connected)
        return result

    async def cmd_load(self, req: Dict[str, Any]) -> Dict[str, Any]:
        with open(req["pairing_file"], encoding="utf-8") as fh:
            stored = json.load(fh)
        alias = req.get("alias")
        if isinstance(stored, dict) and "AccessoryPairingID" in stored:
            data = stored
            alias = alias or DEFAULT_ALIAS
        elif isinstance(stored, dict) and alias:
            data = stored[alias]
        elif isinstance(stored, dict) and len(stored) == 1:
            alias, data = next(iter(stored.items()))
        else:
            raise CommandError("pairing file holds several pairings; give \"alias\"")
        data = dict(data)
        if req.get("host"):
            data["AccessoryIP"], data["AccessoryIPs"] = req["host"], [req["host"]]
        if req.get("port"):
            data["AccessoryPort"] = int(req["port"])
        await self._replace_pairing(None)
        pairing = self.controller.load_pairing(alias, data)
        if pairing is None:
            raise CommandError("not an IP pairing (Connection != \"IP\" or no AccessoryPairingID)")
        self._hook_events(pairing)
        try:
            await pairing._ensure_connected()  # pair-verify  # pylint: disable=protected-access
        except BaseException:
            await pairing.close()  # stop aiohomekit's background reconnect loop
            raise
        self.pairing = pairing
        return {"accessory_id": data["AccessoryPairingID"], "pairing_id": data.get("iOSPairingId"),
                "connected": bool(pairing.is_connected)}

    async def cmd_accessories(self, req: Dict[str, Any]) -> Dict[str, Any]:
        pairing = self._require()
        await pairing._ensure_connected()  # pylint: disable=protected-access
        response = await pairing.connection.get_json("/accessories")
        raw = response["accessories"]
        # What IpPairing.list_accessories_and_characteristics does with the same response.
        parsed = copy.deepcopy(raw)
        try:
            for accessory in parsed:
                for service in accessory["services"]:
                    service["type"] = normalize_uuid(service["type"])
                    for characteristic in service["characteristics"]:
                        characteristic["type"] = normalize_uuid(characteristic["type"])
            state = AccessoriesState(Accessories.from_list(parsed), pairing.config_num or 0)
        except Exception as ex:  # pylint: disable=broad-except
            return {"ok": False, "error": f"{error_text(ex)} (aiohomekit could not parse /accessories)",
                    "accessories": raw}
        pairing._accessories_state = state  # pylint: disable=protected-access
        pairing._update_accessories_state_cache()  # pylint: disable=protected-access
        return {"accessories": raw}

    @staticmethod
    def _http_error_result(ex: HttpErrorResponse) -> Dict[str, Any]:
        """aiohomekit raises on 4xx; report the HAP statuses in the body anyway."""
        resp = ex.response
        result: Dict[str, Any] = {"http_status": resp.code, "aiohomekit_raised": error_text(ex), "statuses": {}}
        try:
            body = json.loads(bytes(resp.body).decode("utf-8")) if resp.body else {}
        except ValueError:
            body = {}
        result["body"] = body
        if isinstance(body, dict):
            for item in body.get("characteristics", []) or []:
                if isinstance(item, dict) and "aid" in item and "iid" in item and item.get("status", 0) != 0:
                    result["statuses"][f"{item['aid']}.{item['iid']}"] = item["status"]
        return result

    async def cmd_read(self, req: Dict[str, Any]) -> Dict[str, Any]:
        pairing = self._require()
        ids = [parse_id(i) for i in req["ids"]]
        try:
            response = await pairing.get_characteristics(ids)
        except HttpErrorResponse as ex:
            result = self._http_error_result(ex)
            result["values"] = {}
            return result
        values: Dict[str, Any] = {}
        statuses: Dict[str, int] = {}
        for key, item in response.items():
            if "value" in item:
                values[fmt_id(key)] = item["value"]
            if item.get("status", 0) != 0:
                statuses[fmt_id(key)] = item["status"]
        result: Dict[str, Any] = {"values": values, "statuses": statuses}
        missing = [fmt_id(k) for k in ids if k not in response]
        if missing:
            result["missing"] = missing
        return result

    async def cmd_write(self, req: Dict[str, Any]) -> Dict[str, Any]:
        pairing = self._require()
        items = []
        for entry in req["items"]:
            if isinstance(entry, dict):
                aid, iid = parse_id(entry["id"])
                value = entry["value"]
            else:
                (aid, iid), value = parse_id(entry[0]), entry[1]
            items.append((aid, iid, value))
        await pairing._ensure_connected()  # pylint: disable=protected-access
        await self._ensure_accessories(pairing)
        known = all(
            pairing.accessories.has_aid(aid) and pairing.accessories.aid(aid).characteristics.iid(iid) is not None
            for aid, iid, _ in items
        )
        try:
            if known:
                response = await pairing.put_characteristics(items)
                statuses = {fmt_id(k): v["status"] for k, v in response.items() if v.get("status", 0) != 0}
                return {"statuses": statuses}
            body = {"characteristics": [{"aid": aid, "iid": iid, "value": value} for aid, iid, value in items]}
            response = await pairing.connection.put_json("/characteristics", body)
        except HttpErrorResponse as ex:
            result = self._http_error_result(ex)
            if not known:
                result["raw"] = True
            return result
        statuses = {}
        for item in (response or {}).get("characteristics", []):
            if isinstance(item, dict) and "aid" in item and "iid" in item and item.get("status", 0) != 0:
                statuses[f"{item['aid']}.{item['iid']}"] = item["status"]
        return {"statuses": statuses, "raw": True}

    async def _subscription(self, req: Dict[str, Any], on: bool) -> Dict[str, Any]:
        pairing = self._require()
        ids = [parse_id(i) for i in req["ids"]]
        try:
            if on:
                response = await pairing.subscribe(ids)
            else:
                response = await pairing.unsubscribe(ids)
        except HttpErrorResponse as ex:
            return self._http_error_result(ex)
        statuses = {fmt_id(k): v["status"] for k, v in (response or {}).items() if v.get("status", 0) != 0}
        result: Dict[str, Any] = {"statuses": statuses}
        if on and not pairing.is_connected:
            result["connected"] = False  # aiohomekit swallows a failed connect on subscribe
        return result

    async def cmd_subscribe(self, req: Dict[str, Any]) -> Dict[str, Any]:
        return await self._subscription(req, True)

    async def cmd_unsubscribe(self, req: Dict[str, Any]) -> Dict[str, Any]:
        return await self._subscription(req, False)

    async def cmd_events(self, req: Dict[str, Any]) -> Dict[str, Any]:
        wait = float(req.get("wait", 0) or 0)
        want = int(req.get("min", 1))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while len(self.events) < want:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            self.events_changed.clear()
            try:
                await asyncio.wait_for(self.events_changed.wait(), remaining)
            except asyncio.TimeoutError:
                break
        events, self.events = self.events, []
        return {"events": events}

    async def cmd_list_pairings(self, req: Dict[str, Any]) -> Dict[str, Any]:
        pairing = self._require()
        pairings = await pairing.list_pairings()
        return {"pairings": [
            {"id": p.get("pairingId"), "admin": p.get("controllerType") == "admin",
             "permissions": p.get("permissions"), "public_key": p.get("publicKey")}
            for p in pairings
        ]}

    async def cmd_add_pairing(self, req: Dict[str, Any]) -> Dict[str, Any]:
        pairing = self._require()
        admin = bool(req.get("admin", False))
        if req.get("public_key"):
            new_id, ltpk = str(req["id"]), str(req["public_key"])
            ltsk = None
        else:
            if not req.get("pairing_file"):
                raise CommandError("add_pairing needs \"pairing_file\" (new identity) or \"id\"+\"public_key\"")
            key = ed25519.Ed25519PrivateKey.generate()
            new_id = str(req.get("id") or uuid.uuid4())
            ltsk = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                     serialization.NoEncryption()).hex()
            ltpk = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
        await pairing.add_pairing(new_id, ltpk, "Admin" if admin else "User")
        if ltsk is not None:
            data = dict(pairing.pairing_data)
            data.update(iOSPairingId=new_id, iOSDeviceLTSK=ltsk, iOSDeviceLTPK=ltpk)
            path = req["pairing_file"]
            tmp = f"{path}.tmp{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump({req.get("alias", DEFAULT_ALIAS): data}, fh, indent=2)
            os.replace(tmp, path)
        return {"id": new_id, "admin": admin, "public_key": ltpk}

    async def cmd_remove_pairing(self, req: Dict[str, Any]) -> Dict[str, Any]:
        pairing = self._require()
        own_id = pairing.pairing_data.get("iOSPairingId")
        target = req.get("id") or own_id
        await pairing.remove_pairing(target)
        return {"removed": target, "own": target == own_id}

    async def cmd_status(self, req: Dict[str, Any]) -> Dict[str, Any]:
        pairing = self.pairing
        return {
            "loaded": pairing is not None,
            "connected": bool(pairing and pairing.is_connected),
            "accessory_id": pairing.pairing_data.get("AccessoryPairingID") if pairing else None,
            "subscriptions": sorted(fmt_id(k) for k in pairing.subscriptions) if pairing else [],
            "buffered": len(self.events),
        }

    async def close(self) -> None:
        await self._replace_pairing(None)
        for pairing in list(self.controller.pairings.values()):
            try:
                await pairing.close()
            except Exception:  # pylint: disable=broad-except
                pass

    async def handle(self, req: Dict[str, Any]) -> Dict[str, Any]:
        cmd = req.get("cmd")
        handler = getattr(self, f"cmd_{cmd}", None) if isinstance(cmd, str) else None
        if handler is None:
            raise CommandError(f"unknown command {cmd!r}")
        result = await asyncio.wait_for(handler(req), float(req.get("timeout", DEFAULT_TIMEOUT)))
        if "ok" not in result:
            result = {"ok": True, **result}
        return result


def start_stdin_reader(loop: asyncio.AbstractEventLoop, queue: "asyncio.Queue[Optional[str]]") -> None:
    """Read stdin lines on a daemon thread (works for pipes, files and ttys; never blocks exit)."""

    def run() -> None:
        try:
            for line in sys.stdin:
                loop.call_soon_threadsafe(queue.put_nowait, line)
        except Exception:  # pylint: disable=broad-except
            logger.exception("reading stdin")
        finally:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, None)
            except RuntimeError:
                pass  # loop already closed

    threading.Thread(target=run, name="stdin", daemon=True).start()


async def main_loop(out) -> int:
    loop = asyncio.get_running_loop()
    queue: "asyncio.Queue[Optional[str]]" = asyncio.Queue()
    start_stdin_reader(loop, queue)
    try:
        loop.add_signal_handler(signal.SIGTERM, queue.put_nowait, None)
    except (NotImplementedError, RuntimeError):
        pass
    ctl = Controller()

    def reply(obj: Dict[str, Any]) -> None:
        try:
            text = json.dumps(obj, default=str)
        except (TypeError, ValueError) as ex:
            text = json.dumps({"ok": False, "error": f"reply not serialisable: {error_text(ex)}"})
        out.write(text + "\n")
        out.flush()

    try:
        while True:
            line = await queue.get()
            if line is None:
                logger.info("stdin closed; exiting")
                break
            line = line.strip()
            if not line:
                continue
            try:
                req = json.loads(line)
                if not isinstance(req, dict):
                    raise CommandError("a command must be a JSON object")
            except (ValueError, CommandError) as ex:
                reply({"ok": False, "error": error_text(ex)})
                continue
            if req.get("cmd") == "close":
                await ctl.close()
                reply({"ok": True})
                break
            logger.debug("command %s", line)
            try:
                result = await ctl.handle(req)
            except asyncio.TimeoutError:
                result = {"ok": False, "error": "TimeoutError: command did not finish within its timeout"}
            except Exception as ex:  # pylint: disable=broad-except
                logger.debug("command failed", exc_info=True)
                result = {"ok": False, "error": error_text(ex)}
            reply(result)
    finally:
        await ctl.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging (aiohomekit's too)")
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # Keep a private handle on the real stdout for replies; anything else that writes to
    # fd 1 / sys.stdout ends up on stderr.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        return asyncio.run(main_loop(out))
    except KeyboardInterrupt:
        return 0
    finally:
        out.flush()


if __name__ == "__main__":
    sys.exit(main())
