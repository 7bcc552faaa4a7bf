#!/usr/bin/env python3
"""hap-peer: a real HomeKit (HAP over IP) accessory that replays a recorded accessory database.

Built on HAP-python 5.0.0 (pair-setup, pair-verify, encrypted sessions, events and the
persist file are HAP-python's own). It serves one `/accessories` dump from
Tests/Fixtures/homekit/ so that lbs-gateway's HomeKit controller can be tested against a
real peer. Run it with the venv's python (deploy/homekit/peer-setup.sh prints its path):

    $PY deploy/homekit/hap-peer.py --fixture Tests/Fixtures/homekit/ecobee3.json --state-dir /tmp/peer1 \
        [--port 0] [--setup-code 031-45-154] [--control-port 0] [--name NAME] [--advertise]
        [--event-delay SECONDS]

When ready it prints exactly one line to stdout (then logs to stderr only):

    {"port":P,"control_port":C,"id":"XX:XX:XX:XX:XX:XX","setup_code":"031-45-154","c#":N}

--state-dir/accessory.state is HAP-python's persist file: accessory id, long-term keys, c# and
the pairings survive a restart (c# goes up when the served database changes). Values do not:
a restart serves the recorded values again. SIGTERM/SIGINT stop it cleanly (exit 0).

Served database vs the fixture (checked with GET /accessories over an aiohomekit session,
see aiohomekit-check.py --compare): aids, iids, service/characteristic types (exactly as
recorded: short "3E" or full UUID, original letter case), perms, format (including a recorded
`"format": null`), unit, minValue/maxValue/minStep/maxLen/valid-values, description,
primary/hidden/linked and the recorded values come out identical, in the recorded key order.
What differs:
  * per-connection `"ev"` flags present in some dumps are not served (HAP puts `ev` in
    /accessories only to say whether *this* connection is subscribed); none of the six
    fixtures here has one.
  * values are the *current* values: after a controller write or a POST /set they differ
    from the recording (that is the point). Reads return HAP-python's stored value; values
    are never re-validated, so recorded out-of-range values (schlage_sense 1.27 = 0 with
    minValue 1) are served as recorded. Controller writes and /set go through HAP-python's
    Characteristic.to_valid_value: numbers are rounded to minStep and clamped to
    minValue/maxValue, strings cut to maxLen (64 when absent), bools coerced.
  * the accessory's own Pairing service (0x55) in some dumps is served as ordinary
    characteristics (perms [] / value null); pairing itself is HAP-python's /pair-setup etc.
  * HAP-python keeps one IID map per accessory; where a dump reuses one number for a service
    and a characteristic (schlage_sense: 30, 34, 39), /characteristics reads and writes
    resolve the number to the characteristic.
Beyond stock HAP-python (all switchable):
  * --stock-srp off (default): the SRP leading-zero bug is fixed (B sent padded to 384 bytes,
    K = SHA-512(PAD(S)) as 64 bytes). Stock HAP-python 5.0.0 failed 7 of 500 pair-setups
    with aiohomekit (which pads as RFC 5054 says) when B, S or K start with a 0x00 byte; the
    fixed server passed 1,500 of 1,500.
  * --permissive off (default): /characteristics answers like real accessories: -70409 for an
    unknown aid.iid, -70404 for a write to a characteristic without "pw", -70405 for a read of
    one without "pr", -70406 for ev:true on one without "ev", -70410 for a write outside
    valid-values (stock HAP-python accepts the first four and answers -70402 to the last).
  * --event-delay SECONDS (default: not given = HAP-python's own event timing, untouched).
    HAP-python queues events per session and writes them after a 0.5 s coalescing window
    (hap_protocol.EVENT_COALESCE_TIME_WINDOW; button events go out on the next loop turn), so
    a newer value of the same aid.iid inside the window replaces the older one.
    --event-delay 0 patches HAPServerProtocol.queue_event/_send_events: every event is
    encrypted and written to each subscribed session before the change returns (one EVENT/1.0
    frame per change, no coalescing), and POST /set reports "sent_at" (see below). Meant for
    measuring a controller's event latency. --event-delay S > 0 only sets the window to S.

Control channel (plain HTTP/1.1 + JSON on 127.0.0.1:control_port, served on HAP-python's own
event loop, so no locking is needed):
    POST /set {"aid":1,"iid":9,"value":22.5[,"force":true]}  value change on the accessory side;
         subscribed controllers get an EVENT (HAP-python coalesces events for 0.5 s, see
         --event-delay, and only sends one when the value changed, unless "force")
         -> {"ok":true,"value":<stored>}
         With --event-delay 0 the reply also has "sent_at": time.time() (float, seconds since
         the epoch) taken when the encrypted EVENT frame for this change was handed to the
         transport of the first subscribed session (after encryption, just before
         transport.writelines, which sends it straight away on an idle socket), or null when
         no event was sent (no subscribed session, or an unchanged value without "force").
         The event is written before the reply (the reply waits at most 1 s for it); without
         --event-delay 0 the reply has no "sent_at".
    GET  /values      {"1.9":22.5,...} every characteristic's current value
    GET  /writes      [{"aid":1,"iid":9,"value":...},...] controller writes in order (value as
                      the controller sent it; /values shows it after HAP-python's validation)
    GET  /pairings    [{"id":"<controller pairing id>","admin":true},...]
    POST /unpair-all  forget every pairing (user reset); open HAP sessions are closed
    GET  /accessories the served database (same JSON a controller gets)
    GET  /info        the ready line again, with the current c#
    POST /database {"fixture":"<path>"}  swap the served database live, as a bridge does when
         accessories are added or removed behind it -> {"ok":true,"c#":<new c#>}. The new
         fixture is replayed like --fixture (its aids, iids, types, perms, recorded values);
         the display name stays. The HAP server, open sessions and pairings are untouched.
         c# is always incremented and persisted (and re-advertised with --advertise).
         Subscriptions survive only where the new database has a characteristic with the
         same aid.iid, the same type and "ev" in perms; all others are dropped, and events
         queued (not yet sent) for the old database are discarded. Controllers subscribe to
         the new characteristics as usual. An unreadable fixture or one without aid 1 is a
         400 and leaves the served database as it was. Relative paths are resolved against
         the peer's working directory. Controller writes (/writes) are kept.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from pyhap import hap_handler, hap_protocol, hsrp
from pyhap.accessory import Accessory, Bridge
from pyhap.accessory_driver import AccessoryDriver
from pyhap.characteristic import Characteristic
from pyhap.const import CATEGORY_BRIDGE, CATEGORY_OTHER
from pyhap.iid_manager import IIDManager
from pyhap.service import Service
from pyhap.util import hap_type_to_uuid, long_to_bytes

logger = logging.getLogger("hap-peer")

STATUS_OK = 0
STATUS_READ_ONLY = -70404
STATUS_WRITE_ONLY = -70405
STATUS_NO_NOTIFY = -70406
STATUS_NO_RESOURCE = -70409
STATUS_INVALID_VALUE = -70410

# Category advertised in mDNS (ci=) from the primary service of aid 1; only used with --advertise.
CATEGORY_BY_SERVICE = {
    "43": 5, "45": 6, "47": 7, "49": 8, "4A": 9, "BC": 20, "D7": 21, "BD": 22,
    "8C": 14, "8B": 13, "81": 12, "41": 4, "40": 3, "B7": 3, "BB": 19, "CF": 28,
    "D8": 31, "7E": 11, "110": 17, "121": 18, "8D": 10, "8A": 10, "82": 10, "97": 10,
    "85": 10, "86": 10, "84": 10, "83": 10, "80": 10, "87": 10, "7F": 10, "89": 15,
}


def short_type(type_str: str) -> str:
    """Apple's short form of a type ("0000003E-0000-1000-8000-0026BB765291" -> "3E")."""
    t = type_str.upper()
    if t.endswith("-0000-1000-8000-0026BB765291"):
        return t.split("-", 1)[0].lstrip("0") or "0"
    return t


