"""The agent's settings (a TOML file the user may edit) and its state (a JSON file it owns).

Settings come from, in rising priority: the defaults below, the config file
(``<user config dir>/llama-herd/agent.toml`` unless ``--config`` says otherwise), and command
line flags. State — the node id and the paired masters (their pinned certificates) — lives in
``<user state dir>/llama-herd/agent-state.json``, written atomically with owner-only
permissions; the node's own key and certificate (:mod:`agent.identity`) and the PIN shown now
(:class:`agent.pairing.PinFile`) live beside it.

A file that can't be read is never silently replaced: it is renamed ``*.corrupt-<timestamp>`` and
a :class:`SettingsError` says so; the next start begins from defaults.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import secrets
import socket
import sys
import time
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

import platformdirs

from agent import protocol as P
from agent.files import set_aside, write_atomic

APP_NAME = "llama-herd"
CONFIG_NAME = "agent.toml"
STATE_NAME = "agent-state.json"
EXPOSURES = ("relay", "open")


class SettingsError(RuntimeError):
    """A setting, settings file or state file is unusable; the message names it and what is wrong.

    ``key`` is the setting at fault, when one is (so a caller can name the matching flag).
    """

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def default_config_path() -> Path:
    """Where the agent's TOML config lives by default."""
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)) / CONFIG_NAME


def default_state_dir() -> Path:
    """Where the agent keeps its state file by default."""
    return Path(platformdirs.user_state_dir(APP_NAME, appauthor=False))


@dataclass
class Settings:
    """Everything an agent can be told. Field names are the TOML keys.

    Attributes:
        name: friendly node name (mDNS instance name), defaults to the host name.
        bind: IPv4 address the API, echo and RPC relay listen on ("0.0.0.0" = every interface).
        api_port: control API port (TCP).
        rpc_port: the RPC port masters connect to (the relay's, or the worker's in ``open`` mode).
        echo_port: UDP echo port for round-trip timing.
        threads: RPC worker CPU threads (0 = the worker's default).
        devices: devices the RPC worker exposes (empty = the worker's default).
        cache: pass ``-c`` to the worker (local tensor cache, faster re-loads).
        cache_dir: the folder given to the worker as ``LLAMA_CACHE`` (its files go into ``rpc/``
            below); empty = ``LLAMA_CACHE`` if the agent was started with one, else ``weights``
            in the agent's data folder (kept across restarts and upgrades).
        cache_max_gib: the cache's cap in GiB (0 = only the disk's free space limits it; it
            never leaves less than 2 GiB of the disk free).
        exposure: ``relay`` (worker on loopback; the TLS relay admits paired masters' keys
            only) or ``open`` (worker listens on ``bind`` itself, unencrypted — anyone on the LAN
            can use it and read what it is sent; the agent warns at start).
        mdns: advertise over mDNS at all.
        mdns_interfaces: IPs to advertise on (empty = every interface).
        engine_dir: folder of the llama.cpp programs (empty = the usual lookup), run as the
            build it is (its backend is read from the build: :func:`agent.engine_lookup.identify`).
        backend: which managed llama.cpp build to run: ``auto`` (a GPU build that finds a GPU
            here, else the CPU build), ``cpu``, ``vulkan`` or ``cuda``; with ``engine_dir``
            the agent only says so when the folder holds another build.
        log_lines: how many lines of the worker's output are kept.
        lease_idle_s: seconds an unused worker stays leased to the master that used it last
            (:mod:`agent.lease`); then another paired master may take it (and gets a worker
            process of its own).
        keep_awake: keep this computer from sleeping on idle while a master uses its RPC worker
            (:mod:`agent.keep_awake`, #36).
    """

    name: str = field(default_factory=lambda: socket.gethostname() or "herd-node")
    bind: str = "0.0.0.0"
    api_port: int = P.DEFAULT_API_PORT
    rpc_port: int = P.DEFAULT_RPC_PORT
    echo_port: int = P.DEFAULT_ECHO_PORT
    threads: int = 0
    devices: list[str] = field(default_factory=list)
    cache: bool = True
    cache_dir: str = ""
    cache_max_gib: int = 20
    exposure: str = "relay"
    mdns: bool = True
    mdns_interfaces: list[str] = field(default_factory=list)
    engine_dir: str = ""
    backend: str = "auto"
    log_lines: int = 500
    lease_idle_s: int = 120
    keep_awake: bool = True

    def validate(self) -> None:
        """Raise :class:`SettingsError` naming the first bad value."""
        if not self.name.strip():
            raise SettingsError("name: must not be empty", "name")
        _check_ipv4("bind", self.bind)
        for key in ("api_port", "rpc_port", "echo_port"):
            v = getattr(self, key)
            if not 0 <= v <= 65535:
                raise SettingsError(f"{key}: {v} is not a port (0-65535)", key)
        if not 0 <= self.threads <= 1024:
            raise SettingsError(f"threads: {self.threads} is out of range (0-1024)", "threads")
        if self.exposure not in EXPOSURES:
            raise SettingsError(f"exposure: {self.exposure!r} is not one of {', '.join(EXPOSURES)}", "exposure")
        for ip in self.mdns_interfaces:
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                raise SettingsError(f"mdns_interfaces: {ip!r} is not an IP address", "mdns_interfaces") from None
        if self.backend not in ("auto", "cpu", "vulkan", "cuda"):
            raise SettingsError(f"backend: {self.backend!r} is not one of auto, cpu, vulkan, cuda", "backend")
        if not 0 <= self.cache_max_gib <= 1_000_000:
            raise SettingsError(f"cache_max_gib: {self.cache_max_gib} is out of range (0-1000000)", "cache_max_gib")
        if not 1 <= self.log_lines <= 100_000:
            raise SettingsError(f"log_lines: {self.log_lines} is out of range (1-100000)", "log_lines")
        if not 1 <= self.lease_idle_s <= 86_400:
            raise SettingsError(f"lease_idle_s: {self.lease_idle_s} is out of range (1-86400)", "lease_idle_s")


