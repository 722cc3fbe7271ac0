"""Headless model commands: ``herd model search``, ``herd model files``, ``herd model get`` (#14).

``search`` finds GGUF repositories on the hub by name. ``files`` lists a repository's GGUF
models (split files grouped into one) with their size and quant type and, against the nodes
found the same way ``herd plan`` finds them, whether each fits at ``--ctx``, the split that
would be used and the predicted decode speed (from the nodes' cached measurements, see
``herd bench``; "not measured yet" without them); the largest that fits is marked. ``get``
downloads one — by name, by quant type or the suggested one (``--best-fit``) — resuming an
interrupted download, checking its SHA-256, and prints the finished file's path on its last
line (so ``herd up "$(herd model get … | tail -n 1)"`` works).

The hub is huggingface.co, or ``--endpoint`` / ``$HF_ENDPOINT`` (a mirror).
Exit status: 0 success, 1 failure (hub, download, nothing fits), 2 bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from gui.cli.common import CommandError, add_finding_options, command_runner, devices_of, discover
from gui.cluster.llama.server_command import DEFAULT_CTX
from gui.cluster.nodes.records import usable_nodes
from gui.cluster.planning.devices import host_free_bytes

MB = 1e6


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``herd model …`` to ``herd``'s parser."""
    p = sub.add_parser("model", help="find a model on the hub that fits the cluster, and download it")
    msub = p.add_subparsers(dest="model_command", metavar="COMMAND", required=True)

    def hub_options(q: argparse.ArgumentParser) -> None:
        q.add_argument("--endpoint", metavar="URL",
                       help="the hub's address, e.g. a mirror (default: $HF_ENDPOINT or huggingface.co)")

    def fit_options(q: argparse.ArgumentParser) -> None:
        q.add_argument("--ctx", type=int, default=DEFAULT_CTX, help=f"context size to fit (default {DEFAULT_CTX})")
        q.add_argument("--revision", help="branch, tag or commit (default: main)")
        add_finding_options(q, 2.0)

    q = msub.add_parser("search", help="find GGUF repositories by name")
    q.add_argument("query", help="part of the name, e.g. qwen2.5 7b")
    q.add_argument("--limit", type=int, default=20)
    q.add_argument("--json", action="store_true", help="print JSON")
    hub_options(q)
    q.set_defaults(func=command_runner(cmd_search), command="model search")

    q = msub.add_parser("files", help="a repository's GGUF files: size, quant, fit, split, speed")
    q.add_argument("repo", help="the repository, OWNER/NAME")
    q.add_argument("--json", action="store_true", help="print JSON")
    hub_options(q)
    fit_options(q)
    q.set_defaults(func=command_runner(cmd_files), command="model files")

    q = msub.add_parser("get", help="download a GGUF model (resumable, verified); prints its path last")
    q.add_argument("repo", help="the repository, OWNER/NAME")
    which = q.add_mutually_exclusive_group(required=True)
    which.add_argument("--file", metavar="NAME", help="the file (a split model: its first file)")
    which.add_argument("--quant", metavar="Q", help="the file of this quant type, e.g. Q4_K_M")
    which.add_argument("--best-fit", action="store_true",
                       help="the largest file that fits the nodes and this PC at --ctx")
    q.add_argument("--models-dir", type=Path, metavar="DIR",
                   help="where models are kept (default: herd's data folder, models/)")
    hub_options(q)
    fit_options(q)
    q.set_defaults(func=cmd_get, command="model get")


def _hub(args):
    from gui.cluster.models.hub import Hub
    return Hub(args.endpoint)


async def _in_thread(fn, *a, **k):
    from gui.cluster.models.hub import HubError
    try:
        return await asyncio.to_thread(fn, *a, **k)
    except HubError as exc:
        raise CommandError(str(exc)) from None


async def cmd_search(args: argparse.Namespace) -> int:
    hits = await _in_thread(_hub(args).search, args.query, args.limit)
    if args.json:
        print(json.dumps([{"repo": h.repo, "downloads": h.downloads, "likes": h.likes} for h in hits], indent=2))
        return 0
    if not hits:
        print(f"No GGUF repositories match {args.query!r}.")
    for h in hits:
        print(f"{h.repo}  ({h.downloads or 0} downloads)")
    return 0


async def _fits(args, hub, files):
    """Every model of ``files`` assessed against the nodes found now (and this PC)."""
    from gui.cluster.models import hub as H
    if args.ctx < 1:
        raise CommandError(f"--ctx must be a positive number of tokens, got {args.ctx}", 2)
    disc = await discover(args)
    try:
        nodes = usable_nodes(disc.nodes.values())
        devices = await devices_of(disc, nodes)
    finally:
        await disc.stop()
    measured = H.cluster_measurements(devices)
    fits = await _in_thread(H.assess_repo, hub, files, devices, args.ctx, host_free_bytes=host_free_bytes(),
                            measured=measured)
    return nodes, fits, H.suggest(fits)


