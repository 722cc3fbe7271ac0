"""The speculation cost model's shape (#35): a pass of drafted tokens pays the links' round trips
once, so the gain grows with the round trips and with the acceptance, and falls below 1 where the
verify pass is compute-bound and few drafts are accepted. Plain numbers, no network: the model
is arithmetic over measurements, which ``bench/speculation/run.py`` checks against real runs.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.i18n import set_translator
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.random_model import DemoShape, write_demo_model
from gui.cluster.planning.cost_model import DeviceSpeed, LinkSpeed, Measurements, step_cost
from gui.cluster.planning.plan import Assignment, Device, Plan
from gui.cluster.planning.speculation_gain import (
    SpeculationInputs,
    explain_gain,
    inputs_from_step,
    measured_gain,
    predict_gain,
    predicted_tokens_per_s,
    verify_cost_ratio,
)

GiB = 1 << 30


def inputs(rtt_ms: float = 20.0, compute_ms: float = 100.0, ratio: float = 1.3, draft_ms: float = 2.0,
           length: float = 3.0, draft_max: int = 3, links: int = 1) -> SpeculationInputs:
    return SpeculationInputs(link_rtts_ms=(rtt_ms,) * links, decode_compute_ms=compute_ms,
                             verify_cost_ratio=ratio, draft_token_ms=draft_ms,
                             acceptance_length=length, draft_max=draft_max)


def test_a_worked_example():
    # without: 100 + 2 × 20 = 140 ms a token; a pass: 100 × 1.5 + 2 × 20 + 3 × 10 = 220 ms for
    # 3 tokens, 73.3 ms a token: 140 / 73.3 = 1.909×
    i = inputs(rtt_ms=20, compute_ms=100, ratio=1.5, draft_ms=10, length=3, draft_max=3, links=2)
    assert predict_gain(i) == pytest.approx(140 / (220 / 3))
    without, with_ = predicted_tokens_per_s(i)
    assert (without, with_) == (pytest.approx(1000 / 140), pytest.approx(3000 / 220))


rtts = st.floats(0.0, 200.0)
lengths = st.floats(1.0, 4.0)
ratios = st.floats(1.0, 4.0)


@given(a=rtts, b=rtts, length=lengths, ratio=ratios)
def test_the_gain_grows_with_the_round_trip(a, b, length, ratio):
    lo, hi = sorted((a, b))
    slow_link, fast_link = inputs(rtt_ms=hi, length=length, ratio=ratio), inputs(rtt_ms=lo, length=length, ratio=ratio)
    # as the links dominate, the gain tends to the acceptance length from whichever side it starts
    assert abs(predict_gain(slow_link) - length) <= abs(predict_gain(fast_link) - length) + 1e-9


@given(a=lengths, b=lengths, rtt=rtts, ratio=ratios)
def test_the_gain_grows_with_the_acceptance(a, b, rtt, ratio):
    lo, hi = sorted((a, b))
    assert predict_gain(inputs(rtt_ms=rtt, ratio=ratio, length=hi)) >= predict_gain(
        inputs(rtt_ms=rtt, ratio=ratio, length=lo)) - 1e-12


@given(rtt=rtts, length=lengths)
def test_a_costlier_verify_pass_or_draft_gains_less(rtt, length):
    base = predict_gain(inputs(rtt_ms=rtt, length=length))
    assert predict_gain(inputs(rtt_ms=rtt, length=length, ratio=2.5)) < base
    assert predict_gain(inputs(rtt_ms=rtt, length=length, draft_ms=20.0)) < base


def test_compute_bound_with_low_acceptance_is_slower_and_far_links_with_high_acceptance_faster():
    # a fast LAN (0.2 ms) next to 100 ms of compute, a verify pass of 1.8× a token, 1.5 tokens a pass
    assert predict_gain(inputs(rtt_ms=0.2, ratio=1.8, length=1.5)) < 1
    # nothing accepted: every pass is pure overhead, whatever the links
    assert predict_gain(inputs(rtt_ms=200.0, length=1.0)) < 1
    # two far workers, four tokens a pass: nearly the acceptance length
    assert predict_gain(inputs(rtt_ms=200.0, links=2, length=4.0, draft_max=4)) > 3


def test_n_gram_lookup_costs_no_draft_time():
    ngram = inputs(draft_ms=0.0, length=2.0)
    assert predict_gain(ngram) == pytest.approx(2 * 120 / (100 * 1.3 + 20))
    text = explain_gain(ngram, predict_gain(ngram))
    assert "tokens looked up in the text so far" in text and "to draft them" not in text


def plan_and_model(tmp_path) -> tuple[Plan, object]:
    model = inspect_model(write_demo_model(tmp_path / "m.gguf", DemoShape(layers=4, embd=128, ff=352)))
    a = Device("a", "a", "10.0.0.2:50052", 0, "CPU", 8 * GiB, 8 * GiB)
    b = Device("b", "b", "10.0.0.3:50052", 0, "CPU", 8 * GiB, 8 * GiB)
    idle = Device("c", "c", "10.0.0.4:50052", 0, "CPU", 8 * GiB, 8 * GiB)
    return Plan(4, 1, (Assignment(a, 2), Assignment(idle, 0), Assignment(b, 2))), model


def test_a_plans_step_gives_the_links_and_the_compute(tmp_path):
    plan, model = plan_and_model(tmp_path)
    speed = DeviceSpeed((0.01,) * 5)
    m = Measurements(compute={"a": speed, "b": speed, "c": speed},
                     links={"a": LinkSpeed(0.004), "b": LinkSpeed(0.006), "c": LinkSpeed(0.050)},
                     host=speed, host_fixed_s=0.001)
    step = step_cost(plan, model, m)
    i = inputs_from_step(step, verify_cost_ratio=1.2, draft_token_ms=1.0, acceptance_length=2.5, draft_max=3)
    # the idle worker holds no layers: its link is not crossed
    assert i.link_rtts_ms == pytest.approx((4.0, 6.0))
    # host fixed 1 ms + its one slot 10 ms + 2 × 2 slots of 10 ms
    assert i.decode_compute_ms == pytest.approx(51.0)
    assert 1000.0 / predicted_tokens_per_s(i)[0] == pytest.approx(step.total_s * 1000.0)


@pytest.mark.parametrize(("change", "words"), [
    ({"rtt_ms": -1.0}, "round trip cannot be negative"),
    ({"compute_ms": 0.0}, "compute must take some time"),
    ({"ratio": 0.5}, "cannot cost less than one token"),
    ({"draft_ms": -2.0}, "draft's time per token cannot be negative"),
    ({"draft_max": 0}, "at least one token per pass"),
    ({"length": 0.5}, "between 1 (no draft accepted) and 4"),
    ({"length": 5.0, "draft_max": 3}, "got 5"),
    ({"compute_ms": float("nan")}, "must be a number"),
])
def test_impossible_inputs_are_refused_in_words(change, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        inputs(**change)


def test_the_reason_names_the_costs_and_the_verdict():
    far = inputs(rtt_ms=40.0, length=3.5)
    text = explain_gain(far, predict_gain(far))
    assert "40 ms of round trips, one to each device" in text and "yields 3.5 tokens" in text
    assert "paid once for several tokens" in text


@pytest.mark.parametrize(("case", "words"), [
    (dict(rtt_ms=0.2, ratio=2.5, length=1.6), "verifying several tokens costs more compute"),
    (dict(rtt_ms=0.2, ratio=1.0, draft_ms=40.0, length=1.6), "drafting takes longer"),
    (dict(rtt_ms=0.2, ratio=1.05, draft_ms=1.0, length=1.0), "too few drafted tokens are accepted"),
])
def test_a_loss_is_explained_by_its_largest_cost(case, words):
    i = inputs(**case)
    gain = predict_gain(i)
    assert gain < 1
    assert words in explain_gain(i, gain)


def test_the_reason_is_translated():
    set_translator(lambda context, text: f"[{context}] {text}")
    try:
        text = explain_gain(inputs(), 1.2)
    finally:
        set_translator(None)
    assert text.startswith("[SpeculationGain] Without speculation") and "[SpeculationGain] Predicted 1.20×" in text


def test_the_measured_gain_is_the_median_of_paired_ratios():
    assert measured_gain([10.0, 10.0, 5.0], [12.0, 11.0, 8.0]) == pytest.approx(1.2)
    with pytest.raises(ValueError, match="No measured pair"):
        measured_gain([], [])


def test_the_verify_ratio_comes_from_the_timed_batch_without_its_round_trip():
    # 4 tokens: 50 ms - 20 ms of round trip = 30 ms, against 12 ms of one decoded token's compute
    assert verify_cost_ratio(30.0, 50.0, 4, 20.0, tokens=4, decode_compute_ms=12.0) == pytest.approx(2.5)
    # other sizes: linear through the pass of one token (10 ms): 20/3 ms a token
    assert verify_cost_ratio(30.0, 50.0, 4, 20.0, tokens=2.5, decode_compute_ms=10.0) == pytest.approx(2.0)
    assert verify_cost_ratio(30.0, 50.0, 4, 20.0, tokens=7, decode_compute_ms=10.0) == pytest.approx(5.0)
    # each further token also computes the output layer, which a prompt pass does for its last only
    assert verify_cost_ratio(30.0, 50.0, 4, 20.0, tokens=4, decode_compute_ms=10.0,
                             output_share=0.25) == pytest.approx(3.75)


def test_a_noisy_timing_never_makes_the_verify_pass_cheaper_than_one_token():
    assert verify_cost_ratio(30.0, 25.0, 4, 20.0, tokens=4, decode_compute_ms=10.0) == 1.0
    assert verify_cost_ratio(15.0, 40.0, 4, 20.0, tokens=4, decode_compute_ms=10.0) >= 1.0


@pytest.mark.parametrize(("args", "words"), [
    ((30.0, 50.0, 1, 20.0, 4, 10.0), "at least 2 tokens, got 1"),
    ((30.0, 50.0, 4, 20.0, 4, 10.0, 1.5), "between 0 and 1, got 1.5"),
    ((30.0, 50.0, 4, 20.0, 4, 0.0), "compute must take some time"),
])
def test_a_timed_batch_that_cannot_be_is_refused(args, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        verify_cost_ratio(*args)
