"""*Fastest* measures speculation with and without, on the cluster it planned, and keeps it only
when it is measured faster (#35).

Whether drafting pays depends on this model, these links and these devices: it wins where the
round trips are a large share of a token and loses where the verify pass is compute-bound. So
:func:`measure_speculation` asks the cluster itself, through a ``serve(speculation)`` it is given
(an async context manager that starts the plan with that speculation and yields the endpoint's
URL; the CLI's starts the real cluster, tests start real llama-servers):

1. **without**: a few decodes give one token's time; prompt passes of 1 and of ``draft_max + 1``
   tokens (prompts given as token ids, nothing cached, each timed after one of its own size has
   built llama.cpp's graph for it) give what verifying a draft costs
   (:func:`~gui.cluster.planning.speculation_gain.verify_cost_ratio`);
2. **a short sample with it** gives the acceptance (``draft_n_accepted`` of llama-server's final
   ``timings``); with the links' measured round trips that is everything the cost model
   (:mod:`gui.cluster.planning.speculation_gain`) needs, so the gain is **predicted** here;
3. **with**: as many decodes as without, the same prompt; the **measured** gain is the median of
   the paired ratios (:func:`~gui.cluster.planning.speculation_gain.measured_gain`).

:meth:`SpeculationTrial.decision` keeps the speculation only when the measured gain reaches
:data:`MIN_MEASURED_GAIN` and drafts were accepted, and says why in words either way.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from agent.i18n import translate
from gui.cluster.planning.speculation import DRAFT, Speculation
from gui.cluster.planning.speculation_gain import (
    SpeculationInputs, explain_gain, measured_gain, predict_gain, verify_cost_ratio,
)

#: Speculation is kept only when measured at least this much faster: a smaller win is within what
#: a few runs vary on a busy PC, and the goal is never to be slower than none (#35).
MIN_MEASURED_GAIN = 1.03
#: Decodes per side, and tokens per decode.
DEFAULT_RUNS = 3
DEFAULT_TOKENS = 48
#: What is decoded: a rewrite, whose reply repeats its prompt (what n-gram look-up drafts from)
#: as much as ordinary chat does.
TRIAL_PROMPT = ("Rewrite this list, one item per line, in the same order: apples, pears, plums, cherries, "
                "apples, pears, plums, cherries, apples, pears, plums, cherries.\n")
#: Token ids of the verify pass's prompt: ordinary ids that every vocabulary has.
_VERIFY_FIRST_ID = 16


def keeps_speculation(acceptance_length: float, measured_gain: float) -> bool:
    """herd's rule (#35): speculation stays on only when its sample accepted drafts and it was
    measured at least :data:`MIN_MEASURED_GAIN` times as fast as none. (With nothing accepted it
    only adds work: a measured win is then the noise of a busy PC.)"""
    return acceptance_length > 1.0 and measured_gain >= MIN_MEASURED_GAIN


class TrialError(RuntimeError):
    """The trial could not measure: the message says what failed, in words."""


@dataclass(frozen=True)
class DecodeSample:
    """One decode as llama-server timed it.

    Attributes:
        tokens: tokens generated (``predicted_n``).
        tokens_per_s: its speed (``predicted_per_second``).
        drafted: tokens drafted (``draft_n``; 0 without speculation).
        accepted: drafted tokens accepted (``draft_n_accepted``).
    """

    tokens: int
    tokens_per_s: float
    drafted: int = 0
    accepted: int = 0


async def _decode(client: httpx.AsyncClient, url: str, tokens: int) -> DecodeSample:
    body = {"prompt": TRIAL_PROMPT, "n_predict": tokens, "temperature": 0.0, "cache_prompt": False}
    timings = await _timings(client, url, body)
    return DecodeSample(int(timings.get("predicted_n", 0)), float(timings.get("predicted_per_second", 0.0)),
                        int(timings.get("draft_n", 0) or 0), int(timings.get("draft_n_accepted", 0) or 0))


async def _pass_ms(client: httpx.AsyncClient, url: str, n_tokens: int) -> float:
    """The time of one prompt pass over ``n_tokens`` new tokens, timed after a first pass of the
    same size (llama.cpp builds and allocates the graph of a new batch size with extra round
    trips); the fastest of three: one slow pass on a busy PC once made a prediction 3x too low."""
    body = {"prompt": list(range(_VERIFY_FIRST_ID, _VERIFY_FIRST_ID + n_tokens)), "n_predict": 1,
            "temperature": 0.0, "cache_prompt": False}
    return min([float((await _timings(client, url, body))["prompt_ms"]) for _ in range(3)])


async def _timings(client: httpx.AsyncClient, url: str, body: dict) -> dict:
    try:
        r = await client.post(url + "/completion", json=body)
    except httpx.HTTPError as exc:
        raise TrialError(translate("Speculation", "the trial request to {url} failed ({why})").format(
            url=url, why=type(exc).__name__)) from None
    timings = r.json().get("timings") if r.status_code == 200 else None
    if not isinstance(timings, dict) or "prompt_ms" not in timings:
        raise TrialError(translate("Speculation", "{url} answered the trial request with HTTP {status} and "
                                                  "no timings").format(url=url, status=r.status_code))
    return timings


def acceptance_length(sample: DecodeSample, draft_max: int) -> float:
    """Mean tokens per verify pass, the target's own included: every decode step yields one token
    of the target's plus the drafts it accepted, so ``steps = tokens - accepted``."""
    steps = max(1, sample.tokens - sample.accepted)
    return min(float(draft_max + 1), max(1.0, sample.tokens / steps))


