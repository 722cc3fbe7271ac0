"""The wire contract between ``herd-agent`` and the master: mDNS names, TXT keys, API paths,
worker states, and a tolerant reader of an agent's TXT record.

Both sides import this module, so a constant changes in one place. The master's discovery
reads every advertiser of :data:`SERVICE_TYPE` on the LAN, including rogue or broken ones:
:func:`parse_txt` therefore never raises, it returns ``None`` for anything it can't trust.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

#: DNS-SD service type every agent registers.
SERVICE_TYPE = "_llama-herd._tcp.local."

#: Ports an agent uses unless its settings say otherwise. The RPC default is llama.cpp's own.
DEFAULT_API_PORT = 50050
DEFAULT_RPC_PORT = 50052
DEFAULT_ECHO_PORT = 50053

# TXT keys (see issue #3). Values are ASCII and at most TXT_VALUE_MAX bytes each.
TXT_ID = "id"          # stable node UUID
TXT_VERSION = "ver"    # agent version
TXT_API = "api"        # control API port (HTTP)
TXT_RPC = "rpc"        # RPC port the master connects to (the relay's port)
TXT_ECHO = "echo"      # UDP echo port for link round-trip timing
TXT_STATE = "state"    # one of STATES; read from older agents, no longer advertised (#25)
TXT_PROTO = "proto"    # llama.cpp RPC protocol version, "major.minor.patch"
TXT_ENGINE = "engine"  # llama.cpp build number
TXT_FP = "fp"          # start of the agent certificate's fingerprint (a hint; pinning decides)
TXT_KEYS = (TXT_ID, TXT_VERSION, TXT_API, TXT_RPC, TXT_ECHO, TXT_STATE, TXT_PROTO, TXT_ENGINE, TXT_FP)
#: Home Assistant and glances keep TXT values well under the 255-byte string limit; so do we.
TXT_VALUE_MAX = 230
#: DNS labels (the instance name) are at most 63 bytes.
INSTANCE_NAME_MAX = 63

# States of the RPC worker as the agent reports them (TXT ``state`` and ``/status``).
STATE_STOPPED = "stopped"    # not running, none asked for
STATE_STARTING = "starting"  # process launched, not yet answering the RPC handshake
STATE_READY = "ready"        # answering, no client connected
STATE_BUSY = "busy"          # a master holds the worker's one connection
STATE_CRASHED = "crashed"    # died or could not start (see the status ``error``)
STATES = (STATE_STOPPED, STATE_STARTING, STATE_READY, STATE_BUSY, STATE_CRASHED)

# Control API paths (HTTPS, TLS 1.3). INFO, PING, the two PAIR steps and OPENAPI are public;
# the rest need the client certificate of a paired master (see agent.identity).
API_PREFIX = "/api/v1"
PATH_INFO = API_PREFIX + "/info"
PATH_PING = API_PREFIX + "/ping"
PATH_PAIR_START = API_PREFIX + "/pair/start"
PATH_PAIR_FINISH = API_PREFIX + "/pair/finish"
PATH_UNPAIR = API_PREFIX + "/unpair"
#: Retired: PIN-for-token pairing and the token proof. Answer 410 with what to do instead.
PATH_PAIR = API_PREFIX + "/pair"
PATH_PROVE = API_PREFIX + "/prove"
PATH_STATUS = API_PREFIX + "/status"
PATH_RPC_START = API_PREFIX + "/rpc/start"
PATH_RPC_STOP = API_PREFIX + "/rpc/stop"
PATH_RPC_LOG = API_PREFIX + "/rpc/log"
PATH_BANDWIDTH = API_PREFIX + "/probe/bandwidth"
PATH_OPENAPI = "/openapi.json"
PUBLIC_PATHS = frozenset({PATH_INFO, PATH_PING, PATH_PAIR_START, PATH_PAIR_FINISH, PATH_PAIR, PATH_PROVE,
                          PATH_OPENAPI})
#: URL scheme of the control API.
API_SCHEME = "https"

#: Length of the pairing PIN the agent shows when unpaired.
PIN_DIGITS = 10
#: Largest body ``/probe/bandwidth`` streams in one request.
BANDWIDTH_MAX_BYTES = 256 * 1024 * 1024
#: Largest tail ``/rpc/log`` returns.
LOG_TAIL_MAX = 2000
#: Largest datagram the echo server answers (larger ones are dropped).
ECHO_MAX_BYTES = 512
#: The echo answers only datagrams that start with the request tag, with the reply tag in its
#: place; a reply is never answered (see agent.echo).
ECHO_REQUEST = b"herd-echo?"
ECHO_REPLY = b"herd-echo!"


@dataclass(frozen=True)
class NodeAdvert:
    """What one agent says about itself over mDNS.

    Attributes:
        node_id: the node's stable UUID (string form).
        api_port: control API port.
        rpc_port: RPC port for ``llama-server --rpc`` (0 if not advertised).
        echo_port: UDP echo port (0 if not advertised).
        state: one of :data:`STATES` (``"unknown"`` if the advertiser sent something else).
        version: agent version.
        proto: llama.cpp RPC protocol version, or ``""``.
        engine: llama.cpp build number as text, or ``""``.
        fingerprint: pairing key fingerprint, or ``""``.
        name: the instance name (friendly node name), filled by the caller.
        addresses: the addresses the record resolved to, filled by the caller.
    """

    node_id: str
    api_port: int
    rpc_port: int = 0
    echo_port: int = 0
    state: str = STATE_STOPPED
    version: str = ""
    proto: str = ""
    engine: str = ""
    fingerprint: str = ""
    name: str = ""
    addresses: tuple[str, ...] = field(default_factory=tuple)


_SAFE_TEXT = re.compile(r"^[\x20-\x7e]*$")


def _text(props: dict, key: str) -> str | None:
    """The value of ``key`` as printable ASCII, or None if absent or unreadable."""
    raw = props.get(key.encode("ascii"))
    if raw is None:
        raw = props.get(key)
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "replace")
    if not isinstance(raw, (bytes, bytearray)) or len(raw) > TXT_VALUE_MAX:
        return None
    try:
        s = bytes(raw).decode("ascii")
    except UnicodeDecodeError:
        return None
    return s if _SAFE_TEXT.match(s) else None


def _port(props: dict, key: str) -> int | None:
    s = _text(props, key)
    if s is None or not s.isdigit() or len(s) > 5:
        return None
    n = int(s)
    return n if 0 < n < 65536 else None


def parse_txt(props, *, name: str = "", addresses=()) -> NodeAdvert | None:
    """Read an agent's TXT properties (``ServiceInfo.properties``) into a :class:`NodeAdvert`.

    Returns None when the record is not a usable herd agent (no valid ``id`` or ``api`` port).
    Optional fields that are missing or malformed fall back to empty/zero. Never raises,
    whatever the advertiser sent.
    """
    try:
        if not isinstance(props, dict):
            return None
        node_id = _text(props, TXT_ID)
        api = _port(props, TXT_API)
        if node_id is None or api is None:
            return None
        try:
            node_id = str(uuid.UUID(node_id))
        except ValueError:
            return None
        state = _text(props, TXT_STATE) or ""
        if state not in STATES:
            state = "unknown"
        return NodeAdvert(
            node_id=node_id,
            api_port=api,
            rpc_port=_port(props, TXT_RPC) or 0,
            echo_port=_port(props, TXT_ECHO) or 0,
            state=state,
            version=_text(props, TXT_VERSION) or "",
            proto=_text(props, TXT_PROTO) or "",
            engine=_text(props, TXT_ENGINE) or "",
            fingerprint=_text(props, TXT_FP) or "",
            name=name if isinstance(name, str) else "",
            addresses=tuple(a for a in addresses if isinstance(a, str)),
        )
    except Exception:  # a browser callback must never raise on a rogue record
        return None


def build_txt(*, node_id: str, version: str, api_port: int, rpc_port: int, echo_port: int,
              state: str | None = None, proto: str = "", engine: str = "",
              fingerprint: str = "") -> dict[str, str]:
    """The TXT properties an agent advertises; each value is cut to :data:`TXT_VALUE_MAX` bytes.

    ``state`` is left out unless given: agents no longer advertise whether their worker is busy
    (#25); older agents did, and :func:`parse_txt` still reads it.
    """
    values = {
        TXT_ID: node_id, TXT_VERSION: version, TXT_API: str(api_port), TXT_RPC: str(rpc_port),
        TXT_ECHO: str(echo_port), TXT_PROTO: proto, TXT_ENGINE: engine, TXT_FP: fingerprint,
    }
    if state is not None:
        values[TXT_STATE] = state
    return {k: str(v).encode("ascii", "replace")[:TXT_VALUE_MAX].decode("ascii") for k, v in values.items()}


def instance_name(friendly: str) -> str:
    """A node's friendly name made safe as a DNS-SD instance label (≤ 63 bytes, no dots)."""
    cleaned = "".join(ch if ch.isprintable() and ch != "." else "-" for ch in friendly).strip() or "herd-node"
    raw = cleaned.encode("utf-8")[:INSTANCE_NAME_MAX]
    return raw.decode("utf-8", "ignore")


# --- the agent's /status, typed ------------------------------------------------------------


class WorkerState(str, Enum):
    """The RPC worker's state as an agent reports it (:data:`STATES`); ``UNKNOWN`` for anything
    else an agent of another version might send."""

    STOPPED = STATE_STOPPED
    STARTING = STATE_STARTING
    READY = STATE_READY
    BUSY = STATE_BUSY
    CRASHED = STATE_CRASHED
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, value: object) -> "WorkerState":
        """The state named ``value``, or :attr:`UNKNOWN`."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN

    def __str__(self) -> str:  # "ready", as in the wire format and the user's messages
        return self.value


def _int(value: object, default: int = 0) -> int:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else default
    except (TypeError, ValueError):
        return default


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _dicts(value: object) -> list[dict]:
    return [d for d in value if isinstance(d, dict)] if isinstance(value, list) else []


@dataclass(frozen=True)
class DeviceStatus:
    """One device an agent reports: a worker's (``rpc.devices``) or one its engine offers
    (``engine.devices``).

    Attributes:
        name: the ``-d`` name (``CPU``, ``Vulkan0``).
        kind: ``cpu`` or ``gpu`` (``""`` when the agent did not say).
        index: its position in the worker's device list.
        total_bytes, free_bytes: memory.
        description: what the device is (``AMD Radeon RX 6700 XT``).
    """

    name: str
    kind: str = ""
    index: int = 0
    total_bytes: int = 0
    free_bytes: int = 0
    description: str = ""

    @classmethod
    def from_json(cls, d: dict, index: int = 0) -> "DeviceStatus":
        return cls(name=str(d.get("name") or "CPU"), kind=str(d.get("kind") or ""),
                   index=_int(d.get("index"), index), total_bytes=_int(d.get("total_bytes")),
                   free_bytes=_int(d.get("free_bytes")), description=str(d.get("description") or ""))


@dataclass(frozen=True)
class WorkerCrash:
    """The RPC worker's last crash: why, and the last lines it printed."""

    error: str | None = None
    lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class CacheStatus:
    """The worker's weight cache (``rpc.weight_cache``; see :mod:`agent.weight_cache`).

    Attributes:
        folder: the folder of the master the worker serves (each master has its own).
        used_bytes, files: what every master's folder holds together (what the cap counts).
        master_bytes: what the folder in use holds.
        cap_bytes: the cap now — the setting, and the disk's free space less a reserve.
    """

    folder: str = ""
    used_bytes: int = 0
    files: int = 0
    master_bytes: int = 0
    cap_bytes: int = 0

    @classmethod
    def from_json(cls, d: dict) -> "CacheStatus":
        return cls(folder=str(d.get("dir") or ""), used_bytes=_int(d.get("bytes")), files=_int(d.get("files")),
                   master_bytes=_int(d.get("master_bytes")), cap_bytes=_int(d.get("limit_bytes")))


