"""Checks before a launch: can this master run a cluster with these nodes, and how well?

:func:`check_cluster` returns a list of :class:`Finding`, each with a severity and one plain
sentence (in the app's language, see :mod:`agent.i18n`). ``error`` findings mean a launch
would fail (``herd up`` refuses to start);
``warning`` ones mean it would work badly (a Wi-Fi link); ``ok`` ones say what was checked.

What is checked:

* the master's own engine: found, the pinned llama.cpp build, what it is (its backend and GPUs,
  read from the engine itself: herd's ``engine.json``, or what a build made by hand reports), and
  that its llama-server has RPC;
* per node: the agent answers; it runs the same llama.cpp build and the same RPC protocol major
  as the master (a major mismatch aborts llama-server, a different build is risky); what its
  engine is (backend, GPUs, set up by herd or by hand, RPC) and what its agent says about it
  (an ``engine_dir`` that is not the ``--backend`` asked for, a GPU build that finds no GPU);
  this master is paired with it; its echo answers (UDP reachable); its RPC port accepts a TCP
  connection from the master when the worker runs, and the worker is not held by another master;
* the link: the node's or the master's network interface for that link is Wi-Fi (decode speed
  is bound by round-trip time, and Wi-Fi adds milliseconds per token).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from dataclasses import dataclass

from agent.client import AgentClient, AgentError, measure_echo_rtt
from agent.engine_lookup import PINNED_BUILD, Engine, EngineIdentity, identify
from agent.hardware import nics
from agent.i18n import translate
from agent.protocol import AgentStatus, WorkerState

ERROR, WARNING, OK = "error", "warning", "ok"


@dataclass(frozen=True)
class Finding:
    """One thing a check found: the doctor's before a launch, or a difference between a profile
    and the live cluster (:func:`gui.cluster.launching.profile.diff_profile`).

    Attributes:
        severity: ``error`` (a launch would fail or run something else), ``warning`` or ``ok``.
        subject: what it is about: ``master``, a node's name, ``engine``, ``model``, ``plan``.
        message: one plain sentence.
        code: a stable short name for scripts (``unreachable``, ``version-mismatch``…), or empty.
        advice: what to do about it, or empty.
        pair_with: the id of a node that is here but not paired with this computer: pairing
            with it removes this finding (the window offers a Pair button for it), or empty.
    """

    severity: str
    subject: str
    message: str
    code: str = ""
    advice: str = ""
    pair_with: str = ""

    def __str__(self) -> str:
        return f"{self.severity}: {self.subject}: {self.message}"

    def to_json(self) -> dict:
        out = {"severity": self.severity, "subject": self.subject, "message": self.message}
        if self.code:
            out["code"] = self.code
        if self.advice:
            out["advice"] = self.advice
        return out


def has_errors(findings: list[Finding]) -> bool:
    """True when any finding is an error."""
    return any(f.severity == ERROR for f in findings)


def check_engine(engine: Engine, identity: EngineIdentity | None = None) -> list[Finding]:
    """The master's own llama.cpp programs (``identity``: what :func:`agent.engine_lookup.identify`
    found them to be, when it was asked)."""
    if engine.llama_server is None:
        return [Finding(ERROR, "master", translate("Doctor", "No llama-server found on this machine; "
                                                   "run `herd engine install`."), "no-engine")]
    if engine.build is not None and engine.build != PINNED_BUILD:
        out = [Finding(WARNING, "master", translate(
            "Doctor", "This machine runs llama.cpp build {build}; herd is tested with build {pinned}.")
            .format(build=engine.build, pinned=PINNED_BUILD), "engine-build")]
    else:
        out = [Finding(OK, "master", translate("Doctor", "llama-server build {build} found.")
                       .format(build=engine.build or _unknown()), "engine"), check_repacking(engine)]
    if identity is None:
        return out
    out.append(Finding(OK, "master", translate("Doctor", "This machine's llama.cpp: {engine}.")
                       .format(engine=describe_engine(identity.to_json(), engine.folder)), "engine-backend"))
    if identity.rpc is False:
        out.append(Finding(ERROR, "master", translate(
            "Doctor", "This machine's llama-server has no RPC backend ({why}), so it cannot use the workers; "
            "build llama.cpp with -DGGML_RPC=ON, or run `herd engine install`.")
            .format(why=identity.rpc_from), "no-rpc"))
    return out


def describe_engine(identity: dict, folder=None) -> str:
    """One engine in words, from an :meth:`EngineIdentity.to_json` document (the master's own,
    or what an agent reports in ``/status``): backend, build, who set it up, RPC, GPUs."""
    build = identity.get("build")
    if build is None:
        built = translate("Doctor", "build unknown")
    elif build == PINNED_BUILD:
        built = translate("Doctor", "build {build}, the pinned one").format(build=build)
    else:
        built = translate("Doctor", "build {build}, not the pinned {pinned}").format(build=build, pinned=PINNED_BUILD)
    if identity.get("by_hand"):
        setup = translate("Doctor", "set up by hand in {folder}; {evidence}").format(
            folder=folder or _unknown(), evidence=identity.get("backend_from") or _unknown())
    else:
        setup = translate("Doctor", "installed by herd")
    rpc = {True: translate("Doctor", "yes"), False: translate("Doctor", "no")}.get(identity.get("rpc"), _unknown())
    gpus = ", ".join(f"{d.get('name')} ({d.get('description')})" for d in identity.get("gpus") or []
                     if isinstance(d, dict)) or translate("Doctor", "none")
    return translate("Doctor", "a {backend} build ({built}; {setup}), RPC: {rpc}; GPUs: {gpus}").format(
        backend=identity.get("backend") or "cpu", built=built, setup=setup, rpc=rpc, gpus=gpus)


def check_node_engine(name: str, engine_status: dict, mismatch: bool) -> list[Finding]:
    """What a node's engine is, from the ``engine`` part of its ``/status`` (``mismatch``: the
    build check already found it differs from the master's)."""
    identity = engine_status.get("identity")
    out: list[Finding] = []
    if isinstance(identity, dict):
        out.append(Finding(OK, name, translate("Doctor", "Its llama.cpp: {engine}.").format(
            engine=describe_engine(identity, engine_status.get("folder"))), "engine-backend"))
        build = identity.get("build")
        if not mismatch and build is not None and build != PINNED_BUILD:
            out.append(Finding(WARNING, name, translate(
                "Doctor", "The node runs llama.cpp build {build}; herd is tested with build {pinned}.")
                .format(build=build, pinned=PINNED_BUILD), "engine-build"))
        elif build is None and identity.get("by_hand"):
            out.append(Finding(WARNING, name, translate(
                "Doctor", "The node's llama.cpp does not say its build number; every node must run build "
                "{pinned}.").format(pinned=PINNED_BUILD), "engine-build"))
    if engine_status.get("note"):
        out.append(Finding(WARNING, name, translate("Doctor", "Its agent says: {note}.")
                           .format(note=str(engine_status["note"]).rstrip(".")), "engine-note"))
    return out


