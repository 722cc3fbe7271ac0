"""Load on herd-agent's API and on a cluster's chat endpoint.

    python bench/agent_load.py [--rate 200] [--seconds 30] [--streams 8] [--tokens 64] [--smoke]

1. A real ``herd-agent`` process on loopback is paired, then this process (a second process)
   sends ``--rate`` requests/s for ``--seconds`` — open loop, cycling ping, status, info and the
   worker log, as a master's app does. Printed: requests, errors, achieved rate, p50/p90/p99/max
   latency measured from each request's scheduled start (target: no errors, p99 ≤ 100 ms).
2. Two real agents and a real llama-server (``-np N``) over them serve ``--streams`` chat
   streams at once with a small demo model; printed: how many completed, tokens each, wall time.

Everything runs on loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from cluster.agents import start_agent  # noqa: E402
from conftest import ProcessJar  # noqa: E402
from resilience.load import MIX, chat_streams, load_agent, loopback_cluster  # noqa: E402

from agent.client import AgentClient  # noqa: E402
from agent.engine_lookup import find_engine  # noqa: E402
from bench.smoke import parse_args  # noqa: E402
from gui.cluster.llama.random_model import DemoShape, write_demo_model  # noqa: E402


class Procs(ProcessJar):
    """Processes started here, all with the same environment; stopped and reaped at the end."""

    def __init__(self, env: dict) -> None:
        super().__init__()
        self.env = env

    def popen(self, argv, **kw):
        return super().popen(argv, env=self.env, **kw)


async def api_load(tmp: Path, procs: Procs, rate: float, seconds: float) -> None:
    agent = start_agent(procs.popen, tmp, "loaded", mdns=False)
    from agent.identity import client_context, load_or_create
    me = load_or_create(tmp, "master", "load master")
    async with AgentClient(agent.api_url, identity=me) as c:
        await c.pair(agent.pin())
        keys = client_context(me, c.pinned)  # what every call of the load presents
    r = await load_agent(agent.api_url, keys, rate, seconds)
    ms = lambda q: r.percentile(q) * 1000  # noqa: E731
    print(f"\nAgent API load: {rate:g} req/s for {seconds:g} s, mix {', '.join(p for _, p, _ in MIX)}\n")
    print(f"{'requests':>9} {'errors':>7} {'rate/s':>7} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} {'max ms':>7}")
    print(f"{r.sent:>9} {r.error_count:>7} {r.sent / r.elapsed:>7.1f} {ms(0.5):>7.2f} {ms(0.9):>7.2f} "
          f"{ms(0.99):>7.2f} {max(r.latencies) * 1000:>7.2f}")
    for what, n in sorted(r.errors.items()):
        print(f"  error: {what} ×{n}")
    ok = r.error_count == 0 and ms(0.99) <= 100
    print(f"target: no errors, p99 ≤ 100 ms — {'met' if ok else 'MISSED'}; agent "
          f"{'still running' if agent.proc.poll() is None else 'DIED'}")


async def streams(tmp: Path, procs: Procs, n: int, tokens: int) -> None:
    eng = find_engine(probe=True)
    model = write_demo_model(tmp / "demo-8L.gguf", DemoShape(layers=8))
    async with loopback_cluster(eng.require_llama_server(), model, procs.popen, tmp,
                                parallel=n, ctx=n * (tokens + 64)) as launcher:
        t0 = time.perf_counter()
        done = await chat_streams(launcher.spec.url, n, tokens)
        wall = time.perf_counter() - t0
    complete = sum(d.finish_reason == "length" and d.timings.get("predicted_n") == tokens for d in done)
    total = sum(int(d.timings.get("predicted_n") or 0) for d in done)
    print(f"\nConcurrent chat streams through a loopback cluster (2 workers, demo model, -np {n})\n")
    print(f"{'streams':>8} {'complete':>9} {'tokens each':>12} {'wall s':>7} {'tok/s total':>12}")
    print(f"{n:>8} {complete:>9} {tokens:>12} {wall:>7.2f} {total / wall:>12.1f}")
    print(f"target: all {n} complete — {'met' if complete == n else 'MISSED'}")


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=200)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    args = parse_args(ap, {"rate": 20, "seconds": 1, "streams": 2, "tokens": 8})
    with tempfile.TemporaryDirectory(prefix="herd-load-") as d:
        tmp = Path(d)
        procs = Procs(dict(os.environ, LLAMA_CACHE=str(tmp / "cache")))
        try:
            await api_load(tmp, procs, args.rate, args.seconds)
            if args.streams:
                await streams(tmp, procs, args.streams, args.tokens)
        finally:
            procs.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
