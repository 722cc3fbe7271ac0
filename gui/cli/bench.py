"""``herd bench``: measure how fast each node computes a layer of a model, and its link.

The numbers are the ones the Fastest plan is made from (``gui.cluster.planning.measure``): per node the
compute time of one layer of *this* model (a short real decode with every layer on the node),
the link's round trip and throughput, and free memory. They are cached per node and model, so a
second run (and a second plan) is instant; ``--refresh`` measures again.

Exit status: 0 success, 1 a measurement failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from agent.engine_lookup import EngineError, find_engine
from gui.cluster.planning.devices import host_free_bytes

MiB = 1 << 20
#: The model measured when none is given: a demo model big enough that compute shows.
DEFAULT_DEMO_BYTES = 64 * MiB


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``herd bench`` to ``herd``'s parser."""
    p = sub.add_parser("bench", help="measure per-layer speed, links and memory of the nodes")
    p.add_argument("--model", type=Path,
                   help="the GGUF model to measure with (default: a 64 MB demo model)")
    p.add_argument("--rpc", action="append", default=[], metavar="[NAME=]HOST:PORT",
                   help="an RPC worker to measure (running, not held by a llama-server); repeatable")
    p.add_argument("--no-host", action="store_true", help="do not measure the master's own CPU")
    p.add_argument("--host-threads", type=int, help="llama-server threads on the master (-t)")
    p.add_argument("--tokens", type=int, default=24, help="tokens per timed completion (default 24)")
    p.add_argument("--runs", type=int, default=3, help="timed completions per node (default 3; the best counts)")
    p.add_argument("--refresh", action="store_true", help="measure again even when cached")
    p.add_argument("--cache-dir", type=Path, help="where measurements are cached")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_bench)


def _parse_target(text: str) -> tuple[str, str]:
    """``"name=host:port"`` or ``"host:port"`` → ``(node_id, endpoint)``."""
    name, eq, ep = text.rpartition("=")
    if not eq:
        name, ep = text, text
    host, sep, port = ep.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or not name:
        raise ValueError(f"--rpc {text!r}: expected [NAME=]HOST:PORT")
    return name, ep


def _default_model() -> Path:
    from platformdirs import user_cache_dir

    from gui.cluster.llama.random_model import shape_for_size, write_demo_model

    shape = shape_for_size(DEFAULT_DEMO_BYTES, layers=8)
    path = Path(user_cache_dir("llama-herd")) / "bench" / f"demo-{shape.layers}L-{shape.embd}E.gguf"
    if not path.exists():
        write_demo_model(path, shape)
    return path


def cmd_bench(args: argparse.Namespace) -> int:
    try:
        targets = [_parse_target(t) for t in args.rpc]
    except ValueError as exc:
        print(f"herd bench: {exc}", file=sys.stderr)
        return 2
    if args.no_host and not targets:
        print("herd bench: nothing to measure (--no-host and no --rpc)", file=sys.stderr)
        return 2
    if args.tokens < 2 or args.runs < 1:
        print("herd bench: --tokens must be at least 2 and --runs at least 1", file=sys.stderr)
        return 2
    from gui.cluster.llama.model import ModelError, inspect_model

    model = args.model or _default_model()
    try:
        info = inspect_model(model)
    except ModelError as exc:
        print(f"herd bench: {exc}", file=sys.stderr)
        return 2
    try:
        engine = find_engine(probe=False)
        engine.require_llama_server()
    except EngineError as exc:
        print(f"herd bench: {exc}", file=sys.stderr)
        return 1
    return asyncio.run(_bench(args, engine, model, info, targets))


async def _bench(args, engine, model: Path, info, targets: list[tuple[str, str]]) -> int:
    from gui.cluster.planning import measure as M
    cache = M.MeasurementCache(args.cache_dir)
    fp = M.model_fingerprint(model)
    rows = []
    todo: list[tuple[str, str | None, dict]] = [(n, ep, {"endpoint": ep}) for n, ep in targets]
    if not args.no_host:
        todo.insert(0, ("master", None, {"threads": args.host_threads}))
    failed = False
    for node_id, ep, settings in todo:
        cached = None if args.refresh else cache.get(node_id, fp, settings)
        try:
            m = cached or await M.measure_node(engine, model, node_id, ep, cache=cache, settings=settings,
                                               refresh=True, tokens=args.tokens, runs=args.runs,
                                               host_threads=args.host_threads)
        except M.MeasureError as exc:
            print(f"herd bench: {node_id}: {exc}", file=sys.stderr)
            failed = True
            continue
        free = m.link.devices[0][0] if m.link and m.link.devices else (
            host_free_bytes() if ep is None else None)
        rows.append((m, cached is not None, free))
    if args.json:
        print(json.dumps({"model": {"path": str(model), "name": info.name, "n_layer": info.n_layer,
                                    "fingerprint": fp},
                          "nodes": [{**m.to_json(), "cached": hit, "free_bytes": free}
                                    for m, hit, free in rows]}, indent=2))
    else:
        print(f"Model: {info.name} ({info.n_layer} blocks + output, {info.file_bytes / MiB:.1f} MiB)")
        print(f"{'NODE':<16} {'ENDPOINT':<22} {'MS/LAYER':>8} {'STEP MS':>8} {'RTT MS':>7} "
              f"{'MBIT/S':>7} {'FREE MiB':>9}  CACHED")
        for m, hit, free in rows:
            link = m.link
            rtt = f"{link.rtt_s * 1e3:.2f}" if link else "-"
            tput = f"{link.throughput_bps * 8 / 1e6:.0f}" if link and link.throughput_bps else "-"
            print(f"{m.node_id[:16]:<16} {(link.endpoint if link else 'host CPU')[:22]:<22} "
                  f"{m.compute.seconds_per_layer * 1e3:8.2f} {m.compute.step_s * 1e3:8.1f} {rtt:>7} "
                  f"{tput:>7} {'?' if free is None else f'{free / MiB:.0f}':>9}  {'yes' if hit else 'no'}")
    return 1 if failed else 0
