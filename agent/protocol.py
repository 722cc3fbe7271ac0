"""The wire contract between ``herd-agent`` and the master: mDNS names, TXT keys, API paths,
worker states, and a tolerant reader of an agent's TXT record.

Both sides import this module, so a constant changes in one place. The master's discovery
reads every advertiser of :data:`SERVICE_TYPE` on the LAN, including rogue or broken ones:
:func:`parse_txt` therefore never raises, it returns ``None`` for anything it can't trust.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

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
TXT_STATE = "state"    # one of STATES
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
PIN_DIGITS = 6
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
              state: str, proto: str = "", engine: str = "", fingerprint: str = "") -> dict[str, str]:
    """The TXT properties an agent advertises; each value is cut to :data:`TXT_VALUE_MAX` bytes."""
    values = {
        TXT_ID: node_id, TXT_VERSION: version, TXT_API: str(api_port), TXT_RPC: str(rpc_port),
        TXT_ECHO: str(echo_port), TXT_STATE: state, TXT_PROTO: proto, TXT_ENGINE: engine,
        TXT_FP: fingerprint,
    }
    return {k: str(v).encode("ascii", "replace")[:TXT_VALUE_MAX].decode("ascii") for k, v in values.items()}


def instance_name(friendly: str) -> str:
    """A node's friendly name made safe as a DNS-SD instance label (≤ 63 bytes, no dots)."""
    cleaned = "".join(ch if ch.isprintable() and ch != "." else "-" for ch in friendly).strip() or "herd-node"
    raw = cleaned.encode("utf-8")[:INSTANCE_NAME_MAX]
    return raw.decode("utf-8", "ignore")
