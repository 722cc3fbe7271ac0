"""Benchmark of the master's core on loopback: how fast discovery reacts, what the link sampler
reads, and how closely counter-derived decode speed follows each reply's own timings.

    python bench/master_core.py [--runs 5] [--tokens 256] [--smoke]

1. Discovery (real herd-agent processes, real zeroconf on 127.0.0.1), ``--runs`` times each:
   agent start → node listed (mDNS browse), clean exit → node removed (goodbye), SIGKILL →
   node marked unreachable (ping; goal ≤ 10 s).
2. Link: the echo round trip to an agent as :class:`gui.cluster.nodes.telemetry.LinkSampler` reports
   it (median and p95 of 10 probes per interval).
3. Telemetry: a real llama-server split over two real RPC workers; for ``--runs`` replies of
   ``--tokens`` tokens, the decode rate from the /metrics counters' delta over the reply versus
   the reply's ``timings.predicted_per_second`` (goal: within 3 %).

Prints one table. Everything runs on loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from cluster.agents import start_agent  # noqa: E402
from cluster.rpc_workers import start_rpc_workers  # noqa: E402
from conftest import ProcessJar, free_port  # noqa: E402

from agent.client import measure_echo_rtt  # noqa: E402
from agent.engine_lookup import find_engine  # noqa: E402
from bench.smoke import parse_args  # noqa: E402
from gui.cluster.chat.client import chat  # noqa: E402
from gui.cluster.llama.random_model import DemoShape, write_demo_model  # noqa: E402
from gui.cluster.llama.server_command import ServerOptions, ServerSpec  # noqa: E402
from gui.cluster.llama.server_start import ServerStart  # noqa: E402
from gui.cluster.nodes import telemetry as T  # noqa: E402
from gui.cluster.nodes.discovery import Discovery  # noqa: E402
from gui.cluster.nodes.records import TokenStore  # noqa: E402


async def _timed(disc: Discovery, pred, timeout: float) -> float:
    t0 = time.perf_counter()
    if not await disc.wait_until(pred, timeout):
        return float("nan")
    return time.perf_counter() - t0


async def discovery_times(tmp: Path, runs: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"found": [], "goodbye": [], "unreachable": []}
    async with Discovery(["127.0.0.1"], tokens=TokenStore(tmp / "tokens.json")) as disc:
        for i in range(runs):
            for kind in ("goodbye", "unreachable"):
                jar = ProcessJar()
                try:
                    t0 = time.perf_counter()
                    a = start_agent(jar.popen, tmp, f"bench-{kind}-{i}")
                    await disc.wait_until(lambda n: a.node_id in n, 10)
                    out["found"].append(time.perf_counter() - t0)
                    if kind == "goodbye":
                        a.proc.send_signal(signal.SIGTERM)
                        out["goodbye"].append(await _timed(disc, lambda n: a.node_id not in n, 10))
                    else:
                        a.proc.kill()
                        out["unreachable"].append(
                            await _timed(disc, lambda n: a.node_id in n and not n[a.node_id].reachable, 15))
                        disc.forget(a.node_id)
                finally:
                    jar.close()
    return out


async def link_rtts(tmp: Path, samples: int = 10) -> list[dict]:
    jar = ProcessJar()
    try:
        a = start_agent(jar.popen, tmp, "bench-echo", mdns=False)
        sampler = T.LinkSampler(a.node_id, lambda n: measure_echo_rtt("127.0.0.1", a.echo_port, n, 0.5),
                                interval=0.2, probes=10)
        return [await sampler.sample() for _ in range(samples)]
    finally:
        jar.close()


async def decode_agreement(tmp: Path, runs: int, tokens: int) -> list[tuple[float, float]]:
    eng = find_engine(probe=True)
    model = write_demo_model(tmp / "demo.gguf", DemoShape(layers=8))
    jar = ProcessJar()
    try:
        class _Procs:
            popen = staticmethod(jar.popen)
        workers = start_rpc_workers(eng, _Procs, 2)
        spec = ServerSpec(model=model, rpc=workers, ngl=9, tensor_split=[4, 5], options=ServerOptions(ctx=2048, port=free_port(), extra_args=["-np", "1"]))
        start = ServerStart(eng.llama_server, spec)
        out = []
        try:
            await start.run(120)
            async with httpx.AsyncClient() as c:
                for _ in range(runs):
                    before = await T.read_counters(c, spec.url)
                    done = await chat(c, spec.url, [{"role": "user", "content": "A long story."}],
                                      max_tokens=tokens, temperature=0)
                    after = await T.read_counters(c, spec.url)
                    out.append((T.counter_rates(before, after)["decode_tps"], done.predicted_per_second))
        finally:
            await start.stop()
        return out
    finally:
        jar.close()


def _fmt(xs: list[float], unit: str, scale: float = 1.0) -> str:
    xs = [x * scale for x in xs if x == x]
    if not xs:
        return "-"
    return f"median {statistics.median(xs):.3f} {unit}, max {max(xs):.3f} {unit} (n={len(xs)})"


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=256)
    args = parse_args(ap, {"runs": 1, "tokens": 8})
    os.environ.setdefault("HERD_CONFIG_DIR", tempfile.mkdtemp(prefix="herd-bench-"))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        disc = await discovery_times(tmp, args.runs)
        links = await link_rtts(tmp)
        agree = await decode_agreement(tmp, args.runs, args.tokens)
    rows = [
        ("agent start → listed (mDNS)", _fmt(disc["found"], "s")),
        ("clean exit → removed (goodbye)", _fmt(disc["goodbye"], "ms", 1000.0)),
        ("SIGKILL → unreachable (goal ≤ 10 s)", _fmt(disc["unreachable"], "s")),
        ("echo RTT median per interval", _fmt([s["rtt_median_ms"] for s in links], "ms")),
        ("echo RTT p95 per interval", _fmt([s["rtt_p95_ms"] for s in links], "ms")),
    ]
    for i, (counter, reply) in enumerate(agree):
        rows.append((f"reply {i + 1}: counters vs timings tok/s",
                     f"{counter:.1f} vs {reply:.1f} ({(counter / reply - 1) * 100:+.2f} %)"))
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  result")
    print("-" * (width + 50))
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    asyncio.run(main())
