"""Benchmark: does herd's "Fastest" split beat llama.cpp's memory-proportional default, and how
close is it to the best split an exhaustive search finds? (issue #7)

One command, as root (it builds a simulated LAN of network namespaces)::

    sudo python bench/fastest/run.py

For each cluster *shape* — three RPC workers, each in its own namespace, made uneven by a CPU
quota (a cgroup, v1 or v2: an older, slower PC), CPU pinning, thread counts, a bandwidth limit (``tbf``)
and added latency (``bench/delay_proxy.py``) — it:

1. measures every worker with ``gui.cluster.planning.measure`` (link round trips over the RPC protocol,
   throughput from the agent's bandwidth probe, decode speed from a real single-worker run);
2. plans (a) llama.cpp's default — no ``-ts``: llama.cpp splits by free memory itself — and
   (b) herd's Fastest (``gui.cluster.planning.optimize.fastest``) from those measurements;
3. runs a real decode for (a), (b) and every split of a grid over the workers (c), with
   llama-server on the master (the root namespace) and the workers over the bridge;
4. reports tokens/s, the ratios (b)/(a) and (b)/(c), and the cost model's prediction for every
   plan against what was measured.

The master's own CPU keeps no layers in any plan (it stands for a laptop that only holds the
model file), so every plan spreads all slots over the workers, as llama.cpp's default does. And,
as in a home LAN where the model is larger than any one PC's memory, each worker may hold at most
``--worker-memory`` of the model (the simulated PCs share this machine's RAM, so the cap is
given to the planner; llama.cpp's default sees equal free memory and splits evenly either way).
Every plan run, (a), (b) and the grid, fits that cap.

Writes ``results.md``, ``results.json`` and ``results.png`` next to this file (or ``--out``).
``--smoke`` runs the ``mixed`` shape alone with a 2-layer model, one completion per plan and a
coarse grid, at normal priority, and writes into a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from cluster.rpc_workers import wait_port  # noqa: E402
from cpu_quota import CpuQuota  # noqa: E402  (next to this file)
from lan import Lan, can_build_lan  # noqa: E402

from agent.client import AgentClient  # noqa: E402
from agent.engine_lookup import find_engine  # noqa: E402
from agent.ports import free_port  # noqa: E402
from bench.smoke import parse_args, results_folder  # noqa: E402
from gui.cluster.launching.placement import layout_from_log  # noqa: E402
from gui.cluster.llama.model import inspect_model  # noqa: E402
from gui.cluster.llama.random_model import DemoShape, write_demo_model  # noqa: E402
from gui.cluster.llama.server_command import ServerOptions, ServerSpec  # noqa: E402
from gui.cluster.llama.server_start import ServerStart  # noqa: E402
from gui.cluster.planning import measure as M  # noqa: E402
from gui.cluster.planning.cost_model import step_cost  # noqa: E402
from gui.cluster.planning.optimize import fastest  # noqa: E402
from gui.cluster.planning.plan import Assignment, Device, Plan, estimate  # noqa: E402

HERE = Path(__file__).resolve().parent
DELAY_PROXY = REPO / "bench" / "delay_proxy.py"
RPC_PORT = 50052
API_PORT = 50050
CTX = 512


@dataclass(frozen=True)
class Worker:
    """One simulated PC and what makes it uneven.

    Attributes:
        name: its name (and namespace suffix).
        threads: ``ggml-rpc-server -t``.
        cpus: ``taskset -c`` list, or None (any CPU).
        quota: share of one CPU it may use (cgroup CFS quota), or None (no limit).
        delay_ms: one-way delay added in each direction by the delay proxy, or 0.
        rate: ``tbf`` limit of its outgoing traffic (``"20mbit"``), or None.
    """

    name: str
    threads: int = 1
    cpus: str | None = None
    quota: float | None = None
    delay_ms: float = 0.0
    rate: str | None = None

    def describe(self) -> str:
        bits = [f"-t {self.threads}"]
        if self.cpus is not None:
            bits.append(f"cpu {self.cpus}")
        if self.quota is not None:
            bits.append(f"{self.quota:.0%} CPU")
        if self.delay_ms:
            bits.append(f"+{2 * self.delay_ms:g} ms RTT")
        if self.rate:
            bits.append(self.rate)
        return f"{self.name} ({', '.join(bits)})"


SHAPES: dict[str, list[Worker]] = {
    # Three equal PCs: nothing to gain; the Fastest plan must not lose.
    "even": [Worker("w1"), Worker("w2"), Worker("w3")],
    # Two current PCs and an old one (a quarter of a CPU), each pinned to a core.
    "slow-cpu": [Worker("w1", cpus="0"), Worker("w2", cpus="1"), Worker("w3", cpus="1", quota=0.25)],
    # Two PCs on the wire and one far away: +24 ms round trip, 10 Mbit/s upstream.
    "far": [Worker("w1"), Worker("w2"), Worker("w3", delay_ms=12.0, rate="10mbit")],
    # Everything at once: a slower PC and a far one.
    "mixed": [Worker("w1", cpus="0"), Worker("w2", cpus="1", quota=0.4),
              Worker("w3", delay_ms=8.0, rate="20mbit")],
}


# --------------------------------------------------------------------------------------------
# the simulated cluster


class Cluster:
    """Workers of one shape on a simulated LAN: RPC workers, agents (for the bandwidth probe),
    delay proxies, cgroups and rate limits. :meth:`close` undoes all of it."""

    def __init__(self, engine, workers: list[Worker], work: Path) -> None:
        self.engine = engine
        self.workers = workers
        self.work = work
        self.lan: Lan | None = None
        self.endpoints: dict[str, str] = {}
        self.agents: dict[str, AgentClient] = {}
        self.quota: CpuQuota | None = None
        self.local: list[subprocess.Popen] = []

    async def start(self) -> None:
        self.lan = Lan([w.name for w in self.workers])
        for w in self.workers:
            host = self.lan[w.name]
            argv = [self.engine.rpc_server, "-H", host.ip, "-p", str(RPC_PORT), "-t", str(w.threads)]
            if w.cpus is not None:
                argv = ["taskset", "-c", w.cpus, *argv]
            proc = host.popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if w.quota is not None:
                # ``ip netns exec`` and ``taskset`` exec the worker in place, so this is its pid.
                if self.quota is None:
                    self.quota = CpuQuota(f"herd-bench-{os.getpid()}")
                self.quota.limit(w.name, proc.pid, w.quota)
            if w.rate:
                host.limit_rate(w.rate)
            ep = f"{host.ip}:{RPC_PORT}"
            wait_port(host.ip, RPC_PORT)
            if w.delay_ms:
                ep = self._proxy(ep, w.delay_ms)
            self.endpoints[w.name] = ep
            self.agents[w.name] = await self._agent(w)

    def _proxy(self, target: str, delay_ms: float) -> str:
        p = subprocess.Popen([sys.executable, str(DELAY_PROXY), "--listen", "127.0.0.1:0", "--target", target,
                              "--delay-ms", str(delay_ms)], stdout=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL)
        self.local.append(p)
        line = p.stdout.readline().strip()
        if not line.startswith("listening on "):
            raise RuntimeError(f"delay proxy did not start: {line!r}")
        return line.removeprefix("listening on ")

    async def _agent(self, w: Worker) -> AgentClient:
        host = self.lan[w.name]
        state = self.work / f"agent-{w.name}"
        state.mkdir(parents=True, exist_ok=True)
        base = [sys.executable, "-m", "agent.main", "--config", str(state / "agent.toml"),
                "--state-dir", str(state), "--name", w.name, "--bind", host.ip, "--no-mdns",
                "--api-port", str(API_PORT), "--rpc-port", str(RPC_PORT + 10), "--echo-port", str(RPC_PORT + 11),
                # The workers are reached through the delay proxies as plain RPC (this benchmark
                # compares splits, not link security), so they run without the TLS relay.
                "--exposure", "open"]
        host.popen([*base, "run"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=str(REPO))
        wait_port(host.ip, API_PORT, timeout=30)
        pin = host.run([*base, "pin"], cwd=str(REPO), check=True).stdout.strip()
        from agent.identity import load_or_create
        client = AgentClient(f"https://{host.ip}:{API_PORT}", timeout=60.0,
                             identity=load_or_create(self.work / "master", "master", "herd-bench"))
        await client.pair(pin, "herd-bench")
        return client

    async def close(self) -> None:
        for c in self.agents.values():
            with contextlib.suppress(Exception):
                await c.aclose()
        for p in self.local:
            p.terminate()
        for p in self.local:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=5)
        if self.lan is not None:
            self.lan.close()
        if self.quota is not None:
            self.quota.close()


# --------------------------------------------------------------------------------------------
# running one plan


@dataclass
class Run:
    """One measured plan."""

    kind: str                      # "default", "fastest" or "grid"
    split: dict[str, int]          # worker → slots, in --rpc order
    measured_tps: float            # the best of every launch of this plan
    predicted_tps: float
    step_samples: list[float] = field(default_factory=list)
    launches: int = 1

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted_tps - self.measured_tps) / self.measured_tps


async def run_plan(engine, model: Path, spec: ServerSpec, tokens: int, runs: int):
    """Start llama-server with ``spec``, decode, stop; returns (step times, placement)."""
    start = ServerStart(engine.require_llama_server(), spec)
    try:
        server = await start.run(300)
        steps = await M.decode_step_times(server.url, runs, tokens)
        return steps, server.placement()
    finally:
        await start.stop()


def plan_spec(plan: Plan, model: Path, port: int, host_threads: int) -> ServerSpec:
    active = plan.active_assignments()
    return ServerSpec(model=model, rpc=plan.rpc_endpoints(), ngl=plan.offloaded, tensor_split=[plan.assignments[i].count for i in active], options=ServerOptions(ctx=CTX, port=port, extra_args=["-t", str(host_threads)]))


def split_of(plan: Plan) -> dict[str, int]:
    return {d.node_name: c for d, c in plan.assignments if c}


def grid_splits(n: int, k: int, step: int) -> list[tuple[int, ...]]:
    """Every way to put ``n`` slots on ``k`` devices where all counts but one (any one) are
    multiples of ``step`` — the one takes the rest. Step 1 is the full exhaustive search."""
    out: dict[tuple[int, ...], None] = {}
    for j in range(k):
        for counts in itertools.product(range(0, n + 1, step), repeat=k - 1):
            rest = n - sum(counts)
            if rest >= 0:
                out[(*counts[:j], rest, *counts[j:])] = None
    return list(out)


def grid_plans(n_layer: int, devices: list[Device], step: int) -> list[Plan]:
    """:func:`grid_splits` of the model's slots over ``devices`` in this (``--rpc``) order."""
    return [Plan(n_layer, 0, tuple(Assignment(d, c) for d, c in zip(devices, counts)))
            for counts in grid_splits(n_layer + 1, len(devices), step)]