# ---------------------------------------------------------------------------
# Accessory database replay
# ---------------------------------------------------------------------------


class RecordedIIDs(IIDManager):
    """IID manager that hands out the iids recorded in the fixture.

    Services are kept apart from characteristics: real devices sometimes reuse one number
    for a service and a characteristic, and get_obj() (used for reads and writes) must
    return the characteristic.
    """

    def __init__(self) -> None:
        super().__init__()
        self.services: Dict[int, Service] = {}

    def get_iid_for_obj(self, obj) -> int:
        return int(obj.rec["iid"])

    def assign(self, obj) -> None:
        iid = self.get_iid_for_obj(obj)
        self.iids[obj] = iid
        if isinstance(obj, Service):
            self.services[iid] = obj
            return
        if iid in self.objs:
            logger.warning("iid %s used by two characteristics; the later one wins", iid)
        self.objs[iid] = obj
        self.counter = max(self.counter, iid)


class ReplayCharacteristic(Characteristic):
    """A characteristic whose metadata and initial value are exactly the recorded ones."""

    def __init__(self, rec: Dict[str, Any], peer: "Peer") -> None:
        self.rec = rec
        self.peer = peer
        props: Dict[str, Any] = {
            "Format": rec.get("format"),
            "Permissions": list(rec.get("perms") or []),
        }
        for key in ("minValue", "maxValue", "minStep", "unit"):
            if rec.get(key) is not None:
                props[key] = rec[key]
        if isinstance(rec.get("maxLen"), int) and rec["maxLen"] <= 256:
            props["maxLen"] = rec["maxLen"]
        if isinstance(rec.get("valid-values"), list):
            props["ValidValues"] = {str(v): v for v in rec["valid-values"]}
        super().__init__(
            rec.get("description") or rec.get("type"),
            hap_type_to_uuid(str(rec["type"])),
            props,
        )
        self._value = rec.get("value")

    def _get_default_value(self) -> Any:
        # HAP-python would derive a default from the format (and fail on "format": null);
        # the recorded value is set right after construction instead.
        return None

    @property
    def aid(self) -> int:
        return self.broker.aid

    @property
    def iid(self) -> int:
        return int(self.rec["iid"])

    @property
    def perms(self) -> List[str]:
        return self._properties["Permissions"]

    def client_update_value(self, value, sender_client_addr=None):
        self.peer.writes.append({"aid": self.aid, "iid": self.iid, "value": value})
        logger.info("controller %s wrote %s.%s = %r", sender_client_addr, self.aid, self.iid, value)
        return super().client_update_value(value, sender_client_addr)

    def to_HAP(self, include_value: bool = True) -> Dict[str, Any]:
        rep: Dict[str, Any] = {}
        for key, val in self.rec.items():
            if key == "value":
                if include_value:
                    rep["value"] = self.get_value()
            elif key == "ev":
                continue  # per-connection subscription state, not part of the database
            else:
                rep[key] = val
        return rep


