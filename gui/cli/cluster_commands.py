"""Headless cluster commands: ``herd nodes``, ``pair``, ``plan``, ``up``, ``doctor``, ``export``.

Each command finds nodes the same way the app does — an mDNS browse for ``--timeout`` seconds
plus the addresses added by hand (``--add``, remembered in the config folder) — and then drives
the Qt-free core in ``gui.cluster``. Errors are one clear sentence on stderr and a non-zero exit
status; nothing is launched when a check fails.

Exit status: 0 success, 1 a check failed (doctor error, plan does not fit, launch failed),
2 bad input (unreadable model, malformed split or address).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import shlex
import signal
import sys
from pathlib import Path

from agent.client import AgentError, measure_echo_rtt
from agent.engine_lookup import EngineError, find_engine
from agent.identity import display_fingerprint
from gui.cli.common import CommandError, add_finding_options, command_runner, devices_of, discover, read_model
from gui.cli.draft import add_draft_option, choose_draft, measured_draft, saved_speculation
from gui.cli.progress import TransferPrinter
from gui.cli.wake import add_wake_option, wake_for_up
from gui.cluster.failover.supervisor import FailoverPolicy
from gui.cluster.failover.text import describe_event
from gui.cluster.launching import doctor as doc
from gui.cluster.cluster_launch import ClusterLaunch
from gui.cluster.launching.login_service import Serving, clear_serving, owner_of_port, write_serving
from gui.cluster.llama.server_process import LaunchError
from gui.cluster.launching.preflight_reading import Refusal
from gui.cluster.launching.request import LaunchRequest
from gui.cluster.llama.model import file_sha256
from gui.cluster.llama.server_command import DEFAULT_CTX, DEFAULT_PORT, ServerOptions
from gui.cluster.llama.server_start import machine_args
from gui.cluster.nodes.discovery import Discovery, parse_address
from gui.cluster.nodes.records import KnownAddresses, Node, TokenStore, config_dir, usable_nodes
from gui.cluster.planning.devices import host_free_bytes
from gui.cluster.planning.plan import slot_span
from gui.cluster.serving.front_door import DoorSettings, FrontDoor, FrontDoorError
from gui.cluster.serving.sharing import endpoint_options, endpoint_urls, open_front_door, print_requests

MiB = 1 << 20


def register(sub: argparse._SubParsersAction) -> None:
    """Add the cluster commands to ``herd``'s parser."""
    p = sub.add_parser("nodes", help="list the worker nodes on the network")
    add_finding_options(p, 3.0)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=command_runner(cmd_nodes))

    p = sub.add_parser("pair", help="pair with a node using the PIN it shows")
    p.add_argument("address", help="the node's agent, HOST[:PORT]")
    p.add_argument("--pin", required=True, help="the PIN the node shows (10 digits; spaces are ignored)")
    p.set_defaults(func=command_runner(cmd_pair))

    def planning(p: argparse.ArgumentParser, ctx_default: int | None = DEFAULT_CTX) -> None:
        p.add_argument("--split", help="layer slots per node, e.g. alpha=4,beta=5 (host=N for the "
                                       "master's CPU); default: by free memory")
        p.add_argument("--ctx", type=int, default=ctx_default, help=f"context size (default {DEFAULT_CTX})")
        p.add_argument("--people", type=int, default=None, metavar="N",
                       help="people served at once (llama-server's -np N), each with the whole --ctx: "
                            "the KV cache is planned N times (default: llama-server's own, 4 sharing --ctx)")
        p.add_argument("--threads", type=int, help="RPC worker threads on each node")
        p.add_argument("--experts-in-ram", action="append", default=[], metavar="GPU",
                       help="a mixture-of-experts model: keep the experts of this GPU's layers in its "
                            "PC's RAM (the worker's CPU device), e.g. gaming-pc/0; may be repeated")
        add_draft_option(p)

    p = sub.add_parser("plan", help="show where each layer would go, memory fit and command lines")
    p.add_argument("--model", required=True, type=Path, help="the GGUF model")
    planning(p)
    p.add_argument("--fastest", action="store_true",
                   help="the fastest split that fits, from measured node speeds and links "
                        "(measured once per node and model, then cached; see herd bench)")
    p.add_argument("--for", dest="fastest_for", choices=("chat", "documents"), default="chat",
                   help="what --fastest optimises: decode speed (chat, the default) or the time to "
                        "first token of a long prompt (documents)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"endpoint port (default {DEFAULT_PORT})")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_finding_options(p, 2.0)
    p.set_defaults(func=command_runner(cmd_plan))

    _register_up(sub, planning)

    p = sub.add_parser("doctor", help="check nodes, versions, ports and links before a launch")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_finding_options(p, 2.0)
    p.set_defaults(func=command_runner(cmd_doctor))

    p = sub.add_parser("export", help="save the running cluster (or a plan) as a profile")
    p.add_argument("-o", "--output", required=True, type=Path, help="profile file to write")
    p.add_argument("--model", type=Path, help="export a plan for this model instead of the running cluster")
    planning(p)
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"endpoint port (default {DEFAULT_PORT})")
    p.add_argument("--scripts", type=Path, metavar="DIR",
                   help="also write start-workers/start-master scripts (sh, bat) into DIR")
    add_finding_options(p, 2.0)
    p.set_defaults(func=command_runner(cmd_export))