def _check_ipv4(key: str, value: str) -> None:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        # ggml-rpc-server's -H takes numeric IPv4 only; the relay and API follow suit.
        raise SettingsError(f"{key}: {value!r} is not a numeric IPv4 address", key) from None


def _expected_type(f) -> type:
    return {"str": str, "int": int, "bool": bool, "list[str]": list}[str(f.type)]


def settings_from_dict(data: dict, origin: str) -> Settings:
    """Settings from a parsed TOML table; type errors name the key and ``origin``."""
    s = Settings()
    known = {f.name: f for f in fields(Settings)}
    for key, value in data.items():
        f = known.get(key)
        if f is None:
            raise SettingsError(f"{origin}: unknown setting {key!r} (known: {', '.join(known)})")
        want = _expected_type(f)
        ok = isinstance(value, want) and not (want is int and isinstance(value, bool))
        if ok and want is list:
            ok = all(isinstance(x, str) for x in value)
        if not ok:
            raise SettingsError(f"{origin}: {key} must be {f.type}, not {type(value).__name__}")
        setattr(s, key, value)
    try:
        s.validate()
    except SettingsError as exc:
        raise SettingsError(f"{origin}: {exc}", exc.key) from None
    return s


def load_settings(path: Path | None = None) -> Settings:
    """Read the config file (defaults if it does not exist).

    A file that is not valid TOML is set aside and reported; a file with a wrong value is left
    in place (the user can fix it) and reported.
    """
    path = path or default_config_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Settings()
    except OSError as exc:
        raise SettingsError(f"cannot read config {path}: {exc}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        moved = set_aside(path)
        raise SettingsError(f"config {path} is not valid TOML ({exc}); moved it to {moved.name}, "
                            "the next start uses defaults") from exc
    return settings_from_dict(data, str(path))


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def dump_settings(s: Settings) -> str:
    """The settings as a TOML document (flat keys only, which is all the agent has)."""
    lines = ["# herd-agent settings; command line flags override these."]
    lines += [f"{f.name} = {_toml_value(getattr(s, f.name))}" for f in fields(Settings)]
    return "\n".join(lines) + "\n"


def save_settings(s: Settings, path: Path | None = None) -> Path:
    """Write the settings to the config file atomically; returns its path."""
    path = path or default_config_path()
    s.validate()
    write_atomic(path, dump_settings(s).encode("utf-8"), mode=0o644)
    return path


def new_pin() -> str:
    """A fresh random pairing PIN (see :class:`agent.pairing.PinFile`)."""
    return f"{secrets.randbelow(10 ** P.PIN_DIGITS):0{P.PIN_DIGITS}d}"


#: Version of the state file. 1 (no ``version`` key) held bearer-token hashes and the PIN;
#: 2 holds each paired master's certificate (see :mod:`agent.identity`).
STATE_VERSION = 2


@dataclass
class PairedMaster:
    """One master that paired with this node.

    Attributes:
        name: what the master called itself when pairing (may be empty).
        cert_pem: its certificate, pinned at pairing (the API and the RPC relay admit its key).
        fingerprint: the certificate's fingerprint (:func:`agent.identity.fingerprint_of_pem`).
        paired_at: UNIX time of pairing.
    """

    name: str
    cert_pem: str
    fingerprint: str
    paired_at: float


@dataclass
class AgentState:
    """The agent's persistent identity and pairings (the state file).

    Attributes:
        node_id: stable UUID of this node.
        masters: paired masters.
        dropped_legacy: masters of a version-1 state file (bearer tokens) dropped on loading:
            they must pair again. Reported once at start.
    """

    node_id: str
    masters: list[PairedMaster] = field(default_factory=list)
    path: Path | None = None
    dropped_legacy: int = 0
    _mtime: int = 0

    @classmethod
    def new(cls, path: Path | None = None) -> "AgentState":
        return cls(node_id=str(uuid.uuid4()), path=path)

    @property
    def folder(self) -> Path | None:
        """The state folder (where the key, certificate and PIN file live too)."""
        return self.path.parent if self.path is not None else None

    @property
    def paired(self) -> bool:
        return bool(self.masters)

    def master_for_fingerprint(self, fp: str | None) -> PairedMaster | None:
        """The paired master whose certificate has fingerprint ``fp``, or None."""
        if not fp:
            return None
        found = None
        for m in self.masters:
            if hmac.compare_digest(m.fingerprint, fp):
                found = m
        return found

    def add_master(self, name: str, cert_pem: str, fingerprint: str) -> PairedMaster:
        """Pin a newly paired master (replacing an earlier pairing of the same key) and save."""
        self.masters = [m for m in self.masters if m.fingerprint != fingerprint]
        m = PairedMaster(name=name[:100], cert_pem=cert_pem, fingerprint=fingerprint, paired_at=time.time())
        self.masters.append(m)
        self.save()
        return m

    def remove_masters(self, which: str | None) -> list[PairedMaster]:
        """Unpair the masters named ``which`` (name, or a fingerprint's start of at least 8 hex
        digits; None = every master); saves and returns the removed ones."""
        def match(m: PairedMaster) -> bool:
            if which is None:
                return True
            w = which.strip().lower().replace("-", "").replace(":", "")
            return m.name == which or (len(w) >= 8 and m.fingerprint.startswith(w))
        gone = [m for m in self.masters if match(m)]
        if gone:
            self.masters = [m for m in self.masters if not match(m)]
            self.save()
        return gone

    def refresh(self) -> None:
        """Re-read the pairings if another process (``herd-agent unpair``) changed the file."""
        if self.path is None:
            return
        try:
            mtime = self.path.stat().st_mtime_ns
        except OSError:
            return
        if mtime == self._mtime:
            return
        try:
            fresh = _state_from_json(json.loads(self.path.read_bytes().decode("utf-8")), str(self.path))
        except (ValueError, KeyError, TypeError, AttributeError, OSError):
            return  # half-written by hand: keep what we have
        if fresh.node_id == self.node_id:
            self.masters = fresh.masters
        self._mtime = mtime

    def to_json(self) -> dict:
        return {
            "version": STATE_VERSION,
            "node_id": self.node_id,
            "masters": [vars(m) for m in self.masters],
        }

    def save(self) -> None:
        """Write the state file atomically with owner-only permissions."""
        if self.path is None:
            raise SettingsError("state has no file to save to")
        write_atomic(self.path, json.dumps(self.to_json(), indent=2).encode("utf-8"), mode=0o600)
        with contextlib.suppress(OSError):
            self._mtime = self.path.stat().st_mtime_ns


def _state_from_json(data, origin: str) -> AgentState:
    if not isinstance(data, dict):
        raise ValueError("top level is not an object")
    node_id = str(uuid.UUID(str(data["node_id"])))
    version = data.get("version", 1)
    if version == 1:
        # Bearer-token pairings (before PAKE and pinned keys): nothing in them can be upgraded,
        # since the token never proved who the master is. They are dropped and reported.
        return AgentState(node_id=node_id, dropped_legacy=len(data.get("masters") or []))
    if version != STATE_VERSION:
        raise ValueError(f"unknown state version {version!r}")
    masters = []
    for m in data.get("masters", []):
        masters.append(PairedMaster(name=str(m.get("name", "")), cert_pem=str(m["cert_pem"]),
                                    fingerprint=str(m["fingerprint"]), paired_at=float(m.get("paired_at", 0))))
    return AgentState(node_id=node_id, masters=masters)


def load_state(state_dir: Path | None = None, *, create: bool = True) -> AgentState:
    """Read the state file, creating (and saving) a fresh identity if there is none.

    An unreadable file is set aside (``*.corrupt-<ts>``) and :class:`SettingsError` raised:
    pairings would be lost, so the user should hear about it rather than find out later.
    """
    path = (state_dir or default_state_dir()) / STATE_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        state = AgentState.new(path)
        if create:
            state.save()
        return state
    except OSError as exc:
        raise SettingsError(f"cannot read state {path}: {exc}") from exc
    try:
        state = _state_from_json(json.loads(raw.decode("utf-8")), str(path))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        moved = set_aside(path)
        raise SettingsError(f"state file {path} is unreadable ({exc}); moved it to {moved.name}. "
                            "The next start creates a new node identity; masters must pair again.") from exc
    state.path = path
    if state.dropped_legacy:
        state.save()  # upgraded: the dropped pairings are reported once, at this start
    with contextlib.suppress(OSError):
        state._mtime = path.stat().st_mtime_ns
    return state