async def bench_shape(engine, name: str, workers: list[Worker], model: Path, args, work: Path) -> dict:
    info = inspect_model(model)
    cluster = Cluster(engine, workers, work / name)
    (work / name).mkdir(parents=True, exist_ok=True)
    port = free_port()
    try:
        await cluster.start()
        print(f"\n== {name}: " + "; ".join(w.describe() for w in workers), flush=True)
        cache = M.MeasurementCache(work / "cache")
        # The most a worker may hold: its share of the weights, plus the KV cache of every
        # block and a compute-buffer margin, so that memory caps the weights alone.
        cap = (int(args.worker_memory * sum(info.slot_bytes)) + info.kv_bytes(CTX, range(info.n_layer))
               + (64 << 20))
        nodes, devices = [], []
        for w in workers:
            ep = cluster.endpoints[w.name]
            t0 = time.monotonic()
            m = await M.measure_node(engine, model, f"{name}-{w.name}", ep, cache=cache,
                                     agent=cluster.agents[w.name], tokens=args.tokens,
                                     runs=args.calibration_runs,
                                     host_threads=args.host_threads, threads=w.threads,
                                     settings={"worker": w.describe()}, refresh=True)
            nodes.append(m)
            free, total = m.link.devices[0]
            devices.append(Device(node_id=w.name, node_name=w.name, endpoint=ep, index=0, name="CPU",
                                  free_bytes=min(free, cap), total_bytes=total))
            tput = m.link.throughput_bps
            print(f"   measured {w.name}: {m.compute.seconds_per_layer * 1e3:6.2f} ms/layer, "
                  f"step {m.compute.step_s * 1e3:6.1f} ms, RTT {m.link.rtt_s * 1e3:6.2f} ms, "
                  f"{'?' if tput is None else f'{tput * 8 / 1e6:.0f} Mbit/s'} "
                  f"({time.monotonic() - t0:.0f} s)", flush=True)
        meas = M.cost_inputs(nodes)
        t0 = time.perf_counter()
        best = fastest(info, devices, meas, CTX)
        plan_s = time.perf_counter() - t0

        runs: list[Run] = []
        plans: dict[int, tuple[Plan, ServerSpec]] = {}

        async def measure(kind: str, plan: Plan | None, spec: ServerSpec | None = None,
                          again: Run | None = None) -> Run:
            spec = spec or plan_spec(plan, model, port, args.host_threads)
            steps, placement = await run_plan(engine, model, spec, args.tokens, args.runs)
            actual = layout_from_log(placement, info)
            if plan is None:  # llama.cpp chose: the plan is what it did
                plan = Plan(info.n_layer, len(actual.get("host", [])),
                            tuple(Assignment(d, len(actual.get(d.endpoint, []))) for d in devices))
                if not all(f.fits for f in estimate(plan, info, CTX)[:-1]):
                    print(f"   note: llama.cpp's own split {split_of(plan)} exceeds the memory cap")
            want = {d.endpoint: list(plan.slots_of(i)) for i, (d, c) in enumerate(plan.assignments) if c}
            if actual != want:
                raise RuntimeError(f"{kind}: llama-server placed {actual}, the plan was {want}")
            if again is not None:  # one more launch of a plan measured before
                again.step_samples += steps
                again.launches += 1
                again.measured_tps = 1.0 / min(again.step_samples)
                print(f"   again    {_fmt_split(again.split):32s} measured {1.0 / min(steps):6.1f} tok/s, "
                      f"best {again.measured_tps:6.1f}", flush=True)
                return again
            r = Run(kind, split_of(plan), 1.0 / min(steps),
                    step_cost(plan, info, meas).tokens_per_s, steps)
            runs.append(r)
            plans[id(r)] = (plan, spec)
            print(f"   {kind:8s} {_fmt_split(r.split):32s} measured {r.measured_tps:6.1f} tok/s, "
                  f"predicted {r.predicted_tps:6.1f} ({r.error_pct:+5.1f} %)", flush=True)
            return r

        # (a) exactly what llama.cpp does without -ts: its own split by free memory.
        a_spec = ServerSpec(model=model, rpc=[d.endpoint for d in devices], ngl=info.n_layer + 1, tensor_split=[], options=ServerOptions(ctx=CTX, port=port, extra_args=["-t", str(args.host_threads)]))
        a = await measure("default", None, a_spec)
        b = await measure("fastest", best.plan)
        order = best.plan.devices()
        grid = [p for p in grid_plans(info.n_layer, order, args.grid_step)
                if split_of(p) != split_of(best.plan) and all(f.fits for f in estimate(p, info, CTX)[:-1])]
        print(f"   planned in {plan_s * 1e3:.1f} ms; {len(grid)} grid splits fit", flush=True)
        for p in grid:
            await measure("grid", p)
        # Confirm: the best of many noisy grid runs is lucky by selection, so the leaders and
        # (a) and (b) are launched again, alternately, and each keeps its best.
        grid_runs = [r for r in runs if r.kind == "grid"]
        leaders = sorted(grid_runs, key=lambda r: r.measured_tps, reverse=True)[:args.confirm_top]
        for _ in range(args.confirm_rounds):
            for r in (a, b, *leaders):
                plan, spec = plans[id(r)]
                await measure(r.kind, plan, spec, again=r)
        c = max(grid_runs, key=lambda r: r.measured_tps)
        return {
            "shape": name, "workers": [w.describe() for w in workers],
            "measurements": [n.to_json() for n in nodes], "plan_seconds": plan_s,
            "default": a.__dict__, "fastest": b.__dict__, "best_grid": c.__dict__,
            "b_over_a": b.measured_tps / a.measured_tps, "b_over_c": b.measured_tps / c.measured_tps,
            "grid_step": args.grid_step, "grid_order": [d.node_name for d in order],
            "worker_cap_bytes": cap,
            "runs": [r.__dict__ for r in runs],
        }
    finally:
        await cluster.close()