def _register_up(sub: argparse._SubParsersAction, planning) -> None:
    """``herd up``'s parser (``planning`` adds the options it shares with ``plan`` and ``export``)."""
    p = sub.add_parser("up", help="launch the cluster and serve until Ctrl-C")
    p.add_argument("target", help="a model (.gguf), a profile (.json, herd export) or a saved plan "
                                  "(.json, herd plan --json)")
    planning(p, ctx_default=None)
    p.add_argument("--fastest", action="store_true",
                   help="launch the fastest split that fits, as herd plan --fastest finds it")
    p.add_argument("--for", dest="fastest_for", choices=("chat", "documents"), default="chat",
                   help="what --fastest optimises (as for herd plan)")
    p.add_argument("--alias", default=None, metavar="NAME",
                   help="the model id the endpoint shows (default: the model file's name)")
    p.add_argument("--host", default=None,
                   help="address the endpoint listens on (default 127.0.0.1; with --lan every address)")
    p.add_argument("--port", type=int, default=None, help=f"endpoint port (default {DEFAULT_PORT})")
    p.add_argument("--lan", action="store_true",
                   help="share the endpoint with the other devices of the network through herd's front "
                        "door (on every address, or --host): each device needs a key (herd keys add NAME)")
    p.add_argument("--key-for-local", action="store_true",
                   help="with --lan: ask programs on this computer for a key too")
    p.add_argument("--https", action="store_true",
                   help="with --lan: serve HTTPS with herd's own certificate, so keys do not cross the "
                        "network in clear (clients must pin or trust it: see docs/security.md)")
    p.add_argument("--load-timeout", type=float, default=600.0, metavar="S")
    p.add_argument("--stats", type=float, default=0.0, metavar="S",
                   help="while serving, print tokens/s and link round trips every S seconds "
                        "in which a reply finished (0 = off)")
    p.add_argument("--no-doctor", action="store_true", help="skip the checks before launch")
    p.add_argument("--verify-layers", action="store_true",
                   help="run llama-server at -lv 5 and check every layer's device from its own lines "
                        "(for debugging: its per-token debug output slows generation)")
    p.add_argument("--server-args", default="", metavar="ARGS",
                   help="more llama-server options in one string, e.g. \"--threads 2 -np 1\"")
    g = p.add_argument_group("when a worker is lost")
    g.add_argument("--no-auto-recover", dest="auto_recover", action="store_false",
                   help="stop instead of relaunching on the surviving nodes")
    g.add_argument("--countdown", type=float, default=5.0, metavar="S",
                   help="seconds announced before relaunching on the survivors (default 5)")
    g.add_argument("--rejoin", choices=("ask", "auto"), default="ask",
                   help="when a lost node comes back: ask = say so, auto = re-plan with it")
    add_finding_options(p, 2.0)
    add_wake_option(p)
    p.set_defaults(func=command_runner(cmd_up))


# --- finding nodes ----------------------------------------------------------------------------

def _unavailable(disc: Discovery, unanswered: dict[str, str], failed: dict[str, str]) -> dict[str, str]:
    """Nodes this master knows but cannot launch on now, under each name a split may give them
    (node id and name): ``{name: why}``, ``why`` read after "which" ("is not paired …").

    ``unanswered``: remembered addresses that did not answer (their node's identity is only
    known from the pairing); ``failed``: node id → why its status could not be read.
    """
    out: dict[str, str] = {}
    try:
        paired = disc.tokens.names()
    except ValueError:  # an unreadable token file: Discovery treats every node as unpaired
        paired = {}
    where = f" (remembered addresses that do not answer: {', '.join(unanswered)})" if unanswered else ""
    for nid, name in paired.items():
        if nid not in disc.nodes:
            for key in (nid, name):
                if key:
                    out[key] = f"is paired with this master but does not answer{where}"
    usable = {n.id for n in usable_nodes(disc.nodes.values())}
    for n in disc.nodes.values():
        if n.id in failed:
            why = f"could not report its devices from {n.host}:{n.api_port} ({failed[n.id]})"
        elif n.id in usable:
            continue
        elif not n.reachable:
            why = f"does not answer at {n.host}:{n.api_port}"
        else:
            why = f"is not paired with this master (`herd pair {n.host}:{n.api_port} --pin PIN`)"
        for key in (n.id, n.name):
            if key:
                out[key] = why
    return out


# --- nodes / pair -----------------------------------------------------------------------------

async def cmd_nodes(args: argparse.Namespace) -> int:
    disc = await discover(args)
    try:
        nodes = sorted(disc.nodes.values(), key=lambda n: (n.name, n.id))
    finally:
        await disc.stop()
    if args.json:
        print(json.dumps([n.to_json() for n in nodes], indent=2))
        return 0
    if not nodes:
        print("No nodes found. Start herd-agent on the workers, or add one with --add HOST[:PORT].")
        return 0
    print(f"{'NAME':<16} {'ADDRESS':<22} {'RPC':<8} {'STATE':<9} {'ENGINE':<7} {'PAIRED':<6} {'SEEN':<6} "
          f"{'KEY':<19} ID")
    for n in nodes:
        seen = ("mdns" if n.via_mdns else "manual") if n.reachable else "LOST"
        print(f"{n.name[:16]:<16} {n.host + ':' + str(n.api_port):<22} {n.rpc_port or '-':<8} "
              f"{n.state or '?':<9} {n.engine or '?':<7} {'yes' if n.paired else 'no':<6} {seen:<6} "
              f"{display_fingerprint(n.key, 4) if n.key else '-':<19} {n.id}")
    for n in nodes:
        if n.impostor:
            print(f"warning: {n.name}: {n.impostor}")
        if n.repair:
            print(f"note: {n.name} was paired by an older llama-herd (bearer token): pair it again "
                  f"(`herd-agent pin` there, then `herd pair {n.host}:{n.api_port} --pin PIN`)")
    return 0


