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
import sys
from pathlib import Path

from agent.engine_lookup import find_engine
from gui.cli.common import CommandError
from gui.cluster.launching.speculation_trial_run import measure_on_cluster, trying_text
from gui.cluster.models.local import find_local_models, scan_folder
from gui.cluster.planning.speculation import CHOICES, Speculation, SpeculationError, choose_speculation


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


async def measured_draft(args: argparse.Namespace, disc, model, nodes, plan, speculation: Speculation) -> Speculation:
    """``--fastest`` with a speculation (#35): the trial on the planned cluster
    (:func:`~gui.cluster.launching.speculation_trial_run.measure_on_cluster`, which the window's
    *Fastest* runs too); the speculation is kept only when it is measured faster."""
    if not speculation.active:
        return speculation
    eng = find_engine(probe=True)
    if not getattr(args, "json", False):  # (the JSON on stdout stays JSON)
        print(trying_text(speculation), flush=True)
    return await measure_on_cluster(eng.require_llama_server(), plan, model, nodes, disc.client, speculation,
                                    ctx=args.ctx or 4096, threads=args.threads,
                                    load_timeout=getattr(args, "load_timeout", 600.0),
                                    progress=lambda words: print(words, file=sys.stderr, flush=True))
