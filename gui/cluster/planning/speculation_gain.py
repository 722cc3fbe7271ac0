"""The predicted gain of speculative decoding on a cluster, and its reason in words (#35).

Over a LAN every generated token pays a round trip to each RPC device that holds layers
(``docs/llama-cpp.md``, "Per-token traffic": per token and device a one-way ``SET_TENSOR``, a
one-way ``GRAPH_COMPUTE`` and a ``GET_TENSOR`` round trip). Speculation drafts ``draft_max``
tokens cheaply (a small draft model on the host, or an n-gram lookup in what was already
said), then the target verifies all of them and one token of its own in a single pass. That pass
travels the same chain once, so it pays the round trips once; on a CPU, or a GPU whose decode
reads memory, computing ``draft_max + 1`` tokens costs little more than one. It yields
``acceptance_length`` tokens on average (the accepted drafts plus the target's own). So::

    without = decode_compute + Σ round trips                          (one token)
    pass    = decode_compute × verify_cost_ratio + Σ round trips
            + draft_max × draft_token_ms                              (acceptance_length tokens)
    gain    = (acceptance_length / pass) / (1 / without)

Both are decode steps of :mod:`gui.cluster.planning.cost_model` (:class:`StepCost`): the links'
part is the same per-device round trip that model uses for a plan, so a plan's
:func:`~gui.cluster.planning.cost_model.step_cost` gives the inputs (:func:`inputs_from_step`).
The gain grows with the round trips and with the acceptance; it falls below 1 where the verify
pass is compute-bound (a high ``verify_cost_ratio``) and few drafts are accepted.

Not modelled, because they are small on the links herd plans for: the verify pass's logits of
``draft_max + 1`` tokens coming back over the last link (fold their transfer into
``decode_compute_ms`` on a slow link), and the draft model's own pass over the accepted tokens.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from agent.i18n import translate
from gui.cluster.planning.cost_model import StepCost

@dataclass(frozen=True)
class SpeculationInputs:
    """What the speculation gain is predicted from, in milliseconds.

    Attributes:
        link_rtts_ms: measured round trip per RPC device that holds layers.
        decode_compute_ms: one token's compute on the cluster, without the links.
        verify_cost_ratio: a verify pass of ``draft_max + 1`` tokens over one token's compute
            (>= 1).
        draft_token_ms: the draft's own time per drafted token (0 for n-gram).
        acceptance_length: mean tokens accepted per verify pass, including the target's own
            token (>= 1).
        draft_max: tokens drafted per pass.

    Raises:
        ValueError: a value no measurement can give; the message names it and what it must be.
    """

    link_rtts_ms: tuple[float, ...]
    decode_compute_ms: float
    verify_cost_ratio: float
    draft_token_ms: float
    acceptance_length: float
    draft_max: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "link_rtts_ms", tuple(float(x) for x in self.link_rtts_ms))
        problem = _problem(self)
        if problem:
            raise ValueError(problem)


def _problem(i: SpeculationInputs) -> str:
    """What is wrong with ``i`` in words (translated), or ``""``."""
    numbers = (*i.link_rtts_ms, i.decode_compute_ms, i.verify_cost_ratio, i.draft_token_ms,
               i.acceptance_length)
    if not all(math.isfinite(x) for x in numbers):
        return translate("SpeculationGain", "Every speculation measurement must be a number; one is missing or infinite.")
    if any(x < 0 for x in i.link_rtts_ms):
        return translate("SpeculationGain", "A link's round trip cannot be negative: measure the links again.")
    if i.decode_compute_ms <= 0:
        return translate("SpeculationGain", "One token's compute must take some time, got {ms} ms: measure the "
                                            "cluster again.").format(ms=f"{i.decode_compute_ms:g}")
    if i.verify_cost_ratio < 1:
        return translate("SpeculationGain", "Verifying several tokens cannot cost less than one token, got a ratio "
                                            "of {ratio}: measure the verify pass again.").format(ratio=f"{i.verify_cost_ratio:g}")
    if i.draft_token_ms < 0:
        return translate("SpeculationGain", "The draft's time per token cannot be negative, got {ms} ms.").format(
            ms=f"{i.draft_token_ms:g}")
    if i.draft_max < 1:
        return translate("SpeculationGain", "Speculation drafts at least one token per pass, got {n}.").format(n=i.draft_max)
    if not 1 <= i.acceptance_length <= i.draft_max + 1:
        return translate("SpeculationGain", "The acceptance length must lie between 1 (no draft accepted) and {most} "
                                            "(every drafted token and the target's own), got {length}.").format(
            most=i.draft_max + 1, length=f"{i.acceptance_length:g}")
    return ""


def step_without(inputs: SpeculationInputs) -> StepCost:
    """One token without speculation: the compute and every link's round trip."""
    return StepCost(host_s=inputs.decode_compute_ms / 1000.0, compute_s=(),
                    rtt_s=tuple(ms / 1000.0 for ms in inputs.link_rtts_ms), transfer_s=())