async def cmd_pair(args: argparse.Namespace) -> int:
    try:
        host, port = parse_address(args.address)
    except ValueError as exc:
        raise CommandError(str(exc), 2) from None
    address = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    disc = Discovery(browse=False, tokens=TokenStore())
    try:
        try:
            node = await disc.add_address(address)
            await disc.pair(node, args.pin)
        except AgentError as exc:
            raise CommandError(f"pairing with {address} failed: {exc}") from None
    finally:
        await disc.stop()
    KnownAddresses().add(address)
    print(f"paired with {node.name} ({node.id}) at {address}")
    return 0


# --- planning ---------------------------------------------------------------------------------

async def _make_plan(args, disc: Discovery, model, nodes: list[Node], unanswered: dict[str, str] | None = None,
                     draft=None):
    """(plan, fits) for ``model`` on ``nodes`` from ``--split`` or by free memory; ``draft`` is
    the speculation's draft model, whose memory the fit plans on the host (#35).

    A ``--split`` needs only the nodes it gives slots to (#11): a known node that is not
    usable now (``unanswered`` holds the remembered addresses that did not answer) may be named
    with 0 slots, and one named with slots is refused with the reason.
    """
    from gui.cluster.planning import plan as P
    explicit = bool(args.split) and not getattr(args, "fastest", False)
    failed: dict[str, str] = {}
    devices = await devices_of(disc, nodes, failed if explicit else None)
    try:
        if getattr(args, "fastest", False):
            plan = await _fastest(args, disc, model, nodes, devices)
        elif args.split:
            split = P.parse_split(args.split)
            absent = _unavailable(disc, unanswered or {}, failed)
            live = {v for d in devices for v in (d.key, d.node_id, d.node_name, d.endpoint, d.name) if v}
            gone = {k: c for k, c in split.items() if k in absent and k not in live}
            for key, count in gone.items():
                if count:
                    raise CommandError(f"the split gives {count} slots to {key}, which {absent[key]}")
            # Let users name nodes by their mDNS/agent name as well as id or endpoint.
            plan = P.plan_from_split(model, devices, {k: c for k, c in split.items() if k not in gone})
        else:
            plan = P.plan_by_memory(model, devices, _cache_shape(args), host_free_bytes=host_free_bytes())
        for gpu in getattr(args, "experts_in_ram", None) or ():
            plan = P.experts_in_ram(plan, model, gpu)
        fits = P.estimate(plan, model, _cache_shape(args), host_free_bytes=host_free_bytes(), draft=draft)
    except P.PlanError as exc:
        raise CommandError(str(exc), 2) from None
    return plan, fits


def _cache_shape(args):
    """What llama-server's caches hold for ``--ctx`` and ``--people`` (#34: each person has the
    whole context, so the KV cache grows with them); CommandError in words for a bad count."""
    try:
        return ServerOptions(ctx=args.ctx, people=getattr(args, "people", None)).cache_shape()
    except ValueError as exc:
        raise CommandError(f"--people: {exc}", 2) from None


async def _fastest(args, disc: Discovery, model, nodes: list[Node], devices: list):
    """``--fastest``: measure (or take from the cache) every node, then the exact search."""
    from gui.cluster.planning.measure import MeasureError, MeasurementCache, measured_fastest
    if args.split:
        raise CommandError("--fastest and --split choose the split in two ways; give one", 2)
    try:
        best = await measured_fastest(find_engine(), model.path, model, nodes, devices, disc.client,
                                      args.ctx, host_free_bytes=host_free_bytes(), cache=MeasurementCache(),
                                      threads=args.threads, objective=getattr(args, "fastest_for", "chat"))
    except (MeasureError, EngineError) as exc:
        raise CommandError(f"cannot measure the nodes: {exc}") from None
    if not getattr(args, "json", False):
        print(_predicted(best))
    return best.plan


def _predicted(best) -> str:
    """Both predicted figures of a Fastest plan: decode speed and a long prompt's first token."""
    line = f"Fastest: predicted {best.cost.tokens_per_s:.1f} tokens/s decode (for {best.objective})"
    if best.prompt is not None:
        line += (f"; {best.prompt.n_prompt}-token prompt: first token after {best.prompt.total_s:.2f} s "
                 f"({best.prompt.tokens_per_s:.0f} tokens/s)")
    return line


def _worker_commands(plan, nodes: list[Node]) -> list[str]:
    """What runs on each worker, for people who start workers by hand."""
    by_ep = {n.rpc_endpoint: n for n in nodes}
    out = []
    for ep in plan.rpc_endpoints():
        n = by_ep.get(ep)
        host, port = ep.rsplit(":", 1)
        out.append(f"{n.name if n else ep}: ggml-rpc-server -H {host} -p {port}")
    return out