def _speed(f) -> str:
    if not f.fits:
        return "-"
    return f"~{f.tokens_per_s:.1f} tok/s" if f.tokens_per_s is not None else "not measured yet"


def _row(f, suggested: bool) -> str:
    m = f.model
    fit = "fits" if f.fits else "does not fit"
    parts = f" ({len(m.parts)} files)" if m.is_split else ""
    line = (f"{'*' if suggested else ' '} {m.name}{parts}  {m.quant or '?'}  {m.size / MB:,.1f} MB  {fit}  "
            f"{f.split_text() or '-'}  {_speed(f)}")
    if f.problem:
        line += f"\n      {f.problem}"
    return line


def _fit_json(f, suggested: bool) -> dict:
    return {"name": f.model.name, "files": [p.path for p in f.model.parts], "quant": f.model.quant,
            "size": f.model.size, "sha256": [p.sha256 for p in f.model.parts], "fits": f.fits,
            "split": f.split_text(), "tokens_per_s": f.tokens_per_s, "problem": f.problem,
            "suggested": suggested,
            "n_layer": f.info.n_layer if f.info else None,
            "context_length": f.info.context_length if f.info else None,
            "architecture": f.info.architecture if f.info else None}


async def cmd_files(args: argparse.Namespace) -> int:
    hub = _hub(args)
    files = await _in_thread(hub.files, args.repo, args.revision)
    if not files.models:
        raise CommandError(f"{args.repo} has no GGUF files")
    nodes, fits, best = await _fits(args, hub, files)
    if args.json:
        print(json.dumps({"repo": files.repo, "commit": files.commit, "ctx": args.ctx,
                          "nodes": [n.name for n in nodes],
                          "files": [_fit_json(f, i == best) for i, f in enumerate(fits)]}, indent=2))
        return 0
    where = ", ".join(n.name for n in nodes) or "no paired nodes"
    print(f"{files.repo} at {files.commit[:12]}; context {args.ctx}; nodes: {where} (+ this PC)")
    for i, f in enumerate(fits):
        print(_row(f, i == best))
    print("* suggested: the largest that fits" if best is not None else "Nothing fits at this context.")
    return 0


async def _choose(args: argparse.Namespace):
    """The repository's files and the model ``get`` is asked for."""
    from gui.cluster.models import hub as H
    hub = _hub(args)
    files = await _in_thread(hub.files, args.repo, args.revision)
    try:
        if args.file:
            return hub, files, files.find(args.file)
        if args.quant:
            return hub, files, files.by_quant(args.quant)
    except H.HubError as exc:
        raise CommandError(str(exc), 2) from None
    _, fits, best = await _fits(args, hub, files)
    for i, f in enumerate(fits):
        print(_row(f, i == best), file=sys.stderr)
    if best is None:
        raise CommandError(f"no GGUF file of {args.repo} fits the nodes and this PC at "
                           f"context {args.ctx}; try a smaller --ctx or add a node")
    f = fits[best]
    print(f"best fit: {f.model.name} ({f.model.quant or '?'}, {f.model.size / MB:,.1f} MB, "
          f"split {f.split_text() or '-'}, {_speed(f)})", file=sys.stderr)
    return hub, files, f.model


def cmd_get(args: argparse.Namespace) -> int:
    """Choose (on an event loop: node discovery), then download in this thread, so that Ctrl-C
    stops the download at once and keeps the partial file for the next run."""
    from gui.cli.progress import TerminalProgress
    from gui.cluster.models import hub as H

    try:
        hub, files, model = asyncio.run(_choose(args))
    except CommandError as exc:
        print(f"herd model get: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    bar = TerminalProgress()

    def progress(p: H.DownloadProgress) -> None:
        fraction = p.done_bytes / p.total_bytes if p.total_bytes else None
        if p.phase == "verify":
            bar(f"Verifying {p.file} (SHA-256)", fraction)
            return
        eta = f", {p.eta_s:.0f} s left" if p.eta_s is not None else ""
        bar(f"Downloading {p.file}: {p.done_bytes / MB:,.1f} of {p.total_bytes / MB:,.1f} MB, "
            f"{p.rate_bps / MB:,.1f} MB/s{eta}", fraction)

    try:
        path = hub.download(files.repo, files.commit, model, args.models_dir or H.models_dir(),
                            progress=progress)
    except H.HubError as exc:
        bar.done()
        print(f"herd model get: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        bar.done()
        print("herd model get: stopped; run the same command again to resume the download",
              file=sys.stderr)
        return 130
    bar.done()
    print(path)
    return 0
