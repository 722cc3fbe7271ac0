"""Cluster profiles: a running cluster saved to a versioned JSON file, checked, and replayed.

A profile (format ``llama-herd-profile``, version 1) holds everything needed to start the same
cluster again::

    {
      "format": "llama-herd-profile", "version": 1, "created": "2026-01-01T12:00:00Z",
      "engine": {"build": 11434, "rpc_proto": "7.0.0"},
      "nodes": {"<agent id>": {"name": "gaming-pc", "address": "192.168.1.20", "api_port": 50050,
                               "fingerprint": "<pairing key fp>", "hardware": "CUDA0 8192 MiB"}},
      "model": {"path": "/models/x.gguf", "size": 123, "sha256": "…" or null, "name": "…",
                "architecture": "llama", "n_layer": 32},
      "plan": {"n_layer": 32, "host_layers": 0, "assignments": [{"device": {…}, "count": 20}, …]},
      "server": {"ctx": 4096, "port": 8080, "extra_args": ["--temp", "0.7"]},
      "speculation": {"kind": "draft", "draft": "/models/small.gguf", "draft_max": 3}
    }

``speculation`` (#35) is there only when the cluster speculates: a draft model, n-gram lookup or
the model's own MTP heads (:class:`gui.cluster.planning.speculation.Speculation`). Its draft path
is data, checked like the other fields and again before each launch (the file may have changed).

A profile is data, not a command line (#32): herd builds llama-server's arguments itself. The
extra arguments may only be the tuning options of :mod:`gui.cluster.llama.server_args`
(a profile asking for ``--rpc``, ``--log-file``… is refused, the argument named), and where the
endpoint listens is this PC's own setting: a ``server.host`` other than loopback is refused
(older herds wrote it; loopback is read and ignored). The reader refuses JSON nested deeper than
:data:`agent.json_limits.MAX_JSON_DEPTH`.

:func:`load_profile` checks every field and names the one that is wrong
(``profile.plan.assignments[1].count: expected integer, got 'x'``); :func:`diff_profile` says
what differs from the live cluster; :func:`rebind_plan` points the plan at the nodes' current
addresses; :func:`start_scripts` writes shell and batch files that start the same cluster by hand
on PCs without herd-agent.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.files import write_atomic
from agent.i18n import translate
from agent.json_limits import MAX_JSON_DEPTH, JsonTooDeep
from agent.json_limits import loads as json_loads
from gui.cluster.launching.doctor import Finding
from gui.cluster.llama.server_command import DEFAULT_HOST, ServerOptions, ServerSpec
from gui.cluster.planning.plan import Assignment, Device, ExpertHome, Plan, PlanError
from gui.cluster.planning.speculation import Speculation, SpeculationError

if TYPE_CHECKING:
    from gui.cluster.llama.model import ModelInfo

FORMAT = "llama-herd-profile"
VERSION = 1
#: The ``server.host`` values read (and ignored) in a profile: this PC only, as herd's default.
LOOPBACK_HOSTS = frozenset({"", "127.0.0.1", "localhost", "::1", "[::1]"})


class ProfileError(ValueError):
    """A profile file that cannot be used. The message names the file or field at fault."""


# --------------------------------------------------------------------------------------------
# the profile


@dataclass(frozen=True)
class ProfileNode:
    """A worker node as the profile remembers it.

    Attributes:
        id: the agent's stable id (the key in ``profile.nodes``).
        name: its friendly name.
        address: the host it was reached at.
        api_port: its agent's control port (0 when it had no agent).
        fingerprint: its pairing-key fingerprint (who it is), or ``""``.
        hardware: a summary of its devices and memory (what it is), e.g. ``CPU 24105 MiB``.
    """

    id: str
    name: str
    address: str
    api_port: int = 0
    fingerprint: str = ""
    hardware: str = ""


@dataclass(frozen=True)
class ProfileModel:
    """The model a profile runs.

    Attributes:
        path: the GGUF file on the master.
        size: its size in bytes.
        sha256: its SHA-256, or None when it was not computed.
        name, architecture, n_layer: what :func:`gui.cluster.llama.model.inspect_model` said.
    """

    path: str
    size: int
    sha256: str | None = None
    name: str = ""
    architecture: str = ""
    n_layer: int = 0


@dataclass(frozen=True)
class Profile:
    """A saved cluster: nodes, engine build, model, plan, server options and speculation (#35)."""

    nodes: Mapping[str, ProfileNode]
    model: ProfileModel
    plan: Plan
    server: ServerOptions = ServerOptions()
    engine_build: int | None = None
    rpc_proto: str | None = None
    created: str = ""
    version: int = VERSION
    speculation: Speculation = Speculation()

    def to_json(self) -> dict:
        """The JSON document (see the module docstring)."""
        doc = {
            "format": FORMAT,
            "version": self.version,
            "created": self.created,
            "engine": {"build": self.engine_build, "rpc_proto": self.rpc_proto},
            "nodes": {nid: {"name": n.name, "address": n.address, "api_port": n.api_port,
                            "fingerprint": n.fingerprint, "hardware": n.hardware}
                      for nid, n in self.nodes.items()},
            "model": {"path": self.model.path, "size": self.model.size, "sha256": self.model.sha256,
                      "name": self.model.name, "architecture": self.model.architecture,
                      "n_layer": self.model.n_layer},
            "plan": self.plan.to_json(),
            # where the endpoint listens is the PC's own setting, never the profile's (#32)
            "server": {k: v for k, v in self.server.to_json().items() if k != "host"},
        }
        if self.speculation.active:
            doc["speculation"] = self.speculation.to_json()
        return doc

    def llama_server_args(self, model_path: str | os.PathLike | None = None, *,
                          verify_layers: bool = False) -> list[str]:
        """llama-server's arguments (after the program name) for this profile: the launcher's
        own command line (:class:`~gui.cluster.llama.server_command.ServerSpec`);
        ``verify_layers``: at ``-lv 5``, which names every layer's device."""
        return ServerSpec.for_plan(self.plan, model_path or self.model.path, self.server,
                                   verify_layers=verify_layers, speculation=self.speculation).args()


# --------------------------------------------------------------------------------------------
# field-checked reading

_TYPE_NAMES = {int: "integer", str: "string", dict: "object", list: "array", bool: "boolean"}


def _describe(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "…"


def _field(obj: Mapping, key: str, path: str, kind: type | tuple[type, ...], *, optional: bool = False,
           default: Any = None) -> Any:
    """``obj[key]`` checked to be of ``kind``; errors name ``path.key``."""
    where = f"{path}.{key}"
    if key not in obj or (optional and obj[key] is None):
        if optional:
            return default
        raise ProfileError(f"{where}: missing")
    value = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int in Python; a count of True is still wrong.
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        want = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
        raise ProfileError(f"{where}: expected {want}, got {_describe(value)}")
    return value


def _non_negative(value: int, where: str) -> int:
    if value < 0:
        raise ProfileError(f"{where}: must not be negative, got {value}")
    return value


def _device(d: Any, where: str) -> Device:
    if not isinstance(d, dict):
        raise ProfileError(f"{where}: expected object, got {_describe(d)}")
    kind = _field(d, "kind", where, str, optional=True, default="rpc")
    try:
        return Device(
            node_id=_field(d, "node_id", where, str),
            node_name=_field(d, "node_name", where, str),
            endpoint=_field(d, "endpoint", where, str, optional=kind != "rpc"),
            index=_non_negative(_field(d, "index", where, int, optional=True, default=0), f"{where}.index"),
            name=_field(d, "name", where, str, optional=True, default=""),
            free_bytes=_non_negative(_field(d, "free_bytes", where, int, optional=True, default=0),
                                     f"{where}.free_bytes"),
            total_bytes=_non_negative(_field(d, "total_bytes", where, int, optional=True, default=0),
                                      f"{where}.total_bytes"),
            kind=kind)
    except PlanError as e:
        raise ProfileError(f"{where}: {e}") from None


def _server_from_json(s: dict, where: str) -> ServerOptions:
    """The ``server`` section at ``where``: context, port, alias and further arguments, the
    arguments checked against the allow-list and a ``host`` other than loopback refused (#32)."""
    extra = _field(s, "extra_args", where, list, optional=True, default=[])
    for i, x in enumerate(extra):
        if not isinstance(x, str):
            raise ProfileError(f"{where}.extra_args[{i}]: expected string, got {_describe(x)}")
    host = _field(s, "host", where, str, optional=True, default=DEFAULT_HOST)
    if host.strip().lower() not in LOOPBACK_HOSTS:
        # a profile someone sent must not open this PC's endpoint to the network (#32)
        raise ProfileError(translate("Profile", "{where}: {host} is not taken from a profile: where the endpoint "
                                                "listens is this computer's own setting (herd up --host). Remove "
                                                "server.host from the profile.").format(
            where=f"{where}.host", host=_describe(host)))
    ctx = _field(s, "ctx", where, int)
    if ctx < 1:
        raise ProfileError(f"{where}.ctx: must be positive, got {ctx}")
    port = _field(s, "port", where, int)
    if not 0 < port < 65536:
        raise ProfileError(f"{where}.port: must be 1…65535, got {port}")
    alias = _field(s, "alias", where, str, optional=True, default=None)
    people = _field(s, "people", where, int, optional=True, default=None)  # people at once (#34)
    try:
        server = ServerOptions(ctx=ctx, port=port, alias=alias or None, extra_args=tuple(extra))
    except ValueError as e:  # a further argument that is not a tuning option (#32)
        raise ProfileError(f"{where}.extra_args: {e}") from None
    if people is not None:
        try:
            server = replace(server, people=people)
        except ValueError as e:
            raise ProfileError(f"{where}.people: {e}") from None
    return server


def profile_from_json(doc: Any, source: str = "profile") -> Profile:
    """A :class:`Profile` from a parsed JSON document, every field checked.

    Raises:
        ProfileError: naming the field (``profile.model.size: expected integer, got "big"``), or
            the version when it is not one this herd reads.
    """
    p = "profile"
    if not isinstance(doc, dict):
        raise ProfileError(f"{source}: expected a JSON object, got {_describe(doc)}")
    fmt = doc.get("format")
    if fmt != FORMAT:
        raise ProfileError(f"{source}: not a llama-herd profile (format is {_describe(fmt)}, expected {FORMAT!r})")
    version = _field(doc, "version", p, int)
    if version != VERSION:
        newer = " — it was written by a newer herd; update herd to read it" if version > VERSION else ""
        raise ProfileError(f"{p}.version: unknown profile version {version} (this herd reads version "
                           f"{VERSION}){newer}")
    created = _field(doc, "created", p, str, optional=True, default="")

    engine = _field(doc, "engine", p, dict)
    build = _field(engine, "build", f"{p}.engine", int, optional=True)
    proto = _field(engine, "rpc_proto", f"{p}.engine", str, optional=True)

    nodes: dict[str, ProfileNode] = {}
    for nid, n in _field(doc, "nodes", p, dict).items():
        where = f"{p}.nodes[{json.dumps(nid)}]"
        if not isinstance(n, dict):
            raise ProfileError(f"{where}: expected object, got {_describe(n)}")
        nodes[nid] = ProfileNode(
            id=nid, name=_field(n, "name", where, str), address=_field(n, "address", where, str),
            api_port=_field(n, "api_port", where, int, optional=True, default=0),
            fingerprint=_field(n, "fingerprint", where, str, optional=True, default=""),
            hardware=_field(n, "hardware", where, str, optional=True, default=""))

    m = _field(doc, "model", p, dict)
    model = ProfileModel(
        path=_field(m, "path", f"{p}.model", str),
        size=_non_negative(_field(m, "size", f"{p}.model", int), f"{p}.model.size"),
        sha256=_field(m, "sha256", f"{p}.model", str, optional=True),
        name=_field(m, "name", f"{p}.model", str, optional=True, default=""),
        architecture=_field(m, "architecture", f"{p}.model", str, optional=True, default=""),
        n_layer=_field(m, "n_layer", f"{p}.model", int, optional=True, default=0))

    pl = _field(doc, "plan", p, dict)
    n_layer = _field(pl, "n_layer", f"{p}.plan", int)
    host = _field(pl, "host_layers", f"{p}.plan", int)
    assignments = []
    for i, a in enumerate(_field(pl, "assignments", f"{p}.plan", list)):
        where = f"{p}.plan.assignments[{i}]"
        if not isinstance(a, dict):
            raise ProfileError(f"{where}: expected object, got {_describe(a)}")
        dev = _device(_field(a, "device", where, dict), f"{where}.device")
        count = _non_negative(_field(a, "count", where, int), f"{where}.count")
        if dev.kind == "rpc" and dev.node_id not in nodes:
            raise ProfileError(f"{where}.device.node_id: {dev.node_id!r} is not in {p}.nodes")
        assignments.append(Assignment(dev, count))
    homes = []
    for i, h in enumerate(_field(pl, "expert_homes", f"{p}.plan", list, optional=True, default=[])):
        where = f"{p}.plan.expert_homes[{i}]"
        if not isinstance(h, dict):
            raise ProfileError(f"{where}: expected object, got {_describe(h)}")
        homes.append(ExpertHome(_field(h, "layers", where, str), _field(h, "experts", where, str)))
    try:
        plan = Plan(n_layer, host, tuple(assignments), tuple(homes))
    except PlanError as e:
        raise ProfileError(f"{p}.{e}" if str(e).startswith("plan") else f"{p}.plan: {e}") from None
    if model.n_layer and model.n_layer != n_layer:
        raise ProfileError(f"{p}.plan.n_layer: {n_layer} does not match {p}.model.n_layer {model.n_layer}")

    server = _server_from_json(_field(doc, "server", p, dict), f"{p}.server")
    try:
        speculation = Speculation.from_json(doc.get("speculation", {}), f"{p}.speculation")
    except SpeculationError as e:
        raise ProfileError(str(e)) from None
    return Profile(nodes=nodes, model=model, plan=plan, server=server, engine_build=build,
                   rpc_proto=proto, created=created, version=version, speculation=speculation)


def load_profile(path: str | os.PathLike) -> Profile:
    """Read and check a profile file. Raises :class:`ProfileError` naming the file or field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ProfileError(f"{path}: cannot read the profile ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise ProfileError(f"{path}: not a text file") from None
    try:
        doc = json_loads(text)
    except JsonTooDeep:  # json would end in a RecursionError (#32)
        raise ProfileError(translate("Profile", "{path}: not a profile: its JSON is nested deeper than {n} levels")
                           .format(path=path, n=MAX_JSON_DEPTH)) from None
    except json.JSONDecodeError as e:
        raise ProfileError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    return profile_from_json(doc, source=str(path))


def save_profile(path: str | os.PathLike, profile: Profile) -> Path:
    """Write ``profile`` to ``path`` atomically (temp file in the same folder, then rename)."""
    path = Path(path)
    text = json.dumps(profile.to_json(), indent=2) + "\n"
    return write_atomic(path, text)


# --------------------------------------------------------------------------------------------
# making a profile from a running cluster


def _attr(obj: Any, name: str, default: Any = None) -> Any:
    """``obj.name`` or ``obj[name]``: live nodes may be records or plain dicts."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _hardware(plan: Plan, node_id: str) -> str:
    parts = [f"{d.name or 'device'} {d.total_bytes >> 20} MiB" for d in plan.devices() if d.node_id == node_id]
    return ", ".join(parts)


def make_profile(plan: Plan, model: ModelInfo, nodes: Iterable[Any], *, engine: Any = None,
                 server: ServerOptions | None = None, ctx: int | None = None, host: str | None = None,
                 port: int | None = None, extra_args: Sequence[str] | None = None,
                 sha256: str | None = None, speculation: Speculation = Speculation()) -> Profile:
    """A :class:`Profile` of a cluster about to run (or running) ``plan`` on ``model``.

    ``nodes`` are the live node records (``gui.cluster.nodes.records.Node`` or dicts with ``id``,
    ``name``, ``host``, ``api_port``, ``fingerprint``); only the nodes the plan uses are kept.
    ``engine`` is an ``agent.engine_lookup.Engine`` (its ``build`` and ``rpc_proto``). Server options are
    ``server`` (the launch's own), with ``ctx``, ``host``, ``port`` and ``extra_args`` replacing
    its fields when given. ``speculation`` is the launch's own (#35).
    """
    base = server or ServerOptions()
    try:
        server = replace(base, **{k: v for k, v in (("ctx", ctx), ("host", host), ("port", port),
                                                     ("extra_args", tuple(extra_args) if extra_args is not None
                                                      else None)) if v is not None})
    except ValueError as exc:
        raise ProfileError(f"server options: {exc}") from None
    by_id = {str(_attr(n, "id")): n for n in nodes}
    kept: dict[str, ProfileNode] = {}
    for dev in plan.devices():
        if dev.kind != "rpc" or dev.node_id in kept:
            continue
        live = by_id.get(dev.node_id)
        address = dev.endpoint.rsplit(":", 1)[0]
        kept[dev.node_id] = ProfileNode(
            id=dev.node_id, name=str(_attr(live, "name", dev.node_name) if live is not None else dev.node_name),
            address=str(_attr(live, "host", address) if live is not None else address),
            api_port=int(_attr(live, "api_port", 0) or 0) if live is not None else 0,
            fingerprint=str(_attr(live, "fingerprint", "") or "") if live is not None else "",
            hardware=_hardware(plan, dev.node_id))
    return Profile(
        nodes=kept,
        model=ProfileModel(path=str(Path(model.path).resolve()), size=model.file_bytes, sha256=sha256,
                           name=model.name, architecture=model.architecture, n_layer=model.n_layer),
        plan=plan, server=server,
        engine_build=_attr(engine, "build") if engine is not None else None,
        rpc_proto=_attr(engine, "rpc_proto") if engine is not None else None,
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), speculation=speculation)


def export_profile(path: str | os.PathLike, *, plan: Plan, model: ModelInfo, nodes: Iterable[Any],
                   engine: Any = None, hash_model: bool = True, **options: Any) -> Path:
    """:func:`make_profile` then :func:`save_profile`; hashes the model unless ``hash_model`` is False.

    Further keywords (``server``, ``ctx``, ``host``, ``port``, ``extra_args``) go to :func:`make_profile`.
    """
    from gui.cluster.llama.model import file_sha256

    digest = file_sha256(model.path) if hash_model else None
    prof = make_profile(plan, model, nodes, engine=engine, sha256=digest, **options)
    return save_profile(path, prof)


# --------------------------------------------------------------------------------------------
# comparing with the live cluster


def diff_profile(profile: Profile, live_nodes: Iterable[Any], engine_build: int | None,
                 model_info: ModelInfo | None, model_sha256: str | None = None, *,
                 reporting: Collection[str] | None = None) -> list[Finding]:
    """What differs between ``profile`` and the live cluster; no error when it can be used as saved.

    This is the one check of a profile: what the import dialog shows and what the window applies
    (a profile is used only when :func:`blocking` finds nothing), so the two cannot disagree.

    ``live_nodes`` are node records (``gui.cluster.nodes.records.Node`` or dicts: ``id``, ``name``,
    ``host``, ``reachable``, ``paired``, ``engine``, ``fingerprint``). ``engine_build`` is the
    master's llama.cpp build; ``model_info`` the inspected model at the profile's path (None:
    missing). ``model_sha256``, when given, is compared with the profile's hash. ``reporting``,
    when given, holds the ids of the nodes whose devices are known (their agent's status came
    in); a paired node not among them cannot be planned on yet.
    """
    out: list[Finding] = []
    live = {str(_attr(n, "id")): n for n in live_nodes}
    used = {d.node_id for d, c in profile.plan.assignments if c > 0 and d.kind == "rpc"}
    for nid, pn in profile.nodes.items():
        if nid in used:
            out += _node_findings(profile, nid, pn, live.get(nid), reporting)
    if profile.engine_build is not None and engine_build is not None and engine_build != profile.engine_build:
        out.append(Finding("error", "engine", translate("Profile", "this master runs llama.cpp build {build}, the profile "
                                                            "was made with {need}")
                           .format(build=engine_build, need=profile.engine_build),
                           advice=translate("Profile", "Install that build here (herd engine install).")))
    out += _model_findings(profile, model_info, model_sha256)
    return out


def _node_findings(profile: Profile, nid: str, pn, node, reporting: Collection[str] | None) -> list[Finding]:
    """What differs between a node the profile's plan uses and the live one of its id (None: gone)."""
    out: list[Finding] = []
    label = pn.name or nid
    if node is None:
        # Matched by id only: another node of the same name is another computer (or an
        # agent installed afresh), and its memory and speed are not what the plan assumed.
        out.append(Finding("error", label, translate("Profile", "node is missing (id {nid}, last at {address})")
                           .format(nid=nid, address=pn.address),
                           advice=translate("Profile", "Start its herd-agent and pair with it, then import again; or "
                                        "make a new split over the nodes you have and export that.")))
        return out
    silent = _attr(node, "reachable", True) is False
    if silent:
        out.append(Finding("error", label, translate("Profile", "node does not answer at {host}")
                           .format(host=_attr(node, "host", "?")),
                           advice=translate("Profile", "Check that the computer is on and its herd-agent runs, "
                                        "then import again.")))
    if _attr(node, "paired", True) is False:
        # Found (mDNS or by address) but never paired: its API refuses this master, so a
        # launch could not start its worker. Pairing fixes it without a new import.
        out.append(Finding("error", label, translate("Profile", "node is not paired with this computer"),
                           advice=translate("Profile", "Press Pair and type the PIN its herd-agent shows "
                                        "(herd-agent pin on that computer)."),
                           pair_with=nid))
    elif not silent and reporting is not None and nid not in reporting:
        out.append(Finding("error", label, translate("Profile", "node has not reported its devices yet"),
                           advice=translate("Profile", "Wait a moment: this check runs again by itself.")))
    host = _attr(node, "host")
    if host and host != pn.address:
        out.append(Finding("warning", label, translate("Profile", "address changed from {old} to {new}")
                           .format(old=pn.address, new=host),
                           advice=translate("Profile", "The plan uses the new address.")))
    if pn.fingerprint and _attr(node, "fingerprint") and _attr(node, "fingerprint") != pn.fingerprint:
        out.append(Finding("warning", label, translate("Profile", "pairing key changed (the agent was reinstalled?)")))
    build = str(_attr(node, "engine", "") or "")
    if profile.engine_build is not None and build and build != str(profile.engine_build):
        out.append(Finding("error", label, translate("Profile", "runs llama.cpp build {build}, the profile needs {need}")
                           .format(build=build, need=profile.engine_build),
                           advice=translate("Profile", "Install that build on the node (herd engine install).")))
    return out


def _model_findings(profile: Profile, model_info: ModelInfo | None, model_sha256: str | None) -> list[Finding]:
    """Whether the model at the profile's path is the profile's model."""
    out: list[Finding] = []
    pm = profile.model
    if model_info is None:
        out.append(Finding("error", "model", translate("Profile", "{path} is missing").format(path=pm.path),
                           advice=translate("Profile", "Put the model file back at that path, or open the model and "
                                        "export a new profile.")))
    else:
        again = translate("Profile", "Open the profile's own model file, or export a new profile for this one.")
        if model_info.file_bytes != pm.size:
            out.append(Finding("error", "model", translate("Profile", "other model: {path} has {size} bytes, the "
                                                              "profile's had {saved}")
                               .format(path=model_info.path, size=model_info.file_bytes, saved=pm.size), advice=again))
        if model_info.n_layer != profile.plan.n_layer:
            out.append(Finding("error", "model", translate("Profile", "other model: {n} layers, the plan is for {m}")
                               .format(n=model_info.n_layer, m=profile.plan.n_layer), advice=again))
        if pm.sha256 and model_sha256 and model_sha256.lower() != pm.sha256.lower():
            out.append(Finding("error", "model", translate("Profile", "other model: its SHA-256 differs from the "
                                                              "profile's"), advice=again))
    return out


def settings_differences(profile: Profile, here: ServerOptions) -> list[Finding]:
    """What the profile would change in this PC's server settings ``here``, and anything in it
    that is out of the ordinary, in words (warnings: shown before it is used, never hidden, #32).

    The endpoint's host is not among them: a profile never sets it (:func:`profile_from_json`).
    """
    out: list[Finding] = []
    s = profile.server
    if s.extra_args:
        out.append(Finding("warning", "server", translate("Profile", "the profile adds llama-server options: {args}")
                           .format(args=shlex.join(s.extra_args)), code="profile-options",
                           advice=translate("Profile", "Only tuning options are accepted (sampling, context, "
                                                       "batch, threads, cache); check that you want these.")))
    if s.extra_args != here.extra_args and here.extra_args:
        out.append(Finding("warning", "server", translate("Profile", "replaces this computer's llama-server options "
                                                                     "{old}").format(old=shlex.join(here.extra_args)),
                           code="replaces-options"))
    if s.ctx != here.ctx:
        out.append(Finding("warning", "server", translate("Profile", "context {new} replaces {old}")
                           .format(new=s.ctx, old=here.ctx), code="context"))
    if s.people != here.people:
        out.append(Finding("warning", "server", translate("Profile", "people at once {new} replaces {old}")
                           .format(new=s.people or translate("Profile", "llama-server's default"),
                                   old=here.people or translate("Profile", "llama-server's default")), code="people"))
    if s.port != here.port:
        out.append(Finding("warning", "server", translate("Profile", "port {new} replaces {old}")
                           .format(new=s.port, old=here.port), code="port"))
    if s.alias and s.alias != here.alias:
        out.append(Finding("warning", "server", translate("Profile", "the endpoint's model id becomes {alias}")
                           .format(alias=s.alias), code="alias"))
    return out


def _split_key(plan: Plan) -> tuple:
    return plan.host_layers, tuple((d.key, c) for d, c in plan.assignments if c)


def split_differences(profile: Profile, plan: Plan, running: Plan | None, editor: Plan | None) -> list[Finding]:
    """How the profile's split ``plan`` (on the live nodes) compares with the one serving now
    (``running``) and the one in the split editor (``editor``), by device and layer count: the
    review says so rather than that the profile "matches" (#37 item 14)."""
    out: list[Finding] = []
    mine = _split_key(plan)
    if running is not None and _split_key(running) != mine:
        out.append(Finding("warning", "plan", translate("Profile", "differs from the split serving now ({split})")
                           .format(split=describe_split(profile, running)), code="split-differs",
                           advice=translate("Profile", "Using the profile changes the split; press Start to "
                                                       "relaunch with it.")))
    if editor is not None and _split_key(editor) != mine and (running is None or _split_key(editor) != _split_key(running)):
        out.append(Finding("warning", "plan", translate("Profile", "differs from the split in the editor ({split})")
                           .format(split=describe_split(profile, editor)), code="split-differs",
                           advice=translate("Profile", "Using the profile replaces the editor's split.")))
    return out


def blocking(findings: Iterable[Finding]) -> list[Finding]:
    """The findings that keep a profile from being used (errors: a launch would fail or run
    something other than what was saved)."""
    return [f for f in findings if f.severity == "error"]


def describe_split(profile: Profile, plan: Plan) -> str:
    """The split of ``plan`` in words, for the confirmation once ``profile`` is applied, e.g.
    ``this computer 2, demo-a 3, demo-b 4`` (layer slots per holder; a node with more than one
    device names each)."""
    per_node: dict[str, int] = {}
    for d in plan.devices():
        per_node[d.node_id] = per_node.get(d.node_id, 0) + 1
    here = translate("Profile", "this computer")
    parts = [f"{here} {plan.host_layers}"] if plan.host_layers else []
    for d, count in plan.assignments:
        if not count:
            continue
        node = profile.nodes.get(d.node_id)
        name = node.name if node is not None else d.node_name
        if per_node.get(d.node_id, 0) > 1 and d.name:
            name = f"{name} {d.name}"
        parts.append(f"{name} {count}")
    return ", ".join(parts)


def applied_message(profile: Profile, plan: Plan) -> str:
    """The confirmation the window shows once ``profile`` replaced the split with ``plan``
    (the profile's plan on the nodes as they are now): which model, which split, and that
    nothing runs until Start."""
    name = profile.model.name or Path(profile.model.path).name
    return translate("Profile", "Profile applied: {model}, layer slots {split}. "
                                "Nothing runs until you press Start.").format(
        model=name, split=describe_split(profile, plan))


def refusal(findings: Iterable[Finding]) -> str:
    """Why a profile is not used now, in words: each blocking finding with what to do."""
    lines = [f"{f.subject}: {f.message}" + (f" — {f.advice}" if f.advice else "") for f in blocking(findings)]
    return translate("Profile", "This profile cannot be used now:") + "\n\n" + "\n".join(lines)


def bind_to_devices(plan: Plan, devices: Iterable[Device]) -> Plan:
    """``plan`` with each device replaced by the live device of the same key (node id and
    device index): the live endpoint and free memory, the saved counts. Devices without a live
    match are kept as saved."""
    live = {d.key: d for d in devices}
    return replace(plan, assignments=tuple(Assignment(live.get(d.key, d), c) for d, c in plan.assignments))


def rebind_plan(profile: Profile, live_nodes: Iterable[Any]) -> Plan:
    """The profile's plan with each worker's endpoint moved to its node's current address.

    Nodes are matched by id; a live node's ``host`` and ``rpc_port`` (when known, else the saved
    port) replace the saved endpoint. Nodes not live keep their saved endpoint.
    """
    live = {str(_attr(n, "id")): n for n in live_nodes}
    out = []
    for dev, count in profile.plan.assignments:
        node = live.get(dev.node_id)
        if dev.kind == "rpc" and node is not None and _attr(node, "host"):
            port = _attr(node, "rpc_port", 0) or int(dev.endpoint.rsplit(":", 1)[1])
            host = str(_attr(node, "host"))
            host = f"[{host}]" if ":" in host and not host.startswith("[") else host
            dev = replace(dev, endpoint=f"{host}:{port}")
        out.append(Assignment(dev, count))
    return replace(profile.plan, assignments=tuple(out))


# --------------------------------------------------------------------------------------------
# start scripts for PCs without agents


def _bat_quote(arg: str) -> str:
    """One argument for cmd.exe: quoted when it has spaces or specials, ``%`` doubled."""
    arg = arg.replace("%", "%%")
    if arg and not any(c in arg for c in ' \t&|<>^()",;='):
        return arg
    return '"' + arg.replace('"', '""') + '"'


@dataclass(frozen=True)
class _Worker:
    key: str
    name: str
    host: str
    port: int
    devices: tuple[str, ...] = field(default_factory=tuple)


def _workers(profile: Profile) -> list[_Worker]:
    """One entry per worker the plan uses, in ``--rpc`` order."""
    out = []
    plan = profile.plan
    for ep in plan.rpc_endpoints():
        devs = [d for d in plan.devices() if d.endpoint == ep]
        host, port = ep.rsplit(":", 1)
        host = host.strip("[]")
        node = profile.nodes.get(devs[0].node_id)
        name = node.name if node else devs[0].node_name
        names = tuple(d.name for d in devs) if all(d.name for d in devs) else ()
        out.append(_Worker(devs[0].node_id, name, host, int(port), names))
    return out


def _bind_address(host: str) -> str:
    # ggml-rpc-server binds numeric IPv4 only; a host name means "listen on every interface".
    parts = host.split(".")
    return host if len(parts) == 4 and all(p.isdigit() for p in parts) else "0.0.0.0"


def start_scripts(profile: Profile, master_args: Sequence[str] = (), *, verify_layers: bool = False) -> dict[str, str]:
    """Shell and batch files that start the profile's cluster by hand (no herd-agent needed).

    ``start-workers.sh``/``.bat`` take the node's name (or id) and start that node's
    ``ggml-rpc-server`` on the address and port the plan uses; ``start-master.sh``/``.bat`` run
    ``llama-server`` with the plan's exact arguments (an optional first argument overrides the
    model path) and ``master_args``: what the master that made them needs on its CPU
    (:func:`gui.cluster.llama.server_start.machine_args`, e.g. ``--no-repack``). Set ``LLAMA_CPP_DIR``
    to the folder of the llama.cpp programs, or put them on ``PATH``. Every node must run the
    same llama.cpp build. ``verify_layers`` runs llama-server at ``-lv 5`` (every layer's device in its log).
    """
    build = profile.engine_build
    need = f"llama.cpp build {build}" if build is not None else "the same llama.cpp build"
    workers = _workers(profile)
    names = " ".join(w.name for w in workers) or "(none)"

    def worker_args(w: _Worker) -> list[str]:
        args = ["-H", _bind_address(w.host), "-p", str(w.port)]
        return args + (["-d", ",".join(w.devices)] if w.devices else [])

    sh = ["#!/bin/sh",
          "# llama-herd: start this PC's llama.cpp RPC worker by hand (no herd-agent needed).",
          f"# Every node must run {need}. Usage: ./start-workers.sh NODE   (NODE: {names})",
          "# ggml-rpc-server has no authentication: use it only on a network you trust.",
          "set -e",
          'RPC_SERVER="${LLAMA_CPP_DIR:+$LLAMA_CPP_DIR/}ggml-rpc-server"',
          'case "$1" in']
    for w in workers:
        labels = "|".join(shlex.quote(x) for x in dict.fromkeys([w.name, w.key]))
        sh.append(f'  {labels})\n    exec "$RPC_SERVER" {" ".join(shlex.quote(a) for a in worker_args(w))} ;;')
    sh += [f'  *)\n    echo "usage: $0 NODE   (one of: {names})" >&2\n    exit 2 ;;', "esac", ""]

    bat = ["@echo off",
           "rem llama-herd: start this PC's llama.cpp RPC worker by hand (no herd-agent needed).",
           f"rem Every node must run {need}. Usage: start-workers.bat NODE   (NODE: {names})",
           "rem ggml-rpc-server has no authentication: use it only on a network you trust.",
           'set "RPC_SERVER=ggml-rpc-server.exe"',
           'if not "%LLAMA_CPP_DIR%"=="" set "RPC_SERVER=%LLAMA_CPP_DIR%\\ggml-rpc-server.exe"']
    for i, w in enumerate(workers):
        for label in dict.fromkeys([w.name, w.key]):
            bat.append(f'if /I "%~1"=="{label.replace("%", "%%")}" goto worker{i}')
    bat += [f"echo usage: %~nx0 NODE   (one of: {names}) 1>&2", "exit /b 2"]
    for i, w in enumerate(workers):
        bat += [f":worker{i}", f'"%RPC_SERVER%" {" ".join(_bat_quote(a) for a in worker_args(w))}',
                "exit /b %ERRORLEVEL%"]
    bat.append("")

    args = profile.llama_server_args(verify_layers=verify_layers)[2:]  # after "-m PATH", which the scripts make overridable
    args += [a for a in master_args if a not in args]
    msh = ["#!/bin/sh",
           "# llama-herd: start the master (llama-server with the profile's plan).",
           f"# Start every worker first (start-workers.sh). Needs {need}.",
           "# Usage: ./start-master.sh [MODEL.gguf]",
           "set -e",
           'LLAMA_SERVER="${LLAMA_CPP_DIR:+$LLAMA_CPP_DIR/}llama-server"',
           f'MODEL="${{1:-{profile.model.path}}}"',
           f'exec "$LLAMA_SERVER" -m "$MODEL" {" ".join(shlex.quote(a) for a in args)}', ""]
    mbat = ["@echo off",
            "rem llama-herd: start the master (llama-server with the profile's plan).",
            f"rem Start every worker first (start-workers.bat). Needs {need}.",
            "rem Usage: start-master.bat [MODEL.gguf]",
            'set "LLAMA_SERVER=llama-server.exe"',
            'if not "%LLAMA_CPP_DIR%"=="" set "LLAMA_SERVER=%LLAMA_CPP_DIR%\\llama-server.exe"',
            f'set "MODEL={profile.model.path.replace("%", "%%")}"',
            'if not "%~1"=="" set "MODEL=%~1"',
            f'"%LLAMA_SERVER%" -m "%MODEL%" {" ".join(_bat_quote(a) for a in args)}', ""]
    crlf = "\r\n"
    return {"start-workers.sh": "\n".join(sh), "start-workers.bat": crlf.join(bat),
            "start-master.sh": "\n".join(msh), "start-master.bat": crlf.join(mbat)}


def write_start_scripts(folder: str | os.PathLike, profile: Profile, master_args: Sequence[str] = (), *,
                        verify_layers: bool = False) -> list[Path]:
    """Write :func:`start_scripts` into ``folder`` (atomically each; ``.sh`` files executable)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in start_scripts(profile, master_args, verify_layers=verify_layers).items():
        path = write_atomic(folder / name, text, 0o755 if name.endswith(".sh") else None)
        written.append(path)
    return written