async def _plan_for_model(args: argparse.Namespace) -> tuple:
    """Inspect ``args.model``, choose the speculation (``--draft``), find the nodes and plan
    over them: (model, nodes, plan, fits, speculation)."""
    from gui.cluster.planning import plan as P
    model = read_model(args.model)
    speculation = choose_draft(args, model.path)
    draft = read_model(speculation.draft_path) if speculation.draft_path else None
    unanswered: dict[str, str] = {}
    disc = await discover(args, unanswered=unanswered)
    try:
        nodes = usable_nodes(disc.nodes.values())
        plan, fits = await _make_plan(args, disc, model, nodes, unanswered, draft=draft)
        if getattr(args, "fastest", False) and speculation.active:  # measured with and without (#35)
            speculation = await measured_draft(args, disc, model, nodes, plan, speculation)
            if speculation.draft_path is None and draft is not None:  # (the draft was left out)
                fits = P.estimate(plan, model, _cache_shape(args), host_free_bytes=host_free_bytes())
    finally:
        await disc.stop()
    for a in unanswered:
        print(f"note: the remembered node at {a} does not answer", file=sys.stderr)
    return model, nodes, plan, fits, speculation


async def cmd_plan(args: argparse.Namespace) -> int:
    from gui.cluster.planning import plan as P
    model, nodes, plan, fits, speculation = await _plan_for_model(args)
    eng = find_engine()
    spec = LaunchRequest(plan, model, ServerOptions(ctx=args.ctx, port=args.port, people=args.people),
                         speculation=speculation).spec()
    server_cmd = spec.argv(eng.llama_server or "llama-server")
    bad = P.misfits(fits)
    if args.json:
        print(json.dumps({"model": str(Path(model.path).resolve()), "server": spec.options.to_json(),
                          "plan": plan.to_json(), "fits": [
            {"device": f.label, "slots": list(f.slots), "need_bytes": f.need_bytes,
             "weights_bytes": f.weights_bytes, "kv_bytes": f.kv_bytes, "compute_bytes": f.compute_bytes,
             "free_bytes": f.free_bytes, "fits": f.fits} for f in fits],
            "fits_all": not bad, "server_command": server_cmd, "speculation": speculation.to_json(),
            "worker_commands": _worker_commands(plan, nodes)}, indent=2))
    else:
        print(f"Model: {model.name} ({model.n_layer} blocks + output, {model.file_bytes / MiB:.1f} MiB, "
              f"{model.quantization}); context {args.ctx}")
        print("Plan:")
        for line in plan.describe():
            print("  " + line)
        print("  " + speculation.describe())
        print("Memory:")
        for f in fits:
            print("  " + f.describe())
        print("Commands:")
        for line in _worker_commands(plan, nodes):
            print("  " + line)
        print("  master: " + " ".join(server_cmd))
    if bad:
        print("herd plan: the plan does not fit: " + "; ".join(bad), file=sys.stderr)
        return 1
    return 0


async def cmd_doctor(args: argparse.Namespace) -> int:
    disc = await discover(args)
    try:
        nodes = sorted((n for n in disc.nodes.values()), key=lambda n: (n.name, n.id))
        findings = await doc.check_cluster(nodes, disc.client, find_engine(probe=True))
    finally:
        await disc.stop()
    if args.json:
        print(json.dumps([f.to_json() for f in findings], indent=2))
    else:
        if not nodes:
            print("No nodes found.")
        for f in findings:
            mark = {"error": "ERROR  ", "warning": "warning", "ok": "ok     "}[f.severity]
            print(f"{mark} {f.subject}: {f.message}")
    return 1 if doc.has_errors(findings) else 0


def running_profile_path() -> Path:
    """Where ``herd up`` keeps the profile of the cluster it is serving (removed on stop)."""
    return config_dir() / "running-profile.json"


async def cmd_export(args: argparse.Namespace) -> int:
    from gui.cluster.launching import profile as prof
    if args.model is None:
        # The running cluster, as `herd up` saved it.
        try:
            profile = prof.load_profile(running_profile_path())
        except prof.ProfileError:
            raise CommandError("no cluster is running (start one with `herd up`), or pass --model "
                               "to export a plan") from None
    else:
        model, nodes, plan, _, speculation = await _plan_for_model(args)
        spec = LaunchRequest(plan, model, ServerOptions(ctx=args.ctx, port=args.port, people=args.people)).spec()
        profile = prof.make_profile(plan, model, nodes, engine=find_engine(probe=True),
                                    server=spec.options, sha256=file_sha256(model.path), speculation=speculation)
    try:
        path = prof.save_profile(args.output, profile)
        # The master's script carries what this PC's llama-server needs (e.g. --no-repack).
        master_args = machine_args(find_engine(probe=True).llama_server or "llama-server")
        written = prof.write_start_scripts(args.scripts, profile, master_args) if args.scripts else []
    except OSError as exc:
        raise CommandError(f"cannot write {args.output}: {exc}") from None
    print(f"wrote {path}")
    for w in written:
        print(f"wrote {w}")
    return 0


# --- up ---------------------------------------------------------------------------------------