@dataclass(frozen=True)
class WorkerStatus:
    """The RPC worker's part of ``/status`` (``rpc``).

    Attributes:
        state: a :class:`WorkerState`.
        error: why it is stopped or crashed, in words (None otherwise).
        pid: its process id while it runs.
        restarts: how often the agent restarted it after a crash.
        client: the address of the llama-server connected to it (``busy``), or None.
        devices: the devices it exposes while it runs.
        requested_devices: the ``-d`` list it was started with.
        last_crash: its last crash, or None.
        threads: its thread count (None: the agent's default).
        exposure: how the agent lets masters reach it: ``relay`` (through its TLS relay, by
            key) or ``open`` (the worker's port itself, unauthenticated).
        weight_cache: its weight cache (None when the agent did not say).
    """

    state: WorkerState = WorkerState.UNKNOWN
    error: str | None = None
    pid: int | None = None
    restarts: int = 0
    client: str | None = None
    devices: tuple[DeviceStatus, ...] = ()
    requested_devices: tuple[str, ...] = ()
    last_crash: WorkerCrash | None = None
    threads: int | None = None
    exposure: str = ""
    weight_cache: CacheStatus | None = None

    @classmethod
    def from_json(cls, d: object) -> "WorkerStatus":
        d = d if isinstance(d, dict) else {}
        crash = d.get("last_crash") if isinstance(d.get("last_crash"), dict) else None
        lines = crash.get("lines") if crash and isinstance(crash.get("lines"), list) else []
        requested = d.get("requested_devices") if isinstance(d.get("requested_devices"), list) else []
        return cls(state=WorkerState.of(d.get("state")), error=_opt_str(d.get("error")),
                   pid=_int(d.get("pid")) or None, restarts=_int(d.get("restarts")),
                   client=_opt_str(d.get("client")),
                   devices=tuple(DeviceStatus.from_json(x, i) for i, x in enumerate(_dicts(d.get("devices")))),
                   requested_devices=tuple(str(x) for x in requested),
                   last_crash=WorkerCrash(_opt_str(crash.get("error")), tuple(str(x) for x in lines)) if crash else None,
                   threads=_int(d.get("threads")) or None, exposure=str(d.get("exposure") or ""),
                   weight_cache=CacheStatus.from_json(d["weight_cache"])
                   if isinstance(d.get("weight_cache"), dict) else None)