class ReplayService(Service):
    def __init__(self, rec: Dict[str, Any]) -> None:
        super().__init__(hap_type_to_uuid(str(rec["type"])), short_type(str(rec["type"])))
        self.rec = rec
        if "primary" in rec:
            self.is_primary_service = rec["primary"]

    def to_HAP(self, include_value: bool = True) -> Dict[str, Any]:
        rep: Dict[str, Any] = {}
        for key, val in self.rec.items():
            if key == "characteristics":
                rep[key] = [c.to_HAP(include_value) for c in self.characteristics]
            else:
                rep[key] = val
        return rep


class ReplayMixin:
    """Replaces HAP-python's generated services with the recorded ones."""

    rec: Dict[str, Any]

    def add_info_service(self) -> None:  # HAP-python would add its own 0x3E service
        pass

    def add_protocol_version_service(self) -> None:  # ... and its own 0xA2 service
        pass

    def setup_message(self) -> None:  # HAP-python prints this to stdout
        logger.info("not paired; setup code %s", self.driver.state.pincode.decode())

    def load_services(self, rec: Dict[str, Any], peer: "Peer") -> None:
        self.rec = rec
        for srec in rec.get("services", []):
            service = ReplayService(srec)
            for crec in srec.get("characteristics", []):
                char = ReplayCharacteristic(crec, peer)
                char.service = service
                service.characteristics.append(char)  # no de-duplication by type
            self.add_service(service)  # sets broker, assigns the recorded iids

    def hap_repr(self, include_value: bool) -> Dict[str, Any]:
        rep: Dict[str, Any] = {}
        for key, val in self.rec.items():
            if key == "services":
                rep[key] = [s.to_HAP(include_value) for s in self.services]
            else:
                rep[key] = val
        return rep


class ReplayAccessory(ReplayMixin, Accessory):
    def to_HAP(self, include_value: bool = True):
        return self.hap_repr(include_value)


class ReplayBridge(ReplayMixin, Bridge):
    def to_HAP(self, include_value: bool = True):
        return [self.hap_repr(include_value)] + [
            acc.to_HAP(include_value) for acc in self.accessories.values()
        ]