def _read_profile(args):
    """The profile ``args.target``, read and checked before anything starts: a profile whose
    arguments herd does not pass on (``--rpc``, ``--host``, ``--log-file``…) is refused here,
    the argument named, before any node is contacted (#32). Says what it will run."""
    from gui.cluster.launching import profile as prof
    try:
        profile = prof.load_profile(args.target)
    except prof.ProfileError as exc:
        raise CommandError(str(exc), 2) from None
    extra = shlex.join(profile.server.extra_args) if profile.server.extra_args else "none"
    print(f"Profile {args.target}: model {profile.model.path}, context {profile.server.ctx}, "
          f"port {profile.server.port}; further llama-server options from the profile: {extra}")
    # what it changes from herd's defaults (a flag given to herd up wins over the profile)
    for f in prof.settings_differences(profile, ServerOptions()):
        if f.code != "profile-options":  # (said on the line above)
            print(f"note: {f.subject}: {f.message}", file=sys.stderr)
    return profile


def _server_args(args) -> tuple[str, ...]:
    """``--server-args`` split like a shell would, and checked against the allow-list of tuning
    options before anything starts (#32)."""
    from gui.cluster.llama.server_args import check_extra_args
    try:
        return check_extra_args(shlex.split(args.server_args))
    except ValueError as exc:  # a refused option (named), or unbalanced quotes
        raise CommandError(f"--server-args: {exc}", 2) from None


def _endpoint_line(spec, door: FrontDoor | None = None) -> str:
    """Where the endpoint is reached, and where llama-server really listens when that is more
    than this PC (#32: a shared endpoint is said, never hidden behind a loopback URL). With
    ``--lan`` (#34): every address the front door listens on, and that devices need a key."""
    public = endpoint_urls(door) if door is not None else [spec.url]
    line = (f"Endpoint: {public[0]}/v1  (OpenAI-compatible; model {spec.options.alias!r}; chat at "
            f"{public[0]}/v1/chat/completions)")
    if door is not None:
        line += "".join(f"\n  also at {other}/v1" for other in public[1:])
        return line + "\n  other devices need a key: make one for each with `herd keys add NAME`"
    host = spec.options.host
    if host not in ("127.0.0.1", "localhost", "::1"):
        where = "every address of this computer" if host in ("0.0.0.0", "::", "") else host
        line += (f"\nllama-server listens on {where} (--host {host}): other computers on the network can use it, "
                 "with no key and its admin routes (/slots, /props) too; share it with --lan instead")
    return line


async def _target_from_profile(args, disc: Discovery, eng, profile) -> tuple:
    """(plan, model path, model info, server options) from a profile read by
    :func:`_read_profile`, checked against the live cluster; differences that would break the
    launch stop it."""
    from gui.cluster.launching import profile as prof
    from gui.cluster.llama.model import ModelError, inspect_model
    # The profile says where its nodes were: look there too (mDNS may be blocked).
    wanted = [f"{n.address}:{n.api_port}" for n in profile.nodes.values() if n.api_port]
    await asyncio.gather(*(disc.add_address(a, timeout=3.0) for a in wanted), return_exceptions=True)
    try:
        info = inspect_model(profile.model.path)
    except ModelError:
        info = None
    problems = prof.diff_profile(profile, disc.nodes.values(), eng.build, info)
    for f in problems:
        print(f"{f.severity}: {f.subject}: {f.message}", file=sys.stderr)
    errors = [f for f in problems if f.severity == "error"]
    if errors:
        raise CommandError("the profile does not match this cluster: "
                           + "; ".join(f"{f.subject}: {f.message}" for f in errors))
    return prof.rebind_plan(profile, disc.nodes.values()), Path(profile.model.path), info, profile


def _plan_document(path: Path) -> dict | None:
    """The output of ``herd plan --json`` saved in ``path``, or None when the file is something
    else (a profile, or not JSON: :func:`gui.cluster.launching.profile.load_profile` says what is wrong)."""
    from agent.json_limits import loads as json_loads
    try:
        doc_ = json_loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):  # (JsonTooDeep too: load_profile says so)
        return None
    if isinstance(doc_, dict) and "format" not in doc_ and isinstance(doc_.get("plan"), dict) \
            and "server_command" in doc_:
        return doc_
    return None


async def _target_from_plan_document(args, disc: Discovery, document: dict) -> tuple:
    """(plan, model info, server options) from a saved ``herd plan --json``."""
    from gui.cluster.planning.plan import Plan, PlanError
    model_path = document.get("model")
    if not isinstance(model_path, str):
        raise CommandError(f"{args.target} is the output of an older `herd plan --json` that does not "
                           "name its model; run `herd export --model MODEL -o profile.json` and "
                           "`herd up profile.json`, or `herd up MODEL`", 2)
    try:
        plan = Plan.from_json(document["plan"])
    except (PlanError, KeyError, TypeError, ValueError) as exc:
        raise CommandError(f"{args.target}: the plan in it cannot be read: {exc}", 2) from None
    server = document.get("server") if isinstance(document.get("server"), dict) else {}
    try:
        options = ServerOptions(ctx=int(server.get("ctx", DEFAULT_CTX)), port=int(server.get("port", DEFAULT_PORT)),
                                people=server.get("people"))
    except (TypeError, ValueError) as exc:
        raise CommandError(f"{args.target}: server: {exc}", 2) from None
    # The plan names its workers by endpoint: look there too (mDNS may be blocked). The agents'
    # control ports are not in a plan; the default one is tried.
    from agent.protocol import DEFAULT_API_PORT
    hosts = dict.fromkeys(d.endpoint.rsplit(":", 1)[0] for d in plan.devices() if d.kind == "rpc" and d.endpoint)
    await asyncio.gather(*(disc.add_address(f"{h}:{DEFAULT_API_PORT}", timeout=3.0) for h in hosts
                           if not any(n.host == h.strip("[]") for n in disc.nodes.values())),
                         return_exceptions=True)
    return plan, read_model(Path(model_path)), options