def verify_pass(inputs: SpeculationInputs) -> StepCost:
    """One speculation pass: drafting ``draft_max`` tokens on the host, then the target's verify
    batch, which crosses every link once like a single token (it yields ``acceptance_length``
    tokens)."""
    host_ms = inputs.decode_compute_ms * inputs.verify_cost_ratio + inputs.draft_max * inputs.draft_token_ms
    return StepCost(host_s=host_ms / 1000.0, compute_s=(),
                    rtt_s=tuple(ms / 1000.0 for ms in inputs.link_rtts_ms), transfer_s=())


def predicted_tokens_per_s(inputs: SpeculationInputs) -> tuple[float, float]:
    """``(tokens/s without, tokens/s with)`` speculation."""
    return step_without(inputs).tokens_per_s, inputs.acceptance_length / verify_pass(inputs).total_s


def predict_gain(inputs: SpeculationInputs) -> float:
    """Predicted tokens/s with speculation over tokens/s without (> 1: speculation is faster)."""
    return inputs.acceptance_length * step_without(inputs).total_s / verify_pass(inputs).total_s


def inputs_from_step(step: StepCost, *, verify_cost_ratio: float, draft_token_ms: float,
                     acceptance_length: float, draft_max: int) -> SpeculationInputs:
    """The inputs for a plan's predicted decode step (:func:`~gui.cluster.planning.cost_model.step_cost`):
    its round trips are the links', everything else (host and device compute, the transfers)
    is the token's compute. Round trips of devices without slots are 0 there and left out."""
    compute_s = step.host_s + sum(step.compute_s) + sum(step.transfer_s)
    return SpeculationInputs(link_rtts_ms=tuple(s * 1000.0 for s in step.rtt_s if s > 0),
                             decode_compute_ms=compute_s * 1000.0, verify_cost_ratio=verify_cost_ratio,
                             draft_token_ms=draft_token_ms, acceptance_length=acceptance_length,
                             draft_max=draft_max)


def verify_cost_ratio(one_pass_ms: float, batch_pass_ms: float, batch: int, rtt_ms: float, tokens: float,
                      decode_compute_ms: float, output_share: float = 0.0) -> float:
    """A verify pass of ``tokens`` tokens over one token's compute (``decode_compute_ms``), from a
    short timed batch: two prompt passes through the cluster, of 1 and of ``batch`` tokens (each
    crossing every link once, ``rtt_ms`` in all), timed after a first pass of the same size has
    built llama.cpp's graph for it.

    Without its round trips the pass of ``batch`` tokens is the verify pass's compute; the pass of
    one token gives the slope for other sizes, taken as linear in between (a pass of a few
    tokens reads the weights once; its arithmetic grows with the tokens). A prompt pass computes
    the logits of its last token only, a verify pass those of every token, so each further token
    adds the output layer once more: ``output_share`` of one token's compute (the output slot's
    share of the bytes a token reads, :attr:`~gui.cluster.llama.model.ModelInfo.active_slot_bytes`,
    as the cost model spreads compute over slots).

    Raises:
        ValueError: a batch of fewer than 2 tokens, no compute, or a share outside 0…1 (in words).
    """
    if batch < 2:
        raise ValueError(translate("SpeculationGain", "The timed batch must hold at least 2 tokens, got {n}.").format(
            n=batch))
    if not 0 <= output_share < 1:
        raise ValueError(translate("SpeculationGain", "The output layer's share of a token's compute must lie "
                                                      "between 0 and 1, got {share}.").format(share=f"{output_share:g}"))
    if not decode_compute_ms > 0:
        raise ValueError(translate("SpeculationGain", "One token's compute must take some time, got {ms} ms: "
                                                      "measure the cluster again.").format(ms=f"{decode_compute_ms:g}"))
    # a pass faster than its round trip is noise: keep a floor rather than a negative compute
    one = max(one_pass_ms - rtt_ms, 1e-3)
    many = max(batch_pass_ms - rtt_ms, one)
    extra = max(1.0, tokens) - batch  # tokens beyond (or short of) the timed batch
    verify_ms = many + extra * (many - one) / (batch - 1) + (max(1.0, tokens) - 1) * output_share * one
    return max(1.0, verify_ms / decode_compute_ms)


