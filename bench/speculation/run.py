"""Benchmark: speculative decoding over a simulated LAN — measured against none, predicted by
herd's cost model, chosen only where it pays (issue #35).

One command, as root (it builds a simulated LAN of network namespaces)::

    python bench/speculation/run.py

Two RPC workers, each in its own namespace and each behind its own ``bench/delay_proxy.py``
(1, 3 and 10 ms one way), hold every layer of the target model; llama-server runs on the master
(the root namespace) with one thread, so the draft or the n-gram lookup runs there too. One
worker serves llama-server *without* speculation, the other the same model *with* it, so the two
are timed side by side in one run, one completion each in turn (the order swapping every pair),
and the load of the moment hits both.

Cells, per delay:

* **synthetic acceptance length 2, 3, 4** (``--spec-synth-len``) on a demo model big enough that
  its weights are read from memory, not cache (``--layers 21 --embd 2048`` Q4_K_M, ≈ 660 MB, as
  in ``docs/llama-cpp.md``), with a draft model that shares its vocabulary (a 2-layer demo model
  with the same test tokenizer, ≈ 19 MB) kept on the master's CPU;
* **n-gram** (``--spec-type ngram-simple``) on a rewrite task — repeat a given paragraph — with
  the demo's real SmolLM2-135M (98 MB, also larger than this CPU's caches): a random-weight
  model says nothing its prompt holds, so only real weights show what the lookup finds.

For each cell, as herd's Fastest would, before the timed pairs:

1. the cost model's inputs are measured (:mod:`gui.cluster.planning.measure`): the link's round
   trip through the proxy (RPC probe, fastest of 9), one token's compute (best decode step minus
   the round trip), the verify batch's cost (prompt passes of ``draft_max + 1`` tokens against
   one token, round trip taken off both), the draft's own step (the draft alone on the master's
   CPU) and the acceptance from a short sample (``draft_n_accepted`` of one completion);
2. :func:`gui.cluster.planning.speculation_gain.predict_gain` predicts the gain;
3. herd's choice, by Fastest's own rule (``speculation_trial.keeps_speculation``): speculation
   only where the sample accepted drafts *and* a short measurement of three completions each
   way, in turn, finds it faster (≥ 1.03 × without);

then ``--pairs`` timed pairs give the measured gain (the median of with/without per pair).
Tokens/s are llama-server's own decode timings (``predicted_ms`` over the steps after the first
token).

Writes ``results.md``, ``results.json`` and ``results.png`` next to this file (or ``--out``).
``--smoke`` runs one cell (10 ms, length 4) on tiny models, one pair of 8 tokens, and writes into
a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from cluster.rpc_workers import wait_port  # noqa: E402
from lan import Lan, can_build_lan  # noqa: E402

from agent.engine_lookup import find_engine  # noqa: E402
from agent.ports import free_port  # noqa: E402
from bench.smoke import parse_args, results_folder  # noqa: E402
from gui.cluster.llama.model import inspect_model  # noqa: E402
from gui.cluster.llama.random_model import DemoShape, write_demo_model  # noqa: E402
from gui.cluster.llama.server_command import ServerOptions, ServerSpec  # noqa: E402
from gui.cluster.llama.server_start import ServerStart  # noqa: E402
from gui.cluster.models.demo_weights import installed_demo_weights  # noqa: E402
from gui.cluster.planning import measure as M  # noqa: E402
from gui.cluster.planning.speculation_trial import keeps_speculation  # noqa: E402
from gui.cluster.planning.speculation_gain import (  # noqa: E402
    SpeculationInputs,
    explain_gain,
    measured_gain,
    predict_gain,
    predicted_tokens_per_s,
    verify_cost_ratio,
)

HERE = Path(__file__).resolve().parent
DELAY_PROXY = REPO / "bench" / "delay_proxy.py"
RPC_PORT = 50052
CTX = 1024
#: The workers: one serves the model without speculation, the other with it.
PLAIN, SPECULATING = "plain", "spec"
#: The rewrite task of the n-gram cells: the reply repeats the paragraph, which the lookup finds.
PARAGRAPH = ("The old lighthouse stood at the edge of the cliff for more than a hundred years. Every night "
             "its keeper climbed the narrow stairs, trimmed the wick and polished the great lens, so that "
             "ships passing in the dark could find their way home through the rocks and the fog.")
REWRITE_PROMPT = "Repeat the following paragraph exactly, word for word:\n\n" + PARAGRAPH


@dataclass(frozen=True)
class Cell:
    """One kind of speculation at one delay.

    Attributes:
        delay_ms: one-way delay of both workers' links.
        kind: ``"synthetic"`` (a draft model, acceptance faked at ``length``) or ``"ngram"``.
        length: the synthetic acceptance length (0 for n-gram: measured).
    """

    delay_ms: float
    kind: str
    length: float = 0.0

    @property
    def label(self) -> str:
        return f"length {self.length:g}" if self.kind == "synthetic" else "n-gram"


@dataclass
class CellResult:
    """What one cell measured and predicted."""

    cell: Cell
    inputs: dict
    predicted_gain: float
    predicted_without_tps: float
    predicted_with_tps: float
    reason: str
    probe_gain: float
    chosen: bool
    without_tps: list[float] = field(default_factory=list)
    with_tps: list[float] = field(default_factory=list)
    acceptance: list[float] = field(default_factory=list)

    @property
    def gain(self) -> float:
        return measured_gain(self.without_tps, self.with_tps)

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted_gain - self.gain) / self.gain

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(gain=self.gain, error_pct=self.error_pct)
        return d


@dataclass(frozen=True)
class SpeculatingSpec(ServerSpec):
    """A server spec with speculation arguments after the user's half. Speculation is herd's to
    plan (#35), so llama-server's speculation options are not among the further arguments a
    user may add (:mod:`gui.cluster.llama.server_args`); the benchmark appends its own here."""

    #: (not ``speculation``: that is the plan's :class:`~gui.cluster.planning.speculation.Speculation`;
    #: the synthetic acceptance, ``--spec-synth-len``, is a benchmark's, not a plan's)
    bench_speculation_args: tuple[str, ...] = ()

    def args(self) -> list[str]:
        return super().args() + list(self.bench_speculation_args)


# --------------------------------------------------------------------------------------------
# the simulated LAN


class Workers:
    """Two RPC workers in namespaces, each reached through a delay proxy on loopback that
    :meth:`set_delay` replaces. :meth:`close` undoes all of it."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self.lan = Lan([PLAIN, SPECULATING])
        self.proxies: dict[str, subprocess.Popen] = {}
        self.endpoints: dict[str, str] = {}
        try:
            for name in (PLAIN, SPECULATING):
                host = self.lan[name]
                # one thread, like the master: the two cores are shared (and by other programs)
                host.popen([engine.rpc_server, "-H", host.ip, "-p", str(RPC_PORT), "-t", "1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                wait_port(host.ip, RPC_PORT)
        except BaseException:
            self.lan.close()
            raise

    def set_delay(self, delay_ms: float) -> None:
        """Put a new proxy with ``delay_ms`` one way in front of each worker."""
        self._stop_proxies()
        for name in (PLAIN, SPECULATING):
            target = f"{self.lan[name].ip}:{RPC_PORT}"
            p = subprocess.Popen([sys.executable, str(DELAY_PROXY), "--listen", "127.0.0.1:0", "--target", target,
                                  "--delay-ms", str(delay_ms)], stdout=subprocess.PIPE, text=True,
                                 stdin=subprocess.DEVNULL)
            self.proxies[name] = p
            line = p.stdout.readline().strip()
            if not line.startswith("listening on "):
                raise RuntimeError(f"the delay proxy did not start: {line!r}")
            self.endpoints[name] = line.removeprefix("listening on ")

    def _stop_proxies(self) -> None:
        for p in self.proxies.values():
            p.terminate()
        for p in self.proxies.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        self.proxies.clear()

    def close(self) -> None:
        self._stop_proxies()
        self.lan.close()


# --------------------------------------------------------------------------------------------
# talking to llama-server


@dataclass(frozen=True)
class Timing:
    """llama-server's timings of one completion."""

    predicted_n: int
    predicted_ms: float
    prompt_n: int
    prompt_ms: float
    draft_n: int
    draft_accepted: int

    @property
    def tokens_per_s(self) -> float:
        """Decode speed: the steps after the first token (which comes from the prompt's pass)."""
        return M.DecodeTiming(self.predicted_n, self.predicted_ms, self.prompt_n, self.prompt_ms).tokens_per_s

    @property
    def passes(self) -> int:
        """Decode passes: each yields one token of the target's own plus the drafts accepted."""
        return max(1, self.predicted_n - 1 - self.draft_accepted)

    @property
    def acceptance_length(self) -> float:
        """Mean tokens per pass, the target's own included."""
        return (self.predicted_n - 1) / self.passes


async def complete(client: httpx.AsyncClient, url: str, prompt, tokens: int, chat: bool = True) -> Timing:
    """One completion of at most ``tokens`` at temperature 0, prompt cache off; its timings.
    ``prompt`` is text (a chat message) or, with ``chat=False``, a list of token ids."""
    body: dict = {"temperature": 0.0, "cache_prompt": False, "stream": False}
    if chat:
        body.update(messages=[{"role": "user", "content": prompt}], max_tokens=tokens)
        route = "/v1/chat/completions"
    else:
        body.update(prompt=prompt, n_predict=tokens)
        route = "/completion"
    r = await client.post(url + route, json=body, timeout=600.0)
    r.raise_for_status()
    t = r.json()["timings"]
    return Timing(int(t["predicted_n"]), float(t["predicted_ms"]), int(t.get("prompt_n", 0)),
                  float(t.get("prompt_ms", 0.0)), int(t.get("draft_n", 0)), int(t.get("draft_n_accepted", 0)))


def server_spec(model: Path, endpoint: str | None, port: int, speculation: tuple[str, ...] = ()) -> SpeculatingSpec:
    """Every slot of ``model`` on the worker at ``endpoint`` (None: the master's CPU), one thread."""
    n_slots = inspect_model(model).n_layer + 1
    return SpeculatingSpec(model=model, rpc=[endpoint] if endpoint else [], ngl=n_slots if endpoint else 0,
                           tensor_split=[n_slots] if endpoint else [], verbosity=3,
                           options=ServerOptions(ctx=CTX, port=port, extra_args=["-t", "1", "-np", "1"]),
                           bench_speculation_args=speculation)


@contextlib.asynccontextmanager
async def serving(engine, spec: ServerSpec):
    """A ready llama-server for ``spec``; its URL."""
    start = ServerStart(engine.require_llama_server(), spec)
    try:
        server = await start.run(300)
        yield server.url
    finally:
        await start.stop()


def speculation_args(cell: Cell, draft: Path, args) -> tuple[str, ...]:
    """llama-server's speculation options for ``cell``. The draft stays on the master's CPU
    (``-devd none``): by default llama-server offloads it to the workers too, and then every
    drafted token pays a round trip, which is what speculation is meant to save."""
    if cell.kind == "ngram":
        return ("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(args.ngram_match),
                "--spec-ngram-simple-size-m", str(args.ngram_draft))
    return ("--spec-type", "draft-simple", "-md", str(draft), "-ngld", "0", "-devd", "none",
            "--spec-draft-n-max", str(args.draft_max), "--spec-synth-len", f"{cell.length:g}")


# --------------------------------------------------------------------------------------------
# measuring the cost model's inputs, as Fastest does


@dataclass(frozen=True)
class Calibration:
    """The target's side of the inputs at one delay: link, compute and the verify batch."""

    rtt_ms: float
    compute_ms: float
    one_pass_ms: float
    batch_pass_ms: float
    batch: int
    output_share: float


async def calibrate(url: str, model: Path, rtt_ms: float, batch: int, runs: int, chat_tokens: int) -> Calibration:
    """One token's compute (best decode step minus the round trip) and prompt passes of 1 and
    ``batch`` tokens (best of ``runs``), on a server without speculation; the output layer's
    share of the bytes a token reads from the model file."""
    async with httpx.AsyncClient() as client:
        await complete(client, url, "warm up", 4)
        steps = [1000.0 / (await complete(client, url, "measure the decode speed", chat_tokens)).tokens_per_s
                 for _ in range(runs)]
        one = await prompt_passes_ms(client, url, 1, runs)
        many = await prompt_passes_ms(client, url, batch, runs)
    step = min(steps)
    read = inspect_model(model).active_slot_bytes
    return Calibration(rtt_ms, max(step - rtt_ms, M.MIN_COMPUTE_SHARE * step), one, many, batch,
                       read[-1] / sum(read))


async def prompt_passes_ms(client: httpx.AsyncClient, url: str, n: int, runs: int) -> float:
    """The fastest of ``runs`` + 1 prompt passes of ``n`` token ids, one after the other: the
    first builds llama.cpp's graph for that batch and allocates it on the worker (extra round
    trips); the next reuse it, as the verify passes of one size do."""
    ids = list(range(11, 11 + n))
    times = []
    for _ in range(runs + 1):
        t = await complete(client, url, ids, 1, chat=False)
        if t.prompt_n != n:
            raise RuntimeError(f"a prompt of {n} token ids was read as {t.prompt_n} tokens")
        times.append(t.prompt_ms)
    return min(times[1:])


def cost_inputs(cal: Calibration, sample: Timing, draft_token_ms: float, draft_max: int) -> SpeculationInputs:
    """The cost model's inputs for a cell: the calibration, and from the sample its acceptance and
    the mean verify batch (n-gram drafts only where the lookup finds a match)."""
    mean_batch = 1 + sample.draft_n / sample.passes
    ratio = verify_cost_ratio(cal.one_pass_ms, cal.batch_pass_ms, cal.batch, cal.rtt_ms, mean_batch,
                              cal.compute_ms, cal.output_share)
    return SpeculationInputs(link_rtts_ms=(cal.rtt_ms,), decode_compute_ms=cal.compute_ms,
                             verify_cost_ratio=ratio, draft_token_ms=draft_token_ms,
                             acceptance_length=min(sample.acceptance_length, draft_max + 1), draft_max=draft_max)


def probe_rtt_ms(endpoint: str) -> float:
    """The fastest of 9 RPC round trips through the proxy (before llama-server holds the worker)."""
    return M.probe_rpc_link(endpoint, samples=9).rtt_min_s * 1000.0


def herd_chooses(sample: Timing, probe_gain: float) -> bool:
    """herd's rule, the one Fastest's trial applies (#35): its sample accepted drafts and a short
    measurement with and without found it faster."""
    return keeps_speculation(sample.acceptance_length, probe_gain)


# --------------------------------------------------------------------------------------------
# one cell


async def run_cell(engine, cell: Cell, model: Path, plain_url: str, rtt_ms: float, workers: Workers,
                   port: int, args, draft: Path, draft_token_ms: float) -> CellResult:
    """Calibrate on the server without speculation (again for each cell: the load of the
    machine changes over minutes), start the speculating server for ``cell``, sample, predict,
    choose, then time the pairs."""
    draft_max = args.ngram_draft if cell.kind == "ngram" else args.draft_max
    cal = await calibrate(plain_url, model, rtt_ms, draft_max + 1, args.calibration_runs, args.calibration_tokens)
    print(f"   {cell.delay_ms:4g} ms  {cell.label:10s} compute {cal.compute_ms:.1f} ms a token, passes of 1 and "
          f"{cal.batch} tokens {cal.one_pass_ms:.1f} and {cal.batch_pass_ms:.1f} ms", flush=True)
    spec = server_spec(model, workers.endpoints[SPECULATING], port, speculation_args(cell, draft, args))
    prompt = REWRITE_PROMPT if cell.kind == "ngram" else "Tell me about the sea."
    async with serving(engine, spec) as spec_url, httpx.AsyncClient() as client:
        await complete(client, spec_url, "warm up", 4)
        sample = await complete(client, spec_url, prompt, args.sample_tokens)
        inputs = cost_inputs(cal, sample, 0.0 if cell.kind == "ngram" else draft_token_ms, draft_max)
        predicted = predict_gain(inputs)
        probe = await paired_gain(client, plain_url, spec_url, prompt, args.sample_tokens, args.probe_pairs)
        result = CellResult(cell, asdict(inputs), predicted, *predicted_tokens_per_s(inputs),
                            explain_gain(inputs, predicted), probe, herd_chooses(sample, probe))
        for i in range(args.pairs):
            order = (plain_url, spec_url) if i % 2 == 0 else (spec_url, plain_url)
            timings = {url: await complete(client, url, prompt, args.tokens) for url in order}
            result.without_tps.append(timings[plain_url].tokens_per_s)
            result.with_tps.append(timings[spec_url].tokens_per_s)
            result.acceptance.append(timings[spec_url].acceptance_length)
    print(f"   {'':18s} without {statistics.median(result.without_tps):6.1f} "
          f"with {statistics.median(result.with_tps):6.1f} tok/s  gain {result.gain:5.2f} "
          f"predicted {predicted:5.2f} ({result.error_pct:+5.1f} %)  herd {'speculates' if result.chosen else 'none'}",
          flush=True)
    return result


async def paired_gain(client: httpx.AsyncClient, plain_url: str, spec_url: str, prompt: str, tokens: int,
                      pairs: int) -> float:
    """herd's short measurement with and without: ``pairs`` completions each way in turn (the
    order swapping), the median of the pairs' ratios."""
    without, with_ = [], []
    for i in range(pairs):
        order = (plain_url, spec_url) if i % 2 == 0 else (spec_url, plain_url)
        t = {url: (await complete(client, url, prompt, tokens)).tokens_per_s for url in order}
        without.append(t[plain_url])
        with_.append(t[spec_url])
    return measured_gain(without, with_)


async def run_delay(engine, delay_ms: float, groups: list[tuple[Path, list[Cell]]], workers: Workers,
                    args, draft: Path, draft_token_ms: float) -> list[CellResult]:
    """Every cell at one delay: per model a server without speculation beside one with each kind
    of speculation in turn."""
    workers.set_delay(delay_ms)
    rtt = probe_rtt_ms(workers.endpoints[SPECULATING])
    print(f"\n== {delay_ms:g} ms one way: RPC round trip {rtt:.2f} ms", flush=True)
    results = []
    for model, cells in groups:
        plain_port, spec_port = free_port(), free_port()
        async with serving(engine, server_spec(model, workers.endpoints[PLAIN], plain_port)) as plain_url:
            for cell in cells:
                results.append(await run_cell(engine, cell, model, plain_url, rtt, workers, spec_port, args,
                                              draft, draft_token_ms))
    return results


async def draft_step_ms(engine, draft: Path, tokens: int) -> float:
    """The draft model's own decode step on the master's CPU, one thread (as Fastest measures a
    device: the best of three completions)."""
    m = await M.measure_compute(engine, draft, None, tokens=tokens, runs=3, ctx=CTX, host_threads=1,
                                prompt_runs=0)
    return m.step_s * 1000.0


# --------------------------------------------------------------------------------------------
# models


def bench_models(args, work: Path) -> tuple[Path, Path, Path | None]:
    """The target and its draft (written once into ``work``), and the real model of the n-gram
    cells (None when they are not run)."""
    target_shape = DemoShape(layers=args.layers, embd=args.embd, ff=int(args.embd * 2.75) // 256 * 256,
                             vocab=args.vocab, quant=args.quant)
    draft_shape = DemoShape(layers=2, embd=args.draft_embd, ff=int(args.draft_embd * 2.75) // 64 * 64,
                            vocab=args.vocab)
    paths = []
    for shape, role in ((target_shape, "target"), (draft_shape, "draft")):
        path = work / f"{role}-{shape.layers}L-{shape.embd}E-{shape.vocab}V-{shape.quant}.gguf"
        if not path.exists():
            print(f"writing {path.name} ({shape.file_bytes() / 2**20:.0f} MiB)…", flush=True)
            write_demo_model(path, shape, seed=0 if role == "target" else 1)
        paths.append(path)
    real = None
    if args.ngram:
        real = installed_demo_weights()
        if real is None:
            raise SystemExit("the n-gram cells need the demo's SmolLM2 weights: run `herd demo --download-only`, "
                             "or leave them out with --no-ngram")
    return paths[0], paths[1], real


# --------------------------------------------------------------------------------------------
# report


def machine_description() -> str:
    cpu = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{cpu}, {os.cpu_count()} CPUs; Linux {platform.release()}; load average at the end {load}")


def table_rows(results: list[CellResult]) -> list[str]:
    """The Markdown table: one row per cell."""
    rows = ["| one-way delay | speculation | without tok/s | with tok/s | measured gain | predicted gain | "
            "error | acceptance | herd chooses | where chosen ≥ 0.98× |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        ok = ("yes" if r.gain >= 0.98 else "**no**") if r.chosen else "-"
        rows.append(f"| {r.cell.delay_ms:g} ms | {r.cell.label} | {statistics.median(r.without_tps):.1f} | "
                    f"{statistics.median(r.with_tps):.1f} | {r.gain:.2f} | {r.predicted_gain:.2f} | "
                    f"{r.error_pct:+.0f} % | {statistics.median(r.acceptance):.2f} | "
                    f"{'speculation' if r.chosen else 'none'} | {ok} |")
    return rows


def goals(results: list[CellResult]) -> list[str]:
    """The three goals of #35, each met or not, in words."""
    chosen = [r for r in results if r.chosen]
    slower = [r for r in chosen if r.gain < 0.98]
    errs = [abs(r.error_pct) for r in results]
    far4 = [r for r in results if r.cell.kind == "synthetic" and r.cell.length == 4 and r.cell.delay_ms == 10]
    lines = [f"- Where herd chooses speculation it is never slower than none (≥ 0.98×): "
             f"{'met' if not slower else 'not met'} — {len(chosen)} cells chosen, "
             f"{len(slower)} slower" + (f" ({', '.join(f'{r.cell.delay_ms:g} ms {r.cell.label}: {r.gain:.2f}×' for r in slower)})"
                                       if slower else "") + ".",
             f"- Predicted gain within ±15 % of the measured: {sum(e <= 15 for e in errs)} of {len(errs)} cells "
             f"(median |error| {statistics.median(errs):.0f} %, largest {max(errs):.0f} %)."]
    if far4:
        g = far4[0].gain
        lines.append(f"- ≥ 1.15× at 10 ms with acceptance length 4: {'met' if g >= 1.15 else 'not met'} ({g:.2f}×).")
    return lines


def write_report(out: Path, results: list[CellResult], meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"meta": meta, "cells": [r.to_json() for r in results]}, indent=1))
    lines = ["# Speculative decoding over the simulated LAN (issue #35)", "",
             f"Command: `{meta['command']}`  ", f"Machine: {meta['machine']}  ",
             f"Engine: llama.cpp build {meta['build']}; wall time {meta['wall_s'] / 60:.1f} min  ",
             f"Models: {meta['models']}  ",
             f"Each cell: {meta['pairs']} pairs of completions of up to {meta['tokens']} tokens, without and with "
             "speculation in turn (two workers, one server each); tokens/s are the medians, the measured gain "
             "the median of the pairs' ratios. The prediction and herd's choice come before the pairs, from "
             "measurements of their own (see bench/speculation/README.md).", "",
             *table_rows(results), "", "## Goals", "", *goals(results), "", "## Why, as herd says it", ""]
    for r in results:
        lines.append(f"- **{r.cell.delay_ms:g} ms, {r.cell.label}**: {r.reason}")
    (out / "results.md").write_text("\n".join(lines) + "\n")
    plot(out / "results.png", results)


def plot(path: Path, results: list[CellResult]) -> None:
    """Measured and predicted gain per cell, and predicted against measured."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import pyqtgraph as pg
    import pyqtgraph.exporters
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    pg.setConfigOptions(background="w", foreground="k", antialias=True)
    win = pg.GraphicsLayoutWidget()
    win.resize(1200, 480)
    bars = win.addPlot(title="tokens/s with ÷ without speculation, per cell (dashed: 1, none)")
    legend = bars.addLegend(offset=(10, 10))
    for k, (label, values, colour) in enumerate((
            ("measured", [r.gain for r in results], (30, 120, 200)),
            ("predicted by the cost model", [r.predicted_gain for r in results], (240, 150, 40)))):
        item = pg.BarGraphItem(x=[i + (k - 0.5) * 0.38 for i in range(len(results))], height=values, width=0.36,
                               brush=colour)
        bars.addItem(item)
        legend.addItem(item, label)
    bars.addLine(y=1.0, pen=pg.mkPen((120, 120, 120), style=pg.QtCore.Qt.DashLine))
    short = {"n-gram": "ng"}
    bars.getAxis("bottom").setTicks([[(i, f"{r.cell.delay_ms:g}·" + short.get(r.cell.label, f"L{r.cell.length:g}"))
                                      for i, r in enumerate(results)]])
    bars.setLabel("bottom", "one-way delay in ms · synthetic acceptance length L, or n-gram (ng)")
    bars.setYRange(0, 1.25 * max(max(r.gain, r.predicted_gain) for r in results), padding=0)
    scatter = win.addPlot(title="predicted vs measured gain (lines: ±15 %)")
    top = 1.1 * max(max(r.gain, r.predicted_gain) for r in results)
    scatter.plot([0, top], [0, top], pen=pg.mkPen((120, 120, 120), style=pg.QtCore.Qt.DashLine))
    for f in (0.85, 1.15):
        scatter.plot([0, top], [0, top * f], pen=pg.mkPen((200, 200, 200)))
    scatter.plot([r.gain for r in results], [r.predicted_gain for r in results], pen=None, symbol="o",
                 symbolSize=8, symbolBrush=(30, 120, 200))
    scatter.setLabel("bottom", "measured gain")
    scatter.setLabel("left", "predicted gain")
    exporter = pyqtgraph.exporters.ImageExporter(win.scene())
    exporter.parameters()["width"] = 1200
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
    target, draft, real = bench_models(args, work)
    t0 = time.monotonic()
    draft_ms = await draft_step_ms(engine, draft, args.calibration_tokens)
    print(f"draft {draft.name}: {draft_ms:.2f} ms a token on the master's CPU", flush=True)
    groups = [(target, [Cell(0, "synthetic", length) for length in args.lengths])]
    if real is not None:
        groups.append((real, [Cell(0, "ngram")]))
    workers = Workers(engine)
    results: list[CellResult] = []
    try:
        for delay in args.delays:
            at = [(model, [replace(c, delay_ms=delay) for c in cells]) for model, cells in groups]
            results += await run_delay(engine, delay, at, workers, args, draft, draft_ms)
    finally:
        workers.close()
    models = (f"target {target.name} ({target.stat().st_size / 2**20:.0f} MiB), draft {draft.name} "
              f"({draft.stat().st_size / 2**20:.0f} MiB, {draft_ms:.2f} ms a token)"
              + (f"; n-gram: {real.name} ({real.stat().st_size / 2**20:.0f} MiB)" if real else ""))
    meta = {"command": args.command, "machine": machine_description(), "build": engine.build, "models": models,
            "pairs": args.pairs, "tokens": args.tokens, "wall_s": time.monotonic() - t0,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    write_report(Path(args.out), results, meta)
    print()
    print("\n".join(table_rows(results)))
    print()
    print("\n".join(goals(results)))
    print(f"\nwrote {args.out}/results.md, results.json, results.png")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--delays", type=float, nargs="+", default=[1.0, 3.0, 10.0], help="one-way delays in ms")
    p.add_argument("--lengths", type=float, nargs="+", default=[2.0, 3.0, 4.0],
                   help="synthetic acceptance lengths (--spec-synth-len)")
    p.add_argument("--ngram", action=argparse.BooleanOptionalAction, default=True,
                   help="the n-gram cells on the rewrite task (needs the demo's SmolLM2 weights)")
    p.add_argument("--layers", type=int, default=21, help="target: blocks")
    p.add_argument("--embd", type=int, default=2048, help="target: embedding width")
    p.add_argument("--vocab", type=int, default=16384, help="target's and draft's test vocabulary")
    p.add_argument("--quant", default="Q4_K_M", help="target: quant type")
    p.add_argument("--draft-embd", type=int, default=256, help="draft: embedding width (2 blocks, F16)")
    p.add_argument("--draft-max", type=int, default=3, help="tokens the draft drafts per pass")
    p.add_argument("--ngram-match", type=int, default=3, help="n-gram: tokens looked up")
    p.add_argument("--ngram-draft", type=int, default=8, help="n-gram: tokens drafted per match")
    p.add_argument("--tokens", type=int, default=64, help="tokens per timed completion")
    p.add_argument("--pairs", type=int, default=4, help="timed pairs (without, with) per cell")
    p.add_argument("--sample-tokens", type=int, default=48,
                   help="tokens of the acceptance sample and of herd's short measurement with and without")
    p.add_argument("--probe-pairs", type=int, default=3, help="pairs of herd's short measurement")
    p.add_argument("--calibration-tokens", type=int, default=24, help="tokens of the calibration's decodes")
    p.add_argument("--calibration-runs", type=int, default=3, help="runs per calibration measurement (best counts)")
    p.add_argument("--nice", type=int, default=10,
                   help="run at this much higher CPU priority (nice -N) than other programs")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "herd-bench-speculation"))
    p.add_argument("--out", help="folder for the results (default: this one; smoke: a temporary one)")
    args = parse_args(p, {"delays": [10.0], "lengths": [4.0], "ngram": False, "layers": 2, "embd": 256,
                          "vocab": 2048, "quant": "F16", "draft_embd": 64, "tokens": 8, "pairs": 1,
                          "sample_tokens": 8, "probe_pairs": 1, "calibration_tokens": 8,
                          "calibration_runs": 1, "nice": 0}, argv)
    args.out = args.out or str(results_folder(args.smoke, HERE))
    args.command = "python bench/speculation/run.py" + ("" if argv is None and len(sys.argv) == 1 else
                                                        " " + shlex.join(sys.argv[1:] if argv is None else argv))
    ok, why = can_build_lan()
    if not ok:
        print(f"cannot run: {why}", file=sys.stderr)
        return 2
    if args.nice:
        # As bench/fastest does: other programs share the two cores; at a higher priority the
        # numbers measure the cluster rather than their load (autogroup: the session's nice too).
        os.setpriority(os.PRIO_PROCESS, 0, -args.nice)
        with contextlib.suppress(OSError):
            Path("/proc/self/autogroup").write_text(str(-args.nice))
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