@dataclasses.dataclass(frozen=True)
class _UpInputs:
    """What ``herd up`` reads from outside before anything starts (#32): the target file or
    model, the server arguments, and this computer's engine.

    Attributes:
        target: the model, profile or saved plan named on the command line.
        server_args: llama-server arguments given after ``--``.
        plan_document: a saved ``herd plan --json`` (or None).
        profile: a cluster profile (or None).
        eng: the engine found; llama_server: its ``llama-server``.
        model: the model's information when the target is a model (else None: the file names it).
    """

    target: Path
    server_args: tuple[str, ...]
    plan_document: dict | None
    profile: object
    eng: object
    llama_server: Path
    model: object

    @classmethod
    def read(cls, args: argparse.Namespace) -> "_UpInputs":
        target = Path(args.target)
        from_file = target.suffix.lower() == ".json"
        if from_file and (args.split or args.fastest):
            raise CommandError(f"--{'split' if args.split else 'fastest'} does not go with a profile or a saved "
                               "plan: the file holds the split", 2)
        server_args = _server_args(args)
        plan_document = _plan_document(target) if from_file else None
        profile = _read_profile(args) if from_file and plan_document is None else None
        eng = find_engine(probe=True)
        try:
            llama_server = eng.require_llama_server()
        except EngineError as exc:
            raise CommandError(str(exc)) from None
        return cls(target, server_args, plan_document, profile, eng, llama_server,
                   None if from_file else read_model(target))


async def cmd_up(args: argparse.Namespace) -> int:
    from gui.cluster.launching.request import nodes_for_plan
    # Everything that comes from outside is read and checked before anything starts (#32).
    inputs = _UpInputs.read(args)
    # Only the nodes the plan uses must answer (#11). A plan by free memory is a plan over all
    # of the user's nodes, so there every remembered node must; a split or a profile names its
    # nodes, and a remembered one it leaves out may be off.
    await wake_for_up(args)  # the plan's nodes that sleep first (#36)
    unanswered: dict[str, str] = {}
    disc = await discover(args, strict=not (inputs.plan_document or inputs.profile or args.split or args.fastest),
                          unanswered=unanswered)
    launch = ClusterLaunch()  # the one launch path, as the app's Start (#33)
    door: FrontDoor | None = None
    started = False
    try:
        plan, model, options = await _up_target_and_options(args, disc, inputs, unanswered)
        _refuse_second_owner(options.port)
        options, door = await _front_door(args, options)
        request = LaunchRequest(plan, model, options, threads=args.threads, verify_layers=args.verify_layers,
                                speculation=await _up_speculation(args, disc, model, plan, inputs.profile,
                                                                  inputs.plan_document))
        await _preflight_or_refuse(launch, request, disc, inputs.eng, args)
        used = nodes_for_plan(plan, disc.nodes.values())
        for a in unanswered:
            print(f"warning: the remembered node at {a} does not answer; the plan does not use it",
                  file=sys.stderr)
        print("Plan:")
        for line in plan.describe():
            print("  " + line)
        started = True
        return await _start_and_serve(args, launch, request, used, disc, inputs, door)
    finally:
        if started:
            running_profile_path().unlink(missing_ok=True)
            await launch.stop()
        await _close_door(door)
        await disc.stop()
        if started:
            print("Stopped: llama-server and the workers herd started.", flush=True)


async def _up_speculation(args, disc: Discovery, model, plan, profile, plan_document: dict | None):
    """``herd up``'s speculation (#35): ``--draft``, else what the profile or saved plan keeps;
    with ``--fastest``, measured with and without on the plan first."""
    saved = (profile.speculation if profile is not None else
             saved_speculation(plan_document, args.target) if plan_document is not None else None)
    speculation = choose_draft(args, model.path, saved)
    if args.fastest:
        speculation = await measured_draft(args, disc, model, usable_nodes(disc.nodes.values()), plan, speculation)
    if speculation.active:
        print(speculation.describe()[:1].upper() + speculation.describe()[1:])
    return speculation


async def _up_target_and_options(args, disc: Discovery, inputs: _UpInputs, unanswered: dict[str, str]) -> tuple:
    """(plan, model info, server options) for ``herd up``: the target's, with the command line's
    options over the saved ones."""
    plan, model, saved = await _up_target(args, disc, inputs.eng, inputs.plan_document, inputs.profile,
                                          inputs.model, unanswered)
    try:
        options = ServerOptions(ctx=args.ctx or saved.ctx, host=args.host or saved.host,
                                port=args.port or saved.port, alias=args.alias or saved.alias,
                                extra_args=saved.extra_args + inputs.server_args, people=args.people or saved.people)
    except ValueError as exc:
        raise CommandError(str(exc), 2) from None
    return plan, model, options


