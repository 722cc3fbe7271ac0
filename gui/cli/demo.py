"""``herd demo``: a whole cluster on this one PC, to see the loop in minutes.

Starts two ``herd-agent`` processes on loopback (their own ports and temporary state folders,
mDNS announced on 127.0.0.1 only), fetches the demo's real model if it is not there yet
(:mod:`gui.cluster.models.demo_weights`; offline, a model of random weights), installs the engine if it
is missing (both with progress), then opens the app with the two nodes added, paired and a split
ready to launch. Closing the app stops the agents and removes their state.

:class:`~gui.cluster.demo_cluster.DemoCluster` (the agents and the demo model) lives in the
Qt-free core, where the app's "Try a local demo" button uses it as well.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from agent.engine_lookup import EngineError
from gui.cluster.demo_cluster import DemoCluster, ensure_demo_model, ensure_engine

__all__ = ["DemoCluster", "cmd_demo", "ensure_demo_model", "ensure_engine", "register"]

def register(sub: argparse._SubParsersAction) -> None:
    """Add ``herd demo`` to the parser."""
    p = sub.add_parser("demo", help="open the app with a two-node cluster on this PC (loopback)")
    p.add_argument("--model", type=Path, help="use this GGUF instead of the demo model")
    p.add_argument("--nodes", type=int, default=2, help="how many local agents (default 2)")
    p.add_argument("--no-app", action="store_true",
                   help="start the agents and print their addresses and PINs; Ctrl-C stops them")
    p.add_argument("--download-only", action="store_true",
                   help="fetch the engine and the demo's model (SmolLM2-135M-Instruct, 98 MB) and stop")
    # also after the command (`herd demo --lang zh_CN`), as people type it; absent, it leaves
    # `herd --lang zh_CN demo` as it was
    p.add_argument("--lang", choices=["en", "zh_CN"], default=argparse.SUPPRESS,
                   help="force the app's language")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    """Run ``herd demo``."""
    from gui.cli.progress import TerminalProgress

    bar = TerminalProgress()
    try:
        eng = ensure_engine(bar)
        bar.done()
    except EngineError as exc:
        bar.done()
        print(f"herd demo: {exc}", file=sys.stderr)
        return 1
    print(f"engine: llama.cpp build {eng.build} in {eng.folder}")
    if args.download_only:
        from gui.cluster.models.demo_weights import install_demo_weights

        try:
            path = install_demo_weights(progress=bar)
        except EngineError as exc:
            bar.done()
            print(f"herd demo: {exc}", file=sys.stderr)
            return 1
        bar.done()
        print(f"model: {path}")
        return 0
    model = args.model or ensure_demo_model(progress=bar)
    bar.done()
    print(f"model: {model}")
    if not args.no_app:
        from gui.single_instance import ask_running

        if ask_running():  # before starting agents that the open app would not use
            print("herd is already open; its window is brought to the front. Use its "
                  "Try a local demo, or close it first.", file=sys.stderr)
            return 0
    cluster = DemoCluster(args.nodes)
    try:
        cluster.start()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"herd demo: {exc}", file=sys.stderr)
        return 1
    try:
        for a in cluster.agents:
            print(f"agent {a.name}: https://{a.address}  PIN {a.pin}")
        if args.no_app:
            print("Press Ctrl-C to stop the demo agents.")
            try:
                while all(a.proc.poll() is None for a in cluster.agents):
                    time.sleep(0.5)
            except KeyboardInterrupt:
                pass
            return 0
        from gui.app import run_app

        return run_app(args, demo=cluster, model=model)
    finally:
        cluster.stop()