def _fmt_split(split: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in split.items())


# --------------------------------------------------------------------------------------------
# report


def machine_description() -> str:
    cpu = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB RAM"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{cpu}, {os.cpu_count()} CPUs{mem}; Linux {platform.release()}; Python "
            f"{platform.python_version()}; load average at the end {load}")


def write_report(out: Path, results: list[dict], meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"meta": meta, "shapes": results}, indent=1))
    lines = ["# Fastest split vs llama.cpp's default (issue #7)", "",
             f"Command: `{meta['command']}`  ", f"Machine: {meta['machine']}  ",
             f"Engine: llama.cpp build {meta['build']}; model: {meta['model']}  ",
             f"Each number: the best of {meta['runs']} completions of {meta['tokens']} tokens per launch "
             f"(llama-server's own `predicted_ms`); (a), (b) and the {meta['confirm_top']} best grid splits "
             f"are launched {meta['confirm_rounds']} more times, alternately, and keep their best. "
             f"Wall time {meta['wall_s'] / 60:.1f} min.", "",
             "| shape | workers | (a) default tok/s | (b) Fastest tok/s | (c) best of grid tok/s | "
             "b/a | b/c | (b) predicted tok/s | error |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        a, b, c = r["default"], r["fastest"], r["best_grid"]
        err = 100 * (b["predicted_tps"] - b["measured_tps"]) / b["measured_tps"]
        lines.append(
            f"| {r['shape']} | {'<br>'.join(r['workers'])} | {a['measured_tps']:.1f} ({_fmt_split(a['split'])}) | "
            f"{b['measured_tps']:.1f} ({_fmt_split(b['split'])}) | {c['measured_tps']:.1f} ({_fmt_split(c['split'])}) | "
            f"**{r['b_over_a']:.2f}** | **{r['b_over_c']:.2f}** | {b['predicted_tps']:.1f} | {err:+.1f} % |")
    errs = [abs(x["error_pct"]) if "error_pct" in x else
            abs(100 * (x["predicted_tps"] - x["measured_tps"]) / x["measured_tps"])
            for r in results for x in r["runs"]]
    lines += ["", f"Cost model over all {len(errs)} measured plans: mean |error| "
              f"{statistics.mean(errs):.1f} %, median {statistics.median(errs):.1f} %, max {max(errs):.1f} %.", ""]
    lines += ["(c) is the best measured split on a grid: every count but the last worker's a multiple of "
              f"{meta['grid_step']}, workers in the order the Fastest plan chose (llama.cpp puts the "
              "output layer on the last worker that holds slots). (b)'s own split is not part of the grid.", ""]
    lines += ["## Every plan measured", ""]
    for r in results:
        lines += [f"### {r['shape']}", "", "Measured by `gui.cluster.planning.measure` (what the plans were made from):", "",
                  "| worker | ms per layer | calibration step ms | RTT ms | throughput Mbit/s |",
                  "|---|---|---|---|---|"]
        for w, m in zip(r["workers"], r["measurements"]):
            c, ln = m["compute"], m["link"]
            tput = "-" if ln["throughput_bps"] is None else f"{ln['throughput_bps'] * 8 / 1e6:.0f}"
            lines.append(f"| {w} | {c['seconds_per_layer'] * 1e3:.2f} | {c['step_s'] * 1e3:.1f} | "
                         f"{ln['rtt_s'] * 1e3:.2f} | {tput} |")
        lines += ["", "| plan | split | measured tok/s | predicted tok/s | error |",
                  "|---|---|---|---|---|"]
        for x in r["runs"]:
            e = 100 * (x["predicted_tps"] - x["measured_tps"]) / x["measured_tps"]
            lines.append(f"| {x['kind']} | {_fmt_split(x['split'])} | {x['measured_tps']:.1f} | "
                         f"{x['predicted_tps']:.1f} | {e:+.1f} % |")
        lines.append("")
    (out / "results.md").write_text("\n".join(lines))
    plot(out / "results.png", results)


def plot(path: Path, results: list[dict]) -> None:
    """Bars of (a), (b), (c) per shape, and predicted against measured for every plan."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import pyqtgraph as pg
    import pyqtgraph.exporters
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    pg.setConfigOptions(background="w", foreground="k", antialias=True)
    win = pg.GraphicsLayoutWidget()
    win.resize(1100, 480)
    bars = win.addPlot(title="decode tokens/s per shape: (a) default, (b) Fastest, (c) best of grid")
    colours = [(150, 150, 150), (30, 120, 200), (240, 150, 40)]
    legend = bars.addLegend(offset=(10, 10))
    labels = ("(a) llama.cpp default", "(b) herd Fastest", "(c) best of grid")
    for k, key in enumerate(("default", "fastest", "best_grid")):
        xs = [i + (k - 1) * 0.27 for i in range(len(results))]
        ys = [r[key]["measured_tps"] for r in results]
        item = pg.BarGraphItem(x=xs, height=ys, width=0.25, brush=colours[k])
        bars.addItem(item)
        legend.addItem(item, labels[k])
    # headroom above the bars for the legend
    bars.setYRange(0, 1.3 * max(r[k]["measured_tps"] for r in results
                                for k in ("default", "fastest", "best_grid")), padding=0)
    bars.getAxis("bottom").setTicks([[(i, r["shape"]) for i, r in enumerate(results)]])
    bars.setLabel("left", "tokens/s")
    scatter = win.addPlot(title="cost model: predicted vs measured tokens/s (every plan)")
    pts = [(x["measured_tps"], x["predicted_tps"]) for r in results for x in r["runs"]]
    top = max(max(p) for p in pts) * 1.1
    scatter.plot([0, top], [0, top], pen=pg.mkPen((120, 120, 120), style=pg.QtCore.Qt.DashLine))
    for lo, hi in ((0.85, "-15 %"), (1.15, "+15 %")):
        scatter.plot([0, top], [0, top * lo], pen=pg.mkPen((200, 200, 200)))
    scatter.plot([p[0] for p in pts], [p[1] for p in pts], pen=None, symbol="o", symbolSize=6,
                 symbolBrush=(30, 120, 200))
    scatter.setLabel("bottom", "measured tokens/s")
    scatter.setLabel("left", "predicted tokens/s")
    exporter = pyqtgraph.exporters.ImageExporter(win.scene())
    exporter.parameters()["width"] = 1100
    exporter.export(str(path))
    win.close()
    del app


# --------------------------------------------------------------------------------------------


async def main_async(args) -> int:
    engine = find_engine(probe=True)
    if not engine.complete:
        print("no llama.cpp engine; run `herd engine install`", file=sys.stderr)
        return 2
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    shape = DemoShape(layers=args.layers, embd=args.embd, ff=int(args.embd * 2.75) // 32 * 32,
                      vocab=args.vocab)
    model = work / f"bench-{shape.layers}L-{shape.embd}E-{shape.vocab}V.gguf"
    if not model.exists():
        print(f"writing {model.name} ({shape.file_bytes() / 2**20:.0f} MiB)…", flush=True)
        write_demo_model(model, shape)
    t0 = time.monotonic()
    results = []
    for name in args.shapes:
        results.append(await bench_shape(engine, name, SHAPES[name], model, args, work))
    meta = {"command": args.command, "machine": machine_description(), "build": engine.build,
            "model": f"{model.name}, {model.stat().st_size / 2**20:.0f} MiB, f16, {shape.layers} layers, "
                     f"n_embd {shape.embd}, n_ff {shape.ff}, vocab {shape.vocab}",
            "runs": args.runs, "tokens": args.tokens, "grid_step": args.grid_step,
            "worker_memory": args.worker_memory, "confirm_top": args.confirm_top,
            "confirm_rounds": args.confirm_rounds,
            "wall_s": time.monotonic() - t0, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    write_report(Path(args.out), results, meta)
    print(f"\n{'shape':10s} {'(a)':>7s} {'(b)':>7s} {'(c)':>7s} {'b/a':>6s} {'b/c':>6s} {'pred b':>7s}")
    for r in results:
        print(f"{r['shape']:10s} {r['default']['measured_tps']:7.1f} {r['fastest']['measured_tps']:7.1f} "
              f"{r['best_grid']['measured_tps']:7.1f} {r['b_over_a']:6.2f} {r['b_over_c']:6.2f} "
              f"{r['fastest']['predicted_tps']:7.1f}")
    print(f"\nwrote {args.out}/results.md, results.json, results.png")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--embd", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--tokens", type=int, default=24, help="tokens per timed completion")
    p.add_argument("--runs", type=int, default=3, help="timed completions per plan (the best counts)")
    p.add_argument("--calibration-runs", type=int, default=5,
                   help="timed completions per worker measurement (the best counts)")
    p.add_argument("--grid-step", type=int, default=4, help="grid granularity in slots (1: exhaustive)")
    p.add_argument("--confirm-top", type=int, default=3,
                   help="grid leaders launched again with (a) and (b) to confirm (default 3)")
    p.add_argument("--confirm-rounds", type=int, default=2, help="confirmation rounds (default 2)")
    p.add_argument("--host-threads", type=int, default=1, help="llama-server -t on the master")
    p.add_argument("--worker-memory", type=float, default=0.6,
                   help="most of the model one worker may hold (fraction of its weights)")
    p.add_argument("--nice", type=int, default=10,
                   help="run at this much higher CPU priority (nice -N) than other programs")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "herd-bench-fastest"))
    p.add_argument("--out", help="folder for the results (default: this one; smoke: a temporary one)")
    # The mixed shape has every kind of unevenness: a CPU quota, pinning, a rate limit, a delay.
    args = parse_args(p, {"shapes": ["mixed"], "layers": 2, "embd": 256, "vocab": 2048, "tokens": 4, "runs": 1,
                          "calibration_runs": 1, "grid_step": 2, "confirm_top": 1, "confirm_rounds": 1,
                          "nice": 0}, argv)
    args.out = args.out or str(results_folder(args.smoke, HERE))
    args.command = "python bench/fastest/run.py" + ("" if argv is None and len(sys.argv) == 1 else
                                                    " " + shlex.join(sys.argv[1:] if argv is None else argv))
    ok, why = can_build_lan()
    if not ok:
        print(f"cannot run: {why}", file=sys.stderr)
        return 2
    if shutil.which("taskset") is None:
        print("cannot run: needs taskset (util-linux)", file=sys.stderr)
        return 2
    if args.nice:
        # Other programs share this machine's two cores; at a higher priority the numbers
        # measure the cluster rather than their load. Every process started inherits it.
        # With autogroup scheduling (Linux's default for desktops) nice only ranks processes
        # of one session; the group's own nice ranks this session against the others.
        os.setpriority(os.PRIO_PROCESS, 0, -args.nice)
        with contextlib.suppress(OSError):
            Path("/proc/self/autogroup").write_text(str(-args.nice))
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
