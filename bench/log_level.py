"""What llama-server's log verbosity costs in decode speed: ``-lv 3``, ``4`` and ``5`` side by side.

    python bench/log_level.py [--reps 5] [--tokens 128] [--replies 3] [--layers 8] [--smoke]

herd runs llama-server at ``-lv 4`` (enough to check the placement from each device's weights,
see gui/cluster/launching/placement.py); ``-lv 5`` (``herd up --verify-layers``) adds one line per layer
at load, but also about twenty debug lines per generated token. This measures what that costs.

Setup: one demo model (8 layers unless ``--layers``), two real ``ggml-rpc-server`` workers on
127.0.0.1 holding host 1 / 3 / 5 slots, and the master's llama-server supervised by herd's own
:class:`~gui.cluster.launching.launcher.ServerProcess` (so the log is read the way herd reads it). Each
repetition launches the server once per level, in turn (the order rotates), and takes ``--replies`` completions of
``--tokens`` tokens; the decode rate is each reply's ``timings.predicted_per_second``. Levels
alternate within a repetition so that load from elsewhere on the machine hits all of them alike.
The table gives the median over all replies of a level, its quartiles, the ratio to ``-lv 4``'s
median, and the paired ratio (each launch against the ``-lv 4`` launch of the same repetition,
median over repetitions), the fastest reply, and per generated token: the lines llama-server
printed and the CPU time it and this process (herd's log reader, the chat client) spent. On a
busy machine the speeds scatter widely; the CPU times barely do. Everything runs on loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from cluster.rpc_workers import start_rpc_workers  # noqa: E402
from conftest import ProcessJar, free_port  # noqa: E402

from agent.engine_lookup import find_engine  # noqa: E402
from bench.smoke import parse_args  # noqa: E402
from gui.cluster.chat.client import chat  # noqa: E402
from gui.cluster.llama import server_process as L  # noqa: E402
from gui.cluster.llama.random_model import DemoShape, write_demo_model  # noqa: E402
from gui.cluster.llama.server_command import ServerOptions, ServerSpec  # noqa: E402
from gui.cluster.llama.server_start import machine_args  # noqa: E402

LEVELS = (3, 4, 5)


class CountingServer(L.ServerProcess):
    """herd's supervisor, counting every line llama-server prints (kept or not)."""

    printed = 0

    def _keep(self, line: str) -> None:
        self.printed += 1
        super()._keep(line)