def check_repacking(engine: Engine) -> Finding:
    """What herd knows about llama.cpp's weight repacking with this engine on this CPU: a
    warning when it crashes here (herd then starts llama-server with ``--no-repack``)."""
    from gui.cluster.llama import repack_probe
    verdict = repack_probe.load_verdict(engine.llama_server)
    severity = WARNING if verdict is not None and verdict.needs_no_repack else OK
    return Finding(severity, "master", repack_probe.describe_verdict(verdict), "repacking")


def _unknown() -> str:
    return translate("Doctor", "unknown")


def _proto_major(proto: str | None) -> str | None:
    return proto.split(".", 1)[0] if proto else None


def _local_ip_towards(host: str) -> str | None:
    """The master's address used to reach ``host`` (a UDP connect sends no packet)."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))
            return s.getsockname()[0]
    except OSError:
        return None


def _wifi_nic(nic_list: list[dict], ip: str | None) -> dict | None:
    for nic in nic_list:
        if ip and ip in nic.get("addresses", []) and nic.get("wifi"):
            return nic
    return None


async def _tcp_open(host: str, port: int, timeout: float) -> str | None:
    """None when ``host:port`` accepts a connection, else the reason."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        return str(exc) or type(exc).__name__
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return None


async def check_node(node, client: AgentClient, engine: Engine, *, timeout: float = 3.0) -> list[Finding]:
    """Every check for one node (see the module docstring)."""
    name = node.name or node.id
    out: list[Finding] = []
    try:
        info = await client.info()
    except AgentError as exc:
        return [Finding(ERROR, name, translate("Doctor", "The agent at {url} does not answer ({why}).")
                        .format(url=node.api_url, why=exc), "unreachable")]
    if info.get("id") != node.id:
        return [Finding(ERROR, name, translate("Doctor", "{url} is now a different node ({id}); the "
                                               "node vanished or changed address.")
                        .format(url=node.api_url, id=info.get("id")), "vanished")]
    out.append(Finding(OK, name, translate("Doctor", "The agent answers at {url}.").format(url=node.api_url),
                       "reachable"))
    out.extend(_check_versions(name, info, engine))
    status, paired = await _check_paired(node, client)
    out.append(paired)
    if node.echo_port:
        out.append(await _check_echo(name, node))
    if status is not None and isinstance(status.get("engine"), dict):
        out.extend(check_node_engine(name, status["engine"],
                                     mismatch=any(f.code == "version-mismatch" for f in out)))
    if status is not None:
        out.extend(await _check_worker(name, node, status, timeout))
    mine = _wifi_nic(nics(), _local_ip_towards(node.host))
    if mine:
        out.append(Finding(WARNING, name, translate(
            "Doctor", "This master reaches the node over Wi-Fi ({nic}); a cable will be much faster.")
            .format(nic=mine["name"]), "wifi"))
    return out


