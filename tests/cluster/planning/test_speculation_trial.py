"""*Fastest* measures speculation with and without on real llama-servers and keeps it only when it
is measured faster, the reason in words (#35)."""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from cluster.rpc_workers import start_rpc_workers
from cluster.speculation_models import agreeing_pair
from conftest import free_port

from gui.cluster.launching.request import LaunchRequest
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.random_model import DemoShape, vocab_tokenizer, write_demo_model
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.llama.server_start import serving
from gui.cluster.planning import plan as P
from gui.cluster.planning.speculation import DRAFT, NONE, Speculation
from gui.cluster.planning.speculation_gain import SpeculationInputs
from gui.cluster.planning.speculation_trial import (
    MIN_MEASURED_GAIN, DecodeSample, SpeculationTrial, acceptance_length, measure_speculation,
)

GiB = 1 << 30
DELAY_PROXY = Path(__file__).resolve().parents[3] / "bench" / "delay_proxy.py"


def _trial(gain: float) -> SpeculationTrial:
    inputs = SpeculationInputs((2.0,), 5.0, 1.2, 0.3, 2.5, 3)
    without = (DecodeSample(48, 100.0),)
    with_ = (DecodeSample(48, 100.0 * gain, 40, 24),)
    return SpeculationTrial(Speculation(DRAFT, draft_path="/m/small.gguf"), without, with_, 6.0, 7.0, inputs, 1.1, gain)


def test_speculation_is_kept_only_when_measured_faster_and_the_reason_says_so():
    kept = _trial(1.25).decision()
    assert kept.kind == DRAFT and kept.predicted_gain == 1.1
    assert kept.reason.startswith("measured 1.25× (100.0 → 125.0 tokens/s): faster, so it is on.")
    assert "Without speculation a token costs 5.0 ms of compute and 2.0 ms of round trips" in kept.reason
    off = _trial(0.9).decision()
    assert off.kind == NONE and off.predicted_gain == 1.1
    assert off.reason.startswith("draft model small.gguf, 3 tokens per pass: measured 0.90× "
                                 "(100.0 → 90.0 tokens/s), not faster, so it stays off.")
    # a win within the noise of a few runs is no win
    assert _trial(MIN_MEASURED_GAIN - 0.01).decision().kind == NONE
    # nor one where nothing drafted was accepted (it can only add work)
    nothing = dataclasses.replace(_trial(1.05), inputs=SpeculationInputs((2.0,), 5.0, 1.2, 0.3, 1.0, 3)).decision()
    assert nothing.kind == NONE and "but no drafted token was accepted, so it stays off" in nothing.reason


@pytest.mark.parametrize("tokens, accepted, draft_max, length", [
    (48, 0, 3, 1.0),          # nothing accepted: one token per pass
    (48, 24, 3, 2.0),         # 24 steps gave 48 tokens
    (48, 40, 3, 4.0),         # capped at every draft and the target's own
])
def test_the_acceptance_length_is_tokens_per_decode_step(tokens, accepted, draft_max, length):
    assert acceptance_length(DecodeSample(tokens, 1.0, 60, accepted), draft_max) == length


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    target = write_demo_model(folder / "target.gguf", DemoShape(layers=8, embd=256, vocab=4096))
    draft = write_demo_model(folder / "draft.gguf", DemoShape(layers=2, embd=64), tokenizer=vocab_tokenizer(target))
    return target, draft