async def _start_and_serve(args, launch: ClusterLaunch, request: LaunchRequest, used: list[Node], disc: Discovery,
                           inputs: _UpInputs, door: FrontDoor | None) -> int:
    """Start the cluster under the failover supervisor (it relaunches on the survivors if a
    worker is lost), check its placement, record it, and serve until Ctrl-C."""
    from gui.cluster.launching import profile as prof
    print("Starting " + " ".join(request.argv(inputs.llama_server)), flush=True)
    stop = asyncio.Event()
    check = await _start_or_stop(launch, request, used, disc, inputs.llama_server, args, stop)
    if check is None:
        print("stopped before the model was loaded")
        return 130
    supervisor = launch.supervisor
    for note in supervisor.notes:
        print(f"note: {note}", flush=True)
    print(_endpoint_line(supervisor.spec, door))
    _print_placement(check)
    if not check.ok:
        for p in check.problems:
            print(f"  MISMATCH: {p}", file=sys.stderr)
        raise CommandError("llama-server did not place the layers as planned")
    # What is running now, for `herd export` (and the app) to pick up.
    with contextlib.suppress(OSError, ValueError):
        prof.save_profile(running_profile_path(), prof.make_profile(
            request.plan, request.model, used, engine=inputs.eng,
            server=endpoint_options(supervisor.spec.options, door), speculation=request.speculation))
    # the record names the endpoint clients use: the front door's port when there is one
    endpoint = dataclasses.replace(supervisor.spec, options=endpoint_options(supervisor.spec.options, door))
    with _serving_recorded(endpoint, inputs.target if inputs.profile is not None else None, request.model):
        print("Placement matches the plan. Serving; press Ctrl-C to stop.", flush=True)
        await _serve_until_stopped(args, supervisor, supervisor.spec.url, used, stop)
    return 0


async def _front_door(args, options: ServerOptions) -> tuple[ServerOptions, FrontDoor | None]:
    """With ``--lan`` (#34): the front door, started on the endpoint's port before the model
    loads (its port never refuses a client), and llama-server's options behind it on loopback;
    without it, ``options`` as they are and no door."""
    if not args.lan:
        if args.https:
            raise CommandError("--https needs --lan: only the front door serves HTTPS", 2)
        return options, None
    try:
        upstream, door, certificate = await open_front_door(
            options, args.host, settings=DoorSettings(require_key_on_loopback=args.key_for_local), https=args.https)
    except FrontDoorError as exc:
        raise CommandError(str(exc)) from None
    if certificate is not None:  # what a user checks in the client, and the file a client pins (#34)
        print(f"HTTPS with herd's own certificate, SHA-256 fingerprint {certificate.display_fingerprint}\n"
              f"  clients pin or trust {certificate.cert_path} (not signed by an authority; see docs/security.md)",
              flush=True)
    print_requests()  # one line per request from another device: key name, route, status, tokens, time
    return upstream, door


async def _close_door(door: FrontDoor | None) -> None:
    """Stop the front door, if ``herd up`` opened one."""
    if door is not None:
        await door.stop()


@contextlib.contextmanager
def _serving_recorded(spec, profile: Path | None, model):
    """While serving, say where (a record written atomically, removed after), for the app and
    another herd up to attach to instead of starting a second cluster on the port: one owner of
    the endpoint (#36)."""
    with contextlib.suppress(OSError):
        write_serving(Serving(pid=os.getpid(), host=spec.options.host, port=spec.options.port, url=spec.url,
                              profile=str(profile.absolute()) if profile is not None else "",
                              model=str(model.path)))
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            clear_serving(pid=os.getpid())


def _refuse_second_owner(port: int) -> None:
    """Stop when herd already serves on ``port`` (the login service, or another herd up): one
    owner of the endpoint (#36)."""
    owner = owner_of_port(port)
    if owner is not None:
        raise CommandError(f"herd already serves on port {port} (herd up, pid {owner.pid}"
                           f"{', profile ' + owner.profile if owner.profile else ''}): use {owner.url}/v1, "
                           "or stop it first (`herd service status` says whether the login service runs it)")