def _check_versions(name: str, info: dict, engine: Engine) -> list[Finding]:
    """The node's RPC worker is there and runs this master's llama.cpp build and protocol."""
    out: list[Finding] = []
    eng = info.get("engine") or {}
    build, proto = eng.get("build"), eng.get("proto")
    master_proto = engine.rpc_proto
    if not eng.get("rpc_server"):
        out.append(Finding(ERROR, name, translate("Doctor", "The node has no llama.cpp RPC worker; "
                                                  "install the engine there (the agent MSI ships it, "
                                                  "or `herd engine install`)."), "no-worker"))
    if master_proto and proto and _proto_major(proto) != _proto_major(master_proto):
        out.append(Finding(ERROR, name, translate(
            "Doctor", "The node speaks RPC protocol {proto}, this master {master}; llama-server would "
            "refuse it. Install llama.cpp build {build} on every node.")
            .format(proto=proto, master=master_proto, build=engine.build or PINNED_BUILD), "version-mismatch"))
    elif engine.build and build and int(build) != int(engine.build):
        out.append(Finding(ERROR, name, translate(
            "Doctor", "The node runs llama.cpp build {build}, this master {master}; every node must "
            "run the same build.").format(build=build, master=engine.build), "version-mismatch"))
    else:
        out.append(Finding(OK, name, translate(
            "Doctor", "Same llama.cpp build ({build}) and RPC protocol ({proto}) as the master.")
            .format(build=build or _unknown(), proto=proto or _unknown()), "version"))
    return out


async def _check_paired(node, client: AgentClient) -> tuple[dict | None, Finding]:
    """Whether this master is paired with ``node``: its status (None when it could not be read)
    and the finding that says so."""
    name = node.name or node.id
    try:
        status = await client.status()
    except AgentError as exc:
        if exc.status == 401:
            return None, Finding(ERROR, name, translate(
                "Doctor", "This master is not paired with the node; run `herd pair {address} --pin "
                "PIN` with the PIN it shows.").format(address=f"{node.host}:{node.api_port}"), "not-paired")
        return None, Finding(ERROR, name, translate("Doctor", "The node's status could not be read ({why}).")
                             .format(why=exc), "status")
    return status, Finding(OK, name, translate("Doctor", "This master is paired with the node."), "paired")


async def _check_echo(name: str, node) -> Finding:
    """The node's UDP echo answers (the latency graphs need it)."""
    try:
        rtts = await measure_echo_rtt(node.host, node.echo_port, count=3, timeout=1.0)
    except AgentError:
        return Finding(WARNING, name, translate(
            "Doctor", "UDP echo port {port} does not answer; a firewall may block it (latency "
            "graphs will be empty).").format(port=node.echo_port), "echo")
    return Finding(OK, name, translate("Doctor", "Echo answers ({ms} ms round trip).")
                   .format(ms=f"{min(rtts) * 1000:.2f}"), "echo")


async def _check_worker(name: str, node, status: dict, timeout: float) -> list[Finding]:
    """The node's RPC worker is free and its port open; the node's own link is no Wi-Fi."""
    out: list[Finding] = []
    rpc = AgentStatus.of(status).rpc
    if rpc.state == WorkerState.BUSY:
        out.append(Finding(ERROR, name, translate("Doctor", "Its RPC worker is in use by another "
                                                  "client ({client}).")
                           .format(client=rpc.client or _unknown()), "busy"))
    elif rpc.state == WorkerState.READY and node.rpc_port:
        why = await _tcp_open(node.host, node.rpc_port, timeout)
        if why:
            out.append(Finding(ERROR, name, translate(
                "Doctor", "RPC port {endpoint} is not reachable from this master ({why}); check "
                "its firewall.").format(endpoint=node.rpc_endpoint, why=why), "rpc-port"))
        else:
            out.append(Finding(OK, name, translate("Doctor", "RPC port {endpoint} is open.")
                               .format(endpoint=node.rpc_endpoint), "rpc-port"))
    elif rpc.state == WorkerState.CRASHED:
        out.append(Finding(WARNING, name, translate(
            "Doctor", "Its RPC worker crashed: {error}; it will be restarted on launch.")
            .format(error=rpc.error or "?"), "crashed"))
    node_nic = _wifi_nic((status.get("hardware") or {}).get("nics") or [], node.host)
    if node_nic:
        out.append(Finding(WARNING, name, translate(
            "Doctor", "The node reaches this network over Wi-Fi ({nic}); each token needs a round "
            "trip, so a cable will be much faster.").format(nic=node_nic["name"]), "wifi"))
    return out


async def check_cluster(nodes: list, client_for: Callable, engine: Engine, *,
                        timeout: float = 3.0) -> list[Finding]:
    """The engine check, then every node's checks (nodes checked concurrently)."""
    async def one(node) -> list[Finding]:
        client = client_for(node)
        try:
            return await check_node(node, client, engine, timeout=timeout)
        finally:
            await client.aclose()

    async def own_engine() -> EngineIdentity | None:
        return await asyncio.to_thread(identify, engine) if engine.llama_server is not None else None

    identity, *results = await asyncio.gather(own_engine(), *(one(n) for n in nodes))
    out = check_engine(engine, identity)
    for r in results:
        out.extend(r)
    return out