def load_fixture(path: str) -> List[Dict[str, Any]]:
    """The accessory list of a recorded /accessories dump (raises OSError/ValueError)."""
    with open(path, encoding="utf-8") as fh:
        fixture = json.load(fh)
    if isinstance(fixture, dict):  # {"accessories": [...]} as served over HAP
        fixture = fixture.get("accessories")
    if not isinstance(fixture, list) or not all(isinstance(a, dict) for a in fixture):
        raise ValueError(f"{path}: not an /accessories list")
    if not any(int(a.get("aid", 0)) == 1 for a in fixture):
        raise ValueError(f"{path}: no accessory with aid 1")
    return fixture


def accessory_name(rec: Dict[str, Any]) -> str:
    for srec in rec.get("services", []):
        if short_type(str(srec.get("type"))) == "3E":
            for crec in srec.get("characteristics", []):
                if short_type(str(crec.get("type"))) == "23" and crec.get("value"):
                    return str(crec["value"]).strip() or "HAP peer"
    return "HAP peer"


def primary_category(rec: Dict[str, Any], default: int) -> int:
    services = rec.get("services", [])
    ordered = [s for s in services if s.get("primary")] + services
    for srec in ordered:
        cat = CATEGORY_BY_SERVICE.get(short_type(str(srec.get("type"))))
        if cat:
            return cat
    return default


# ---------------------------------------------------------------------------
# HAP-python driver adjustments
# ---------------------------------------------------------------------------


class _Padded(int):
    """An int that pyhap.hap_handler's long_to_bytes renders at a fixed width."""

    width: int


def _padded(value: int, width: int) -> _Padded:
    out = _Padded(value)
    out.width = width
    return out


def _long_to_bytes_padded(n):
    raw = long_to_bytes(n)
    width = getattr(n, "width", None)
    return raw.rjust(width, b"\x00") if width else raw