async def _start_or_stop(launch: ClusterLaunch, request: LaunchRequest, used: list[Node], disc: Discovery,
                         llama_server, args, stop: asyncio.Event):
    """Start the cluster and wait until the model is loaded (its placement check), or until
    Ctrl-C sets ``stop`` (None: the launch's start undid itself)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    policy = FailoverPolicy(auto_recover=args.auto_recover, countdown=max(0.0, args.countdown),
                            rejoin=args.rejoin, load_timeout=args.load_timeout)
    start = asyncio.create_task(launch.start(
        request, used, disc.client, llama_server, policy=policy, timeout=args.load_timeout,
        host_free_bytes=host_free_bytes, probe_client_for=lambda n: disc.client(n, timeout=policy.poll_timeout),
        on_transfer=TransferPrinter()))  # each worker's weights by the byte (#16)
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({start, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if not start.done():  # Ctrl-C while loading
        start.cancel()
        with contextlib.suppress(asyncio.CancelledError, LaunchError, AgentError):
            await start
        return None
    stopper.cancel()
    try:
        return start.result()
    except (LaunchError, AgentError) as exc:
        raise CommandError(f"launch failed: {exc}") from None


async def _preflight_or_refuse(launch: ClusterLaunch, request, disc: Discovery, eng, args) -> None:
    """The checks of ``request`` before a launch: warnings printed, errors refuse it."""
    reading = await launch.preflight(request, disc.nodes.values(), disc.client, eng,
                                     host_free_bytes=host_free_bytes(), doctor=not args.no_doctor)
    for f in reading.noteworthy:
        print(f"{f.severity}: {f.subject}: {f.message}", file=sys.stderr)
    refusal = reading.refusal()
    if refusal == Refusal.DOES_NOT_FIT:
        raise CommandError("the plan does not fit: " + "; ".join(f.message for f in reading.misfits))
    if refusal is not None:
        raise CommandError("not launching: " + " ".join(f"{f.subject}: {f.message}" for f in reading.blocking))


async def _serve_until_stopped(args, supervisor, url: str, used: list[Node], stop: asyncio.Event) -> None:
    """Serve until Ctrl-C (``stop``), saying what failover does and, with ``--stats``, the speed."""
    gave_up: list[str] = []
    supervisor.subscribe(lambda ev: _print_failover(ev, args, stop, gave_up))
    stats = _StatsPrinter(url, used, args.stats) if args.stats > 0 else None
    if stats:
        stats.start()
    try:
        await stop.wait()
    finally:
        if stats:
            await stats.stop()
    if gave_up:
        raise CommandError(gave_up[0])
    print("Stopping…", flush=True)


async def _up_target(args, disc: Discovery, eng, plan_document: dict | None, profile, model,
                     unanswered: dict[str, str]) -> tuple:
    """(plan, model info, saved server options) for ``herd up``: from a saved plan, a profile
    (already read by :func:`_read_profile`), or a model split by ``--split``/``--fastest``/memory."""
    if plan_document is not None:
        return await _target_from_plan_document(args, disc, plan_document)
    if profile is not None:
        plan, _, model, profile = await _target_from_profile(args, disc, eng, profile)
        if model is None:
            raise CommandError(f"the profile's model {profile.model.path} cannot be read")
        return plan, model, profile.server
    saved = ServerOptions()
    for n in disc.nodes.values():
        if n.reachable and not n.paired:
            print(f"note: {n.name} ({n.host}) is not paired; `herd pair {n.host}:{n.api_port} "
                  "--pin PIN` to use it", file=sys.stderr)
    args.ctx = args.ctx or saved.ctx
    plan, _ = await _make_plan(args, disc, model, usable_nodes(disc.nodes.values()), unanswered)
    return plan, model, saved


def _print_placement(check) -> None:
    """Where llama-server says it put the layers, and how that was checked against the plan."""
    print("Placement reported by llama-server:")
    for where, slots in check.actual.items():
        print(f"  {where:<24} slots {slot_span(slots)}")
    print("Checked " + ("layer by layer (llama-server's per-layer lines):" if check.per_layer
                        else "from the weights llama-server reports per device:"))
    for line in check.report:
        print("  " + line)


def _print_failover(ev, args: argparse.Namespace, stop: asyncio.Event, gave_up: list[str]) -> None:
    """Say what the failover supervisor did; with ``--no-auto-recover`` a loss ends ``herd up``."""
    from gui.cluster.failover import events as E
    print(f"failover: {describe_event(ev)}", flush=True)
    if ev.kind in (E.EventKind.REPLANNED, E.EventKind.NO_FIT):
        for line in ev.lines:
            print("  " + line, flush=True)
    if ev.kind == E.EventKind.RETURNED and E.OPT_REJOIN in ev.options:
        print("  (herd up --rejoin auto re-plans with returning nodes by itself)", flush=True)
    if ev.kind == E.EventKind.NO_FIT:
        print("  waiting for the node; Ctrl-C stops, or run herd up again with --split host=N,… "
              "to put more layers on this computer", flush=True)
    if not args.auto_recover and ev.kind in (E.EventKind.LOST, E.EventKind.SERVER_EXITED):
        gave_up.append(f"{describe_event(ev)}; stopping (auto-recover is off)")
        stop.set()


class _StatsPrinter:
    """Prints one line per interval in which a reply finished: decode/prompt tokens/s from
    llama-server's counters and each node's echo round trip."""

    def __init__(self, url: str, nodes: list[Node], interval: float) -> None:
        import httpx

        from gui.cluster.nodes import telemetry as T
        self._http = httpx.AsyncClient()
        self.tele = T.Telemetry()
        self.tele.add(T.MetricsSampler(self._http, url, interval=interval))
        for n in nodes:
            if n.echo_port:
                self.tele.add(T.LinkSampler(
                    n.name, lambda k, h=n.host, p=n.echo_port: measure_echo_rtt(h, p, k, 0.5),
                    interval=interval, probes=5))
        self.links: dict[str, dict] = {}
        self.tele.subscribe(self._on_sample)

    def _on_sample(self, s) -> None:
        if s.kind == "link" and "rtt_median_ms" in s.values:
            self.links[s.source] = s.values
        elif s.kind == "metrics" and s.values.get("decode_tps"):
            parts = [f"decode {s.values['decode_tps']:.1f} tok/s"]
            if s.values.get("prompt_tps"):
                parts.append(f"prompt {s.values['prompt_tps']:.1f} tok/s")
            for name, v in sorted(self.links.items()):
                parts.append(f"{name} rtt {v['rtt_median_ms']:.2f} ms (p95 {v['rtt_p95_ms']:.2f})")
            print("stats: " + " · ".join(parts), flush=True)

    def start(self) -> None:
        self.tele.start()

    async def stop(self) -> None:
        await self.tele.stop()
        await self._http.aclose()