@pytest.mark.engine
async def test_a_trial_on_a_real_cluster_measures_both_sides_and_predicts_before_measuring(engine, procs, pair):
    target, draft = pair
    (worker,) = start_rpc_workers(engine, procs, 1)
    model = inspect_model(target)
    plan = P.Plan(model.n_layer, 3, [(P.Device("w0", "worker0", worker, 0, "CPU", GiB, GiB), 6)])
    started: list[list[str]] = []

    @contextlib.asynccontextmanager
    async def serve(speculation: Speculation):
        request = LaunchRequest(plan, model, ServerOptions(ctx=512, port=free_port(), extra_args=("-np", "1")),
                                speculation=speculation)
        started.append(request.spec().args())
        async with serving(engine.llama_server, request.spec(), timeout=120) as server:
            yield server.url

    speculation = Speculation(DRAFT, draft_path=draft, draft_max=3)
    trial = await measure_speculation(serve, speculation, rtts_ms=[0.1], draft_share=0.1, runs=2, tokens=24)
    # one launch without, one with: the trial's own command lines
    assert "-md" not in started[0] and started[1][started[1].index("-md") + 1] == str(draft)
    assert len(trial.without) == len(trial.with_) == 2
    assert all(s.tokens == 24 and s.tokens_per_s > 0 and s.drafted == 0 for s in trial.without)
    assert all(s.drafted > 0 for s in trial.with_)
    assert trial.verify_ms > 0 and trial.one_pass_ms > 0 and trial.inputs.verify_cost_ratio >= 1
    assert trial.predicted_gain > 0 and trial.measured_gain > 0
    decided = trial.decision()
    accepted = trial.inputs.acceptance_length > 1
    assert decided.kind == (DRAFT if trial.measured_gain >= MIN_MEASURED_GAIN and accepted else NONE)
    assert f"measured {trial.measured_gain:.2f}×" in decided.reason


@contextlib.contextmanager
def _delayed(endpoint: str, delay_ms: float, procs):
    """``endpoint`` behind ``bench/delay_proxy.py`` (loopback): a far link, ``2 × delay_ms`` more per round trip."""
    proxy = procs.popen([sys.executable, str(DELAY_PROXY), "--listen", "127.0.0.1:0", "--target", endpoint,
                         "--delay-ms", str(delay_ms)], stdout=subprocess.PIPE, text=True)
    line = proxy.stdout.readline()
    assert line.startswith("listening on "), line
    yield line.split()[-1]


@pytest.mark.engine
async def test_a_draft_that_agrees_is_kept_over_a_far_link_and_the_prediction_is_close(engine, procs, tmp_path):
    target, draft = agreeing_pair(tmp_path)
    (worker,) = start_rpc_workers(engine, procs, 1)
    model = inspect_model(target)
    with _delayed(worker, 5, procs) as far:
        plan = P.Plan(model.n_layer, 1, [(P.Device("w0", "worker0", far, 0, "CPU", GiB, GiB), 8)])

        @contextlib.asynccontextmanager
        async def serve(speculation: Speculation):
            options = ServerOptions(ctx=512, port=free_port(), extra_args=("-np", "1", "-t", "1"))
            request = LaunchRequest(plan, model, options, speculation=speculation)
            async with serving(engine.llama_server, request.spec(), timeout=120) as server:
                yield server.url

        speculation = Speculation(DRAFT, draft_path=draft, draft_max=4)
        trial = await measure_speculation(serve, speculation, rtts_ms=[10.0],
                                          draft_share=draft.stat().st_size / target.stat().st_size,
                                          output_share=model.active_slot_bytes[-1] / sum(model.active_slot_bytes))
    # the draft predicts what the target does: nearly every draft is accepted, and over a 10 ms
    # round trip a pass of 5 tokens costs little more than one token
    assert trial.inputs.acceptance_length > 3, trial.inputs
    assert trial.measured_gain > 1.5, trial
    # the prediction, made before the decodes with the draft, is of the same size (the 15 % goal
    # is the benchmark's, bench/speculation; two shared cores here vary more from run to run)
    assert 0.67 < trial.predicted_gain / trial.measured_gain < 1.5, (trial.predicted_gain, trial.measured_gain)
    decided = trial.decision()
    assert decided.kind == DRAFT and decided.draft_path == draft
    assert "faster, so it is on" in decided.reason and decided.predicted_gain == trial.predicted_gain