@dataclass(frozen=True)
class AgentStatus(Mapping):
    """An agent's ``/status``, typed.

    The master reads the attributes. The document as the agent sent it stays readable by key
    (a read-only mapping over :attr:`raw`), for what shows or stores it as it is (the dashboard's
    samples, ``herd nodes --json``) and for sections a newer agent adds.

    Attributes:
        node_id, name, version: who the agent is.
        rpc: the :class:`WorkerStatus`.
        engine_devices: every device its engine offers (GPUs, then the CPU), in ``-d`` names,
            whether or not the worker runs.
        ram_total_bytes, ram_free_bytes: the node's memory now.
        machine: which computer the agent runs on (:func:`agent.hardware.machine_id`), "" from
            an agent that does not say: agents on one computer share its RAM.
        raw: the JSON document.
    """

    node_id: str = ""
    name: str = ""
    version: str = ""
    rpc: WorkerStatus = field(default_factory=WorkerStatus)
    engine_devices: tuple[DeviceStatus, ...] = ()
    ram_total_bytes: int = 0
    ram_free_bytes: int = 0
    machine: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: object) -> "AgentStatus":
        """The status in ``doc`` (a decoded ``/status`` body); never raises on odd fields."""
        doc = doc if isinstance(doc, dict) else {}
        engine = doc.get("engine") if isinstance(doc.get("engine"), dict) else {}
        hw = doc.get("hardware") if isinstance(doc.get("hardware"), dict) else {}
        load = doc.get("load") if isinstance(doc.get("load"), dict) else {}
        return cls(node_id=str(doc.get("id") or ""), name=str(doc.get("name") or ""),
                   version=str(doc.get("version") or ""), rpc=WorkerStatus.from_json(doc.get("rpc")),
                   engine_devices=tuple(DeviceStatus.from_json(x, i) for i, x in enumerate(_dicts(engine.get("devices")))),
                   ram_total_bytes=_int(hw.get("ram_total_bytes")),
                   ram_free_bytes=_int(load.get("ram_free_bytes"), _int(hw.get("ram_free_bytes"))),
                   machine=str(hw.get("machine") or ""), raw=doc)

    @classmethod
    def of(cls, status: "AgentStatus | dict") -> "AgentStatus":
        """``status`` itself, or the status in a decoded document."""
        return status if isinstance(status, AgentStatus) else cls.from_json(status)

    @property
    def offers_gpu(self) -> bool:
        """Whether the node's engine offers a GPU (a Vulkan or CUDA build that found one)."""
        return any(d.kind == "gpu" for d in self.engine_devices)

    # read-only mapping over the document
    def __getitem__(self, key: str):
        return self.raw[key]

    def __iter__(self):
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)