@dataclass(frozen=True)
class SpeculationTrial:
    """What :func:`measure_speculation` measured, and what the cost model predicted from it.

    Attributes:
        speculation: what was tried.
        without, with_: the decodes of each side, in the same order.
        one_pass_ms, verify_ms: one prompt pass over 1 token and over ``draft_max + 1`` tokens,
            without speculation.
        inputs: the cost model's inputs (:class:`SpeculationInputs`).
        predicted_gain: the cost model's prediction, made before the decodes with speculation.
        measured_gain: the median of the paired ratios with / without.
    """

    speculation: Speculation
    without: tuple[DecodeSample, ...]
    with_: tuple[DecodeSample, ...]
    one_pass_ms: float
    verify_ms: float
    inputs: SpeculationInputs
    predicted_gain: float
    measured_gain: float

    @property
    def tokens_per_s(self) -> tuple[float, float]:
        """The median tokens/s without and with."""
        return (statistics.median(s.tokens_per_s for s in self.without),
                statistics.median(s.tokens_per_s for s in self.with_))

    def decision(self) -> Speculation:
        """The speculation to plan: the one tried when it was measured at least
        :data:`MIN_MEASURED_GAIN` times as fast and its sample accepted drafts, else none — with
        the prediction and the measurement in words. (With nothing accepted it only adds work: a
        measured win is then the noise of a busy PC; seen with n-gram look-up at 3 and 10 ms.)"""
        slow, fast = self.tokens_per_s
        measured = translate("Speculation", "measured {gain}× ({without} → {with_} tokens/s)").format(
            gain=f"{self.measured_gain:.2f}", without=f"{slow:.1f}", with_=f"{fast:.1f}")
        why = explain_gain(self.inputs, self.predicted_gain)
        if keeps_speculation(self.inputs.acceptance_length, self.measured_gain):
            return self.speculation.with_prediction(self.predicted_gain, translate(
                "Speculation", "{measured}: faster, so it is on. {why}").format(measured=measured, why=why))
        if self.inputs.acceptance_length <= 1.0:
            return Speculation().with_prediction(self.predicted_gain, translate(
                "Speculation", "{kind}: {measured}, but no drafted token was accepted, so it stays off. {why}").format(
                kind=self.speculation.label(), measured=measured, why=why))
        return Speculation().with_prediction(self.predicted_gain, translate(
            "Speculation", "{kind}: {measured}, not faster, so it stays off. {why}").format(
            kind=self.speculation.label(), measured=measured, why=why))


async def measure_speculation(serve: Callable[[Speculation], contextlib.AbstractAsyncContextManager],
                              speculation: Speculation, *, rtts_ms: Sequence[float], draft_share: float = 0.0,
                              output_share: float = 0.0, runs: int = DEFAULT_RUNS, tokens: int = DEFAULT_TOKENS,
                              timeout: float = 300.0,
                              on_step: Callable[[int, int], None] | None = None) -> SpeculationTrial:
    """Measure ``speculation`` against none on the cluster ``serve`` starts (see the module
    docstring). ``rtts_ms``: the measured round trip of each RPC device that holds layers;
    ``draft_share``: the draft's weights over the target's (its time per drafted token is that
    share of a token's compute: decode reads every weight once); ``output_share``: the output
    layer's share of a token's compute (a verify pass computes it for every token).
    ``on_step(done, total)``, when given, is told after each timed request (a trial of a large
    model over slow links takes minutes: the user sees how far it is).

    Raises:
        TrialError: a request failed or came back without timings (in words).
    """
    total, done = 2 * runs + 4, 0

    async def step(measurement):
        nonlocal done
        value = await measurement
        done += 1
        if on_step is not None:
            on_step(done, total)
        return value

    async with httpx.AsyncClient(timeout=timeout) as client:
        async with serve(Speculation()) as url:
            await step(_decode(client, url, 4))  # warm-up
            without = [await step(_decode(client, url, tokens)) for _ in range(runs)]
            one_ms = await step(_pass_ms(client, url, 1))
            verify_ms = await step(_pass_ms(client, url, speculation.draft_max + 1))
        async with serve(speculation) as url:
            sample = await step(_decode(client, url, tokens))  # the short sample: the acceptance
            inputs = _inputs(speculation, without, sample, (one_ms, verify_ms), rtts_ms, draft_share, output_share)
            predicted = predict_gain(inputs)
            with_ = [await step(_decode(client, url, tokens)) for _ in range(runs)]
    gain = measured_gain([s.tokens_per_s for s in without], [s.tokens_per_s for s in with_])
    return SpeculationTrial(speculation, tuple(without), tuple(with_), one_ms, verify_ms, inputs, predicted, gain)


def _inputs(speculation: Speculation, without: Sequence[DecodeSample], sample: DecodeSample,
            passes_ms: tuple[float, float], rtts_ms: Sequence[float], draft_share: float,
            output_share: float) -> SpeculationInputs:
    """The cost model's inputs from what was measured: a token's compute is its measured time
    less the links' round trips; the verify pass's, from the two timed prompt passes."""
    links = sum(rtts_ms)
    token_ms = 1000.0 / statistics.median(max(1e-9, s.tokens_per_s) for s in without)
    compute = max(token_ms - links, 0.05 * token_ms)
    draft_max = speculation.draft_max
    one_ms, batch_ms = passes_ms
    ratio = verify_cost_ratio(one_ms, batch_ms, draft_max + 1, links, draft_max + 1, compute,
                              min(max(output_share, 0.0), 0.99))
    return SpeculationInputs(link_rtts_ms=tuple(rtts_ms), decode_compute_ms=compute, verify_cost_ratio=ratio,
                             draft_token_ms=compute * draft_share if speculation.kind == DRAFT else 0.0,
                             acceptance_length=acceptance_length(sample, draft_max), draft_max=draft_max)
