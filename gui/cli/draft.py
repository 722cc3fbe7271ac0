"""``--draft`` for ``herd plan``, ``herd up`` and ``herd export``: speculation as part of the plan (#35).

``--draft auto`` looks for a draft among the models on this PC (the folders
:func:`gui.cluster.models.local.find_local_models` knows, and the target's own folder);
``--draft FILE`` takes that file; ``ngram`` and ``mtp`` need no file; ``none`` turns it off.
What cannot be done is one sentence that says why (exit status 2), before anything starts.
With ``--fastest`` the speculation is tried on the planned cluster, with and without, and kept
only when it is measured faster (:func:`measured_draft`).
"""

from __future__ import annotations

import argparse
import contextlib
import socket
from pathlib import Path

from agent.client import AgentError
from agent.engine_lookup import find_engine
from gui.cli.common import CommandError
from gui.cluster.launching.launcher import ClusterLauncher
from gui.cluster.launching.request import LaunchRequest, nodes_for_plan
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.llama.server_process import LaunchError
from gui.cluster.models.local import find_local_models, scan_folder
from gui.cluster.planning.measure import MeasurementCache, model_fingerprint
from gui.cluster.planning.speculation import CHOICES, Speculation, SpeculationError, choose_speculation
from gui.cluster.planning.speculation_trial import TrialError, measure_speculation


def add_draft_option(p: argparse.ArgumentParser) -> None:
    """Add ``--draft`` to a command's parser."""
    p.add_argument("--draft", metavar="MODEL|" + "|".join(CHOICES), default=None,
                   help="speculative decoding: a draft model with the target's vocabulary (a file, or auto: "
                        "the smallest such model on this PC), ngram (look-ups in the text so far), mtp (the "
                        "model's own multi-token-prediction heads) or none (the default; a profile keeps its own)")


def local_model_paths(target: Path) -> list[Path]:
    """The model files on this PC a draft may be: the known folders and the target's own."""
    found = [m.path for m in find_local_models()]
    found += [m.path for m in scan_folder(target.parent, "folder", max_depth=1)]
    return list(dict.fromkeys(found))


def choose_draft(args: argparse.Namespace, model_path: str | Path,
                 saved: Speculation | None = None) -> Speculation:
    """The speculation ``--draft`` asks for with the model at ``model_path``; without
    ``--draft``, ``saved`` (a profile's or a saved plan's) or none."""
    choice = getattr(args, "draft", None)
    if choice is None:
        return saved or Speculation()
    model_path = Path(model_path)
    try:
        models = local_model_paths(model_path) if choice == "auto" else ()
        return choose_speculation(choice, model_path, models)
    except SpeculationError as exc:
        raise CommandError(f"--draft {choice}: {exc}", 2) from None


def saved_speculation(document: dict, source: str) -> Speculation:
    """The ``speculation`` section of a saved ``herd plan --json`` (none when it has none)."""
    try:
        return Speculation.from_json(document.get("speculation", {}), "speculation")
    except SpeculationError as exc:
        raise CommandError(f"{source}: {exc}", 2) from None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _link_rtts_ms(plan, model_path: Path) -> list[float]:
    """The round trip of each RPC device that holds layers, as *Fastest* just measured its link."""
    cache, fingerprint = MeasurementCache(), model_fingerprint(model_path)
    out = []
    for device, count in plan.assignments:
        m = cache.get(device.node_id, fingerprint) if count and device.kind == "rpc" else None
        if m is not None and m.link is not None:
            out.append(m.link.rtt_min_s * 1000.0)
    return out


async def measured_draft(args: argparse.Namespace, disc, model, nodes, plan, speculation: Speculation) -> Speculation:
    """``--fastest`` with a speculation (#35): start ``plan`` without it and with it, measure both,
    predict the gain from what was measured first, and keep the speculation only when it is
    measured faster. Says the outcome; a trial that fails keeps none, with the reason."""
    if not speculation.active:
        return speculation
    eng = find_engine(probe=True)
    used = {n.id: n for n in nodes_for_plan(plan, nodes)}

    @contextlib.asynccontextmanager
    async def serve(tried: Speculation):
        options = ServerOptions(ctx=args.ctx or 4096, port=_free_port(), extra_args=("-np", "1"))
        request = LaunchRequest(plan, model, options, threads=args.threads, speculation=tried)
        launcher = ClusterLauncher(eng.require_llama_server(), request, used, disc.client)
        try:
            await launcher.start(getattr(args, "load_timeout", 600.0))
            yield launcher.spec.url
        finally:
            await launcher.stop()

    draft = Path(speculation.draft_path) if speculation.draft_path else None
    share = draft.stat().st_size / max(1, model.file_bytes) if draft else 0.0
    if not getattr(args, "json", False):  # (the JSON on stdout stays JSON)
        print(f"Fastest: trying speculation by {speculation.label()} against none on the planned cluster…",
              flush=True)
    try:
        slots = model.active_slot_bytes
        trial = await measure_speculation(serve, speculation, rtts_ms=_link_rtts_ms(plan, Path(model.path)),
                                          draft_share=share, output_share=slots[-1] / max(1, sum(slots)))
    except (TrialError, LaunchError, AgentError, OSError) as exc:
        return Speculation(reason=f"the trial of speculation by {speculation.label()} failed: {exc}")
    return trial.decision()