class PaddedSrpServer(hsrp.Server):
    """HAP-python's SRP server with RFC 5054 / HAP padding where stock HAP-python drops
    leading zero bytes: B on the wire and in u/M, S before hashing to K, and K itself
    (64 bytes) in M, H(AMK) and the HKDF inputs."""

    def __init__(self, ctx, u, p, s=None, v=None, b=None):
        super().__init__(ctx, u, p, s, v, b)
        self.Bb = self._padN(self.Bb)

    def set_A(self, bytes_A):
        self.A = hsrp.bytes_to_long(bytes_A)
        self.Ab = bytes_A
        self.S = self._derive_premaster_secret()
        self.Sb = self._padN(long_to_bytes(self.S))
        self.Kb = self._digest(self.Sb)
        self.K = int.from_bytes(self.Kb, "big")
        self.M = self._get_M()
        self.HAMK = self._get_HAMK()

    def get_challenge(self):
        return (self.s, _padded(self.B, self.N_len // 8))

    def get_session_key(self):
        return _padded(self.K, len(self.Kb))


# ---------------------------------------------------------------------------
# --event-delay: HAP-python's event coalescing window
# ---------------------------------------------------------------------------
#
# HAP-python 5.0.0 (pyhap/hap_protocol.py): AccessoryDriver.async_send_event ->
# HAPServer.push_event -> HAPServerProtocol.queue_event(data, immediate), which stores the event
# in the connection's _event_queue (keyed by aid, iid: a newer value replaces an older one) and
# arms loop.call_later(EVENT_COALESCE_TIME_WINDOW = 0.5, _send_events); only characteristics
# in characteristic.IMMEDIATE_NOTIFY (button events) use loop.call_soon instead.
# _send_events then writes one encrypted EVENT/1.0 frame with everything queued.


class EventSendTracker:
    """With --event-delay 0: when an EVENT frame was handed to the transport, per aid.iid."""

    def __init__(self) -> None:
        self.armed: Optional[Tuple[int, int]] = None
        self.sent_at: Optional[float] = None
        self.waiter: Optional[asyncio.Future] = None

    def arm(self, aid: int, iid: int) -> None:
        self.armed, self.sent_at, self.waiter = (aid, iid), None, None

    def disarm(self) -> None:
        self.armed, self.waiter = None, None

    def sent(self, keys: List[Tuple[int, int]], when: float) -> None:
        if self.armed is None or self.sent_at is not None or self.armed not in keys:
            return
        self.sent_at = when  # the first subscribed connection written to
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(when)


def install_event_delay(delay: float, tracker: EventSendTracker) -> None:
    """Patch HAP-python's event queueing (only called when --event-delay is given)."""
    if delay > 0:
        # queue_event reads the module global at call time.
        hap_protocol.EVENT_COALESCE_TIME_WINDOW = delay
        return

    proto_cls = hap_protocol.HAPServerProtocol

    def send_events_now(self) -> None:
        """HAPServerProtocol._send_events, plus the time the frame went to the transport."""
        if self._event_timer:  # pylint: disable=protected-access
            self._event_timer.cancel()  # pylint: disable=protected-access
            self._event_timer = None  # pylint: disable=protected-access
        if not self._event_queue:  # pylint: disable=protected-access
            return
        subscribed = self._event_queue_with_active_subscriptions()  # pylint: disable=protected-access
        self._event_queue.clear()  # pylint: disable=protected-access
        if not subscribed or self.transport is None or self.transport.is_closing():
            return
        frame = hap_protocol.create_hap_event(subscribed)
        if self.hap_crypto:  # HAPServerProtocol.write, with the stamp taken between encrypt and send
            self.last_activity = time.time()
            chunks = self.hap_crypto.encrypt(frame)
            hap_protocol.logger.debug(
                "%s (%s): Send encrypted: %s", self.peername, self.handler.client_uuid, frame
            )
            when = time.time()
            self.transport.writelines(chunks)
        else:  # events only go to verified sessions; kept for completeness
            when = time.time()
            self.write(frame)
        tracker.sent(
            [(e[hap_protocol.HAP_REPR_AID], e[hap_protocol.HAP_REPR_IID]) for e in subscribed], when
        )

    def queue_event_now(self, data: dict, immediate: bool) -> None:  # pylint: disable=unused-argument
        """No coalescing window: write the EVENT frame before returning."""
        self._event_queue[(data[hap_protocol.HAP_REPR_AID], data[hap_protocol.HAP_REPR_IID])] = data  # pylint: disable=protected-access
        self._send_events()  # pylint: disable=protected-access

    proto_cls._send_events = send_events_now  # pylint: disable=protected-access
    proto_cls.queue_event = queue_event_now


class NoAdvertiser:
    """Stands in for zeroconf's AsyncZeroconf: nothing is multicast."""

    async def async_register_service(self, *args, **kwargs):
        logger.info("mDNS advertisement disabled (use --advertise to enable)")

    async def async_unregister_service(self, *args, **kwargs):
        pass

    async def async_update_service(self, *args, **kwargs):
        pass

    async def async_close(self):
        pass


class PeerDriver(AccessoryDriver):
    def __init__(self, *args, stock_srp: bool = False, permissive: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.stock_srp = stock_srp
        self.permissive = permissive

    def setup_srp_verifier(self):
        if self.stock_srp:
            return super().setup_srp_verifier()
        import hashlib  # pylint: disable=import-outside-toplevel

        from pyhap.params import get_srp_context  # pylint: disable=import-outside-toplevel

        ctx = get_srp_context(3072, hashlib.sha512, 16)
        self.srp_verifier = PaddedSrpServer(ctx, b"Pair-Setup", self.state.pincode)

    def lookup(self, aid: Any, iid: Any) -> Optional[ReplayCharacteristic]:
        top = self.accessory
        if top is None:
            return None
        acc = top if aid == top.aid else getattr(top, "accessories", {}).get(aid)
        if acc is None or not isinstance(iid, int):
            return None
        return acc.iid_manager.get_obj(iid)

    def get_characteristics(self, char_ids):
        if self.permissive:
            return super().get_characteristics(char_ids)
        out = []
        for aid_iid in char_ids:
            try:
                aid, iid = (int(i) for i in aid_iid.split("."))
            except ValueError:
                continue
            char = self.lookup(aid, iid)
            if char is None:
                out.append({"aid": aid, "iid": iid, "status": STATUS_NO_RESOURCE})
            elif "pr" not in char.perms:
                out.append({"aid": aid, "iid": iid, "status": STATUS_WRITE_ONLY})
            else:
                out.extend(super().get_characteristics([aid_iid])["characteristics"])
        return {"characteristics": out}

    def set_characteristics(self, chars_query, client_addr):
        if self.permissive:
            return super().set_characteristics(chars_query, client_addr)
        queries = chars_query.get("characteristics", [])
        errors: Dict[int, int] = {}  # query index -> HAP status
        passed = []
        for pos, query in enumerate(queries):
            char = self.lookup(query.get("aid"), query.get("iid"))
            if char is None:
                errors[pos] = STATUS_NO_RESOURCE
            elif "value" in query and "pw" not in char.perms:
                errors[pos] = STATUS_READ_ONLY
            elif query.get("ev") and "ev" not in char.perms:
                errors[pos] = STATUS_NO_NOTIFY
            elif "value" in query and isinstance(char.rec.get("valid-values"), list) and (
                query["value"] not in char.rec["valid-values"]
            ):
                errors[pos] = STATUS_INVALID_VALUE
            else:
                passed.append(query)
        if not errors:
            return super().set_characteristics(chars_query, client_addr)
        result = None
        if passed:
            result = super().set_characteristics(
                dict(chars_query, characteristics=passed), client_addr
            )
        by_key = {(r["aid"], r["iid"]): r for r in (result or {}).get("characteristics", [])}
        out = []
        for pos, query in enumerate(queries):
            key = (query.get("aid"), query.get("iid"))
            if pos in errors:
                out.append({"aid": key[0], "iid": key[1], "status": errors[pos]})
            else:
                out.append(by_key.get(key, {"aid": key[0], "iid": key[1], "status": STATUS_OK}))
        return {"characteristics": out}


# ---------------------------------------------------------------------------
# The peer: fixture loading, control channel
# ---------------------------------------------------------------------------


class Peer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.writes: List[Dict[str, Any]] = []
        self.event_tracker: Optional[EventSendTracker] = None
        if args.event_delay is not None:
            self.event_tracker = EventSendTracker()
            install_event_delay(args.event_delay, self.event_tracker)
        try:
            fixture = load_fixture(args.fixture)
        except ValueError as ex:
            raise SystemExit(str(ex)) from ex

        os.makedirs(args.state_dir, exist_ok=True)
        if not args.stock_srp:
            hap_handler.long_to_bytes = _long_to_bytes_padded
        self.driver = PeerDriver(
            address="127.0.0.1",
            listen_address="127.0.0.1",
            port=args.port or 51827,
            persist_file=os.path.join(args.state_dir, "accessory.state"),
            pincode=args.setup_code.encode(),
            async_zeroconf_instance=None if args.advertise else NoAdvertiser(),
            stock_srp=args.stock_srp,
            permissive=args.permissive,
        )
        # HAP-python turns port 0 into its default port; bind the real 0 and read it back.
        self.driver.http_server._addr_port = ("127.0.0.1", args.port)  # pylint: disable=protected-access
        original_start = self.driver.http_server.async_start

        async def start_and_record_port(loop):
            await original_start(loop)
            self.driver.state.port = self.driver.http_server.server.sockets[0].getsockname()[1]

        self.driver.http_server.async_start = start_and_record_port

        name = args.name or accessory_name(next(a for a in fixture if int(a["aid"]) == 1))
        self.top = self.build_top(fixture, name)
        self.driver.add_accessory(self.top)  # loads (or creates) the persist file
        self.control_server: Optional[asyncio.base_events.Server] = None
        self.stopping = False

    def build_top(self, fixture: List[Dict[str, Any]], name: str):
        """The top-level accessory (a bridge when the dump has more than aid 1) for a fixture."""
        top_rec = next(a for a in fixture if int(a["aid"]) == 1)
        if len(fixture) > 1:
            top = ReplayBridge(self.driver, name, iid_manager=RecordedIIDs())
            top.category = primary_category(top_rec, CATEGORY_BRIDGE)
            top.load_services(top_rec, self)
            for rec in fixture:
                if int(rec["aid"]) == 1:
                    continue
                acc = ReplayAccessory(
                    self.driver, accessory_name(rec), aid=int(rec["aid"]), iid_manager=RecordedIIDs()
                )
                acc.category = CATEGORY_OTHER
                acc.load_services(rec, self)
                top.add_accessory(acc)
        else:
            top = ReplayAccessory(self.driver, name, aid=1, iid_manager=RecordedIIDs())
            top.category = primary_category(top_rec, CATEGORY_OTHER)
            top.load_services(top_rec, self)
        return top

    # -- helpers -----------------------------------------------------------

    def accessories(self):
        yield self.top
        yield from getattr(self.top, "accessories", {}).values()

    def ready_line(self) -> Dict[str, Any]:
        return {
            "port": self.driver.state.port,
            "control_port": self.control_server.sockets[0].getsockname()[1],
            "id": self.driver.state.mac,
            "setup_code": self.args.setup_code,
            "c#": self.driver.state.config_version,
        }

    def values(self) -> Dict[str, Any]:
        out = {}
        for acc in self.accessories():
            for service in acc.services:
                for char in service.characteristics:
                    out[f"{acc.aid}.{char.iid}"] = char.get_value()
        return out

    def pairings(self) -> List[Dict[str, Any]]:
        state = self.driver.state
        out = []
        for client_uuid in state.paired_clients:
            raw = state.uuid_to_bytes.get(client_uuid)
            out.append(
                {
                    "id": raw.decode("utf-8", "replace") if raw else str(client_uuid),
                    "admin": state.is_admin(client_uuid),
                }
            )
        return out

    def unpair_all(self) -> int:
        state = self.driver.state
        count = len(state.paired_clients)
        state.paired_clients.clear()
        state.client_properties.clear()
        state.uuid_to_bytes.clear()
        self.driver.persist()
        for proto in list(self.driver.http_server.connections.values()):
            proto.close()
        self.driver.topics.clear()
        self.driver.update_advertisement()
        logger.info("removed %d pairing(s) on the accessory side", count)
        return count

    def replace_database(self, body: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
        path = body.get("fixture")
        if not isinstance(path, str) or not path:
            return 400, {"ok": False, "error": 'expected {"fixture":"<path to an /accessories json>"}'}
        try:
            fixture = load_fixture(path)
            top = self.build_top(fixture, self.top.display_name)  # built before anything changes
        except (OSError, ValueError, KeyError, TypeError) as ex:
            return 400, {"ok": False, "error": f"{type(ex).__name__}: {ex}"}

        driver = self.driver
        old_types = {}
        for acc in self.accessories():
            for service in acc.services:
                for char in service.characteristics:
                    old_types[f"{acc.aid}.{char.iid}"] = char.type_id
        self.top = top
        driver.accessory = top

        # Subscriptions: keep only those whose aid.iid is the same kind of characteristic
        # (same type, still notifying) in the new database.
        kept = dropped = 0
        for topic in list(driver.topics):
            aid, _, iid = topic.partition(".")
            char = driver.lookup(int(aid), int(iid)) if aid.isdigit() and iid.isdigit() else None
            if char is not None and "ev" in char.perms and char.type_id == old_types.get(topic):
                kept += len(driver.topics[topic])
            else:
                dropped += len(driver.topics.pop(topic))
        # Events coalescing in the open sessions carry values of the old database.
        for proto in list(driver.http_server.connections.values()):
            queue = getattr(proto, "_event_queue", None)
            if queue:
                queue.clear()

        # What a bridge does when its database changes: new c#, persisted and re-advertised.
        driver.state.accessories_hash = driver.accessories_hash
        driver.config_changed()
        logger.info(
            "database replaced by %s (%d accessories); c# now %s; subscriptions kept %d, dropped %d",
            path, len(fixture), driver.state.config_version, kept, dropped,
        )
        return 200, {"ok": True, "c#": driver.state.config_version}

    async def set_value(self, body: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
        try:
            aid, iid = int(body["aid"]), int(body["iid"])
            value = body["value"]
        except (KeyError, TypeError, ValueError):
            return 400, {"ok": False, "error": 'expected {"aid":int,"iid":int,"value":...}'}
        char = self.driver.lookup(aid, iid)
        if char is None:
            return 404, {"ok": False, "error": f"no characteristic {aid}.{iid}"}
        before = char.value
        tracker = self.event_tracker if self.args.event_delay == 0 else None
        if tracker is not None:
            tracker.arm(aid, iid)
        try:
            try:
                char.set_value(value)  # validates, stores, notifies subscribers if changed
            except ValueError as ex:
                return 400, {"ok": False, "error": str(ex)}
            if body.get("force") and char.value == before:
                char.notify()
            logger.info("accessory side set %s.%s = %r", aid, iid, char.value)
            reply: Dict[str, Any] = {"ok": True, "value": char.value}
            if tracker is not None:
                # The patched queue_event writes synchronously on this (the driver's) thread, so
                # sent_at is normally known already; wait briefly in case publish() was deferred.
                if tracker.sent_at is None and self._has_event_target(aid, iid, char.value != before or body.get("force")):
                    tracker.waiter = asyncio.get_running_loop().create_future()
                    try:
                        await asyncio.wait_for(asyncio.shield(tracker.waiter), 1.0)
                    except asyncio.TimeoutError:
                        pass
                reply["sent_at"] = tracker.sent_at
            return 200, reply
        finally:
            if tracker is not None:
                tracker.disarm()

    def _has_event_target(self, aid: int, iid: int, notified: Any) -> bool:
        """Whether a notification for aid.iid went to at least one open, subscribed session."""
        if not notified:
            return False
        clients = self.driver.topics.get(f"{aid}.{iid}") or ()
        return any(c in self.driver.http_server.connections for c in clients)

    # -- control channel ---------------------------------------------------

    async def route(self, method: str, path: str, body: bytes) -> Tuple[int, Any]:
        try:
            payload = json.loads(body) if body.strip() else {}
        except ValueError:
            return 400, {"ok": False, "error": "body is not JSON"}
        if method == "POST" and path == "/set":
            if not isinstance(payload, dict):
                return 400, {"ok": False, "error": "body must be a JSON object"}
            return await self.set_value(payload)
        if method == "GET" and path == "/values":
            return 200, self.values()
        if method == "GET" and path == "/writes":
            return 200, self.writes
        if method == "GET" and path == "/pairings":
            return 200, self.pairings()
        if method == "POST" and path == "/unpair-all":
            return 200, {"ok": True, "removed": self.unpair_all()}
        if method == "GET" and path == "/accessories":
            return 200, self.driver.get_accessories()
        if method == "POST" and path == "/database":
            if not isinstance(payload, dict):
                return 400, {"ok": False, "error": "body must be a JSON object"}
            return self.replace_database(payload)
        if method == "GET" and path == "/info":
            return 200, self.ready_line()
        return 404, {"ok": False, "error": f"no route {method} {path}"}

    async def handle_control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        reasons = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}
        try:
            while True:
                line = await reader.readline()
                if not line.strip():
                    break
                method, target = line.decode("latin-1").split()[:2]
                headers: Dict[str, str] = {}
                while True:
                    hline = await reader.readline()
                    if hline in (b"\r\n", b"\n", b""):
                        break
                    key, _, val = hline.decode("latin-1").partition(":")
                    headers[key.strip().lower()] = val.strip()
                length = int(headers.get("content-length") or 0)
                body = await reader.readexactly(length) if length else b""
                try:
                    status, payload = await self.route(method.upper(), urlsplit(target).path, body)
                except Exception as ex:  # pylint: disable=broad-except
                    logger.exception("control request failed")
                    status, payload = 500, {"ok": False, "error": str(ex)}
                data = json.dumps(payload).encode()
                close = headers.get("connection", "").lower() == "close"
                head = (
                    f"HTTP/1.1 {status} {reasons.get(status, 'Error')}\r\n"
                    "Content-Type: application/json\r\n"
                    f"Content-Length: {len(data)}\r\n"
                    + ("Connection: close\r\n" if close else "")
                    + "\r\n"
                )
                writer.write(head.encode() + data)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    # -- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        await self.driver.async_start()
        self.control_server = await asyncio.start_server(
            self.handle_control, "127.0.0.1", self.args.control_port
        )
        sys.stdout.write(json.dumps(self.ready_line(), separators=(",", ":")) + "\n")
        sys.stdout.flush()
        logger.info(
            "serving %s on 127.0.0.1:%s (control %s), id %s",
            self.args.fixture,
            self.driver.state.port,
            self.control_server.sockets[0].getsockname()[1],
            self.driver.state.mac,
        )

    async def stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        logger.info("stopping")
        if self.control_server:
            self.control_server.close()
        await self.driver.async_stop()  # closes HAP sessions, stops the loop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixture", required=True, help="recorded /accessories JSON")
    parser.add_argument("--state-dir", required=True, help="keeps id, keys, c# and pairings")
    parser.add_argument("--port", type=int, default=0, help="HAP port on 127.0.0.1 (0 = free)")
    parser.add_argument("--setup-code", default="031-45-154")
    parser.add_argument("--control-port", type=int, default=0)
    parser.add_argument("--name", help="display name (mDNS/logs); default: the fixture's")
    parser.add_argument("--advertise", action="store_true", help="advertise over mDNS (zeroconf)")
    parser.add_argument("--stock-srp", action="store_true", help="keep HAP-python's SRP padding bug")
    parser.add_argument(
        "--permissive", action="store_true", help="stock HAP-python: no perms/unknown-id errors"
    )
    parser.add_argument(
        "--event-delay", type=float, default=None, metavar="SECONDS",
        help="event coalescing window instead of HAP-python's 0.5 s; 0 = write each event "
        "immediately and report sent_at from POST /set (default: HAP-python unchanged)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args = parser.parse_args()
    if args.event_delay is not None and not args.event_delay >= 0:
        parser.error("--event-delay must be >= 0")
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )

    peer = Peer(args)
    loop = peer.driver.loop
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(peer.start())
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: loop.create_task(peer.stop()))
        loop.run_forever()
    finally:
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:  # e.g. zeroconf's announcement task with --advertise
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()
    logger.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