def explain_gain(inputs: SpeculationInputs, gain: float) -> str:
    """Why speculation is predicted to gain ``gain`` (:func:`predict_gain`) here, in words
    (translated): what a token costs without it, what a pass costs and yields with it, and
    which side wins."""
    links_ms = sum(inputs.link_rtts_ms)
    verify_ms = inputs.decode_compute_ms * inputs.verify_cost_ratio
    draft_ms = inputs.draft_max * inputs.draft_token_ms
    values = {"gain": f"{gain:.2f}", "links": _ms(links_ms),
              "compute": _ms(inputs.decode_compute_ms), "verify": _ms(verify_ms), "draft": _ms(draft_ms),
              "n_draft": inputs.draft_max, "length": f"{inputs.acceptance_length:.1f}"}
    if inputs.draft_token_ms > 0:
        cost = translate("SpeculationGain", "Without speculation a token costs {compute} ms of compute and {links} ms "
                                            "of round trips, one to each device that holds layers. With it, a pass "
                                            "costs {verify} ms to verify {n_draft} drafted tokens, {draft} ms to draft "
                                            "them and the same {links} ms of round trips once, and yields {length} "
                                            "tokens on average.").format(**values)
    else:  # n-gram look-up: drafting costs no model time (#35)
        cost = translate("SpeculationGain", "Without speculation a token costs {compute} ms of compute and {links} ms "
                                            "of round trips, one to each device that holds layers. With it, a pass "
                                            "costs {verify} ms to verify up to {n_draft} tokens looked up in the text so "
                                            "far and the same {links} ms of round trips once, and yields {length} "
                                            "tokens on average.").format(**values)
    if gain >= 1:
        verdict = translate("SpeculationGain", "Predicted {gain}× as fast: the round trips are paid once for several "
                                               "tokens.")
    elif _main_loss(inputs) == "draft":
        verdict = translate("SpeculationGain", "Predicted {gain}× as fast, so slower: drafting takes longer than the "
                                               "accepted tokens save. A smaller draft model or n-gram lookup may do better.")
    elif _main_loss(inputs) == "acceptance":
        verdict = translate("SpeculationGain", "Predicted {gain}× as fast, so slower: too few drafted tokens are "
                                               "accepted to pay for verifying them. A draft that agrees more often with "
                                               "the model would help.")
    else:
        verdict = translate("SpeculationGain", "Predicted {gain}× as fast, so slower: the links are fast next to the "
                                               "compute, and verifying several tokens costs more compute than the round "
                                               "trips it saves.")
    return cost + " " + verdict.format(**values)


def _main_loss(inputs: SpeculationInputs) -> str:
    """Which cost sinks a losing pass most: ``"draft"`` (the draft's own time), ``"compute"``
    (the verify batch's extra compute) or ``"acceptance"`` (both are small, yet too few tokens
    come back for them)."""
    extra_verify = inputs.decode_compute_ms * (inputs.verify_cost_ratio - 1)
    draft = inputs.draft_max * inputs.draft_token_ms
    token = step_without(inputs).total_s * 1000.0
    if max(extra_verify, draft) < 0.25 * token:
        return "acceptance"
    return "draft" if draft > extra_verify else "compute"


def _ms(value: float) -> str:
    """Milliseconds as people read them: one decimal below 10 ms, whole numbers above."""
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def measured_gain(without_tps: Sequence[float], with_tps: Sequence[float]) -> float:
    """The measured gain of paired runs (each with-run next to a without-run): the median of
    ``with / without`` per pair, so a load that hits one pair hits both of its sides."""
    ratios = [w / n for n, w in zip(without_tps, with_tps, strict=True) if n > 0]
    if not ratios:
        raise ValueError(translate("SpeculationGain", "No measured pair of runs to compare."))
    return statistics.median(ratios)