async def one_launch(engine, model: Path, workers: list[str], level: int, layers: int,
                     replies: int, tokens: int) -> tuple[list[float], dict[str, float]]:
    """Launch at ``-lv level``, run ``replies`` completions; (tok/s of each reply, per generated
    token: log lines printed, llama-server's CPU ms, this process's CPU ms)."""
    host = 1
    rest = layers + 1 - host
    spec = ServerSpec(model=model, rpc=workers, ngl=rest, tensor_split=[rest // 2, rest - rest // 2], verbosity=level, options=ServerOptions(ctx=1024, port=free_port(), extra_args=["-np", "1", *machine_args(engine.llama_server)]))
    # A ServerProcess of its own (it counts every line), so what this CPU needs is added here.
    srv = CountingServer(engine.llama_server, spec)
    await srv.start()
    rates: list[float] = []
    try:
        await srv.wait_ready(120)
        printed = srv.printed
        server = psutil.Process(srv.pid)
        cpu0, own0 = sum(server.cpu_times()[:2]), time.process_time()
        async with httpx.AsyncClient(timeout=120) as client:
            for i in range(replies):
                done = await chat(client, spec.url, [{"role": "user", "content": f"count to {i + 9}"}],
                                  max_tokens=tokens, temperature=0)
                rates.append(float(done.timings["predicted_per_second"]))
        await asyncio.sleep(0.2)  # the last lines of the last reply
        n = replies * tokens
        per_token = {"lines": (srv.printed - printed) / n,
                     "server_ms": (sum(server.cpu_times()[:2]) - cpu0) * 1e3 / n,
                     "herd_ms": (time.process_time() - own0) * 1e3 / n}
    finally:
        await srv.stop()
    return rates, per_token


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="launches per level (default 5)")
    ap.add_argument("--replies", type=int, default=3, help="completions per launch (default 3)")
    ap.add_argument("--tokens", type=int, default=128, help="tokens per completion (default 128)")
    ap.add_argument("--layers", type=int, default=8, help="blocks of the demo model (default 8)")
    args = parse_args(ap, {"reps": 1, "replies": 1, "tokens": 8, "layers": 2})

    engine = find_engine()
    engine.require_llama_server()
    jar = ProcessJar()
    rates: dict[int, list[float]] = {lv: [] for lv in LEVELS}
    ratios: dict[int, list[float]] = {lv: [] for lv in LEVELS}  # per repetition, against -lv 4
    per_token: dict[int, list[dict[str, float]]] = {lv: [] for lv in LEVELS}
    t0 = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            model = write_demo_model(Path(tmp) / "demo.gguf", DemoShape(layers=args.layers))
            workers = start_rpc_workers(engine, jar, 2)
            for rep in range(args.reps):
                launch: dict[int, float] = {}
                # Rotate the order so that no level always runs first (or after -lv 5).
                for lv in LEVELS[rep % 3:] + LEVELS[:rep % 3]:
                    got, lines = await one_launch(engine, model, workers, lv, args.layers, args.replies,
                                                  args.tokens)
                    rates[lv] += got
                    per_token[lv].append(lines)
                    launch[lv] = statistics.median(got)
                for lv in LEVELS:
                    ratios[lv].append(launch[lv] / launch[4])
                print(f"  repetition {rep + 1}/{args.reps}: "
                      + ", ".join(f"-lv {lv} {statistics.median(rates[lv]):.1f}" for lv in LEVELS)
                      + f" tok/s so far ({time.monotonic() - t0:.0f} s)", flush=True)
    finally:
        jar.close()

    base = statistics.median(rates[4])
    print()
    print(f"Decode speed by llama-server log level — demo model {args.layers} layers, 2 loopback RPC "
          f"workers, {args.reps} launches × {args.replies} replies × {args.tokens} tokens per level")
    print(f"{'level':<7}{'median tok/s':>14}{'q1':>9}{'q3':>9}{'replies':>9}{'vs -lv 4':>10}"
          f"{'paired':>9}{'best':>8}{'lines/tok':>11}{'server CPU ms/tok':>19}{'herd CPU ms/tok':>17}")
    for lv in LEVELS:
        r = sorted(rates[lv])
        q1, _, q3 = statistics.quantiles(r, n=4) if len(r) > 1 else (r[0], r[0], r[0])
        med = statistics.median(r)
        paired = (statistics.median(ratios[lv]) - 1) * 100
        print(f"-lv {lv:<3}{med:>14.1f}{q1:>9.1f}{q3:>9.1f}{len(r):>9d}{(med / base - 1) * 100:>+9.1f}%"
              f"{paired:>+8.1f}%{max(r):>8.1f}" + "".join(
                  f"{statistics.median(x[k] for x in per_token[lv]):>{w}.{d}f}"
                  for k, w, d in (("lines", 11, 2), ("server_ms", 19, 3), ("herd_ms", 17, 3))))
    print("vs -lv 4: ratio of the medians; paired: median over repetitions of each launch's median "
          "against the -lv 4 launch next to it (less sensitive to load that comes and goes); best: the "
          "fastest reply (the least disturbed by other load on the machine). Per token (medians over "
          "launches): lines llama-server printed, CPU time of llama-server and of this process "
          "(herd's log reader and the chat client) — CPU time barely depends on other load.")


if __name__ == "__main__":
    asyncio.run(main())
