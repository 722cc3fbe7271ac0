"""The predicted time of one decode step (one generated token) for a plan.

The traffic of a token through llama.cpp's RPC backend (``docs/llama-cpp.md``,
"Per-token traffic"): the host embeds the token and runs its own leading layers; then for each
device that holds layers, in order, it sends the activation (one-way ``SET_TENSOR``), starts the
graph (one-way ``GRAPH_COMPUTE``) and fetches the result (a ``GET_TENSOR`` round trip). Devices
never talk to each other: RPC→RPC goes through the host. So::

    step = host_fixed + Σ host slot compute
         + Σ over devices holding ≥ 1 slot:
               Σ its slot compute
             + one link round trip                     (remote devices only)
             + (bytes in + bytes out) ÷ link throughput

Bytes in are the hidden state (``n_embd`` f32); bytes out are the hidden state too, except on
the device holding the output layer, which returns the logits (``n_vocab`` f32) — on a slow link
that is what makes the output layer's placement matter.

**Experts in RAM** (:attr:`Plan.expert_homes`) add to the device holding the blocks, for each
of its blocks whose experts live on the other device of its worker, the crossings between the two
devices (:func:`expert_crossings`): those tensors go through the master, not across the worker
(measured by ``bench/experts_traffic.py``, ``docs/llama-cpp.md`` "Per-token traffic"), each
crossing costing two round trips and its bytes both ways. Over Wi-Fi that is the larger part of a
token's time: ten round trips per block.

**Prompt processing** (:func:`prompt_cost`) runs the prompt through the same chain in batches of
``n_ubatch`` tokens (llama.cpp's micro-batch, 512 by default): per micro-batch each device
computes its slots for all of its tokens and, when remote, receives and returns the hidden
states of the whole micro-batch (``n_ubatch × n_embd × 4`` bytes each way) and pays one round
trip. Prompt compute is measured on its own (:attr:`DeviceSpeed.prompt_slot_s`, seconds per
prompt token per slot): a micro-batch is a matrix-matrix product, far faster per token than a
decode step. When llama.cpp runs the devices as a pipeline (every slot offloaded, two or more
devices: ``pipeline parallelism enabled`` in its log) the micro-batches of one batch
(``n_batch``, 2048) overlap: device *k* works on micro-batch *i* while device *k+1* works on
*i-1*, so a batch takes its slowest device once per micro-batch plus the others once. A prompt
of one micro-batch (≤ 512 tokens) gains nothing from the pipeline. The time to first token is
the prompt's time: llama-server samples the first token from the prompt's last logits.

Inputs are plain measurements (:class:`DeviceSpeed`, :class:`LinkSpeed`, :class:`Measurements`),
so the cost model can be tested and used without any network. ``gui.cluster.planning.measure`` produces
the numbers; :func:`measurements_for` looks them up per device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gui.cluster.llama.model import DEFAULT_UBATCH
from gui.cluster.planning.plan.assignment import Plan
from gui.cluster.planning.plan.device import Device
from gui.cluster.planning.plan.layer_map import PlanError

if TYPE_CHECKING:
    from gui.cluster.llama.model import ModelInfo


@dataclass(frozen=True)
class DeviceSpeed:
    """How long a device computes each layer slot of one model, for one token.

    Attributes:
        slot_s: seconds per slot ``0 … n_layer`` (the last is the output layer).
        prompt_slot_s: seconds per *prompt* token per slot, when measured (empty: unknown).
    """

    slot_s: tuple[float, ...]
    prompt_slot_s: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "slot_s", tuple(float(x) for x in self.slot_s))
        object.__setattr__(self, "prompt_slot_s", tuple(float(x) for x in self.prompt_slot_s))
        if any(x < 0 for x in self.slot_s + self.prompt_slot_s):
            raise ValueError("slot times must not be negative")

    @classmethod
    def uniform(cls, n_layer: int, seconds_per_layer: float, output_s: float | None = None) -> DeviceSpeed:
        """Every block takes ``seconds_per_layer``; the output slot ``output_s`` (default: same)."""
        out = seconds_per_layer if output_s is None else output_s
        return cls((seconds_per_layer,) * n_layer + (out,))

    @classmethod
    def from_bytes(cls, model: ModelInfo, seconds_per_byte: float,
                   prompt_seconds_per_byte: float | None = None) -> DeviceSpeed:
        """Time proportional to the weight bytes a token reads in each slot (a decode step is
        memory-bound; a prompt token's share of a micro-batch follows them too). Of a
        mixture-of-experts model that is the attention, the shared tensors and the routed share
        of the experts (:attr:`~gui.cluster.llama.model.ModelInfo.active_slot_bytes`), not all of them:
        counting every expert made a 128-expert model look up to 30× slower than it is."""
        read = model.active_slot_bytes
        prompt = () if prompt_seconds_per_byte is None else tuple(b * prompt_seconds_per_byte for b in read)
        return cls(tuple(b * seconds_per_byte for b in read), prompt)


@dataclass(frozen=True)
class LinkSpeed:
    """The link between the master and one node.

    Attributes:
        rtt_s: request/reply round trip in seconds (median).
        bytes_per_s: throughput in bytes per second; None or 0 = not measured (transfer free).
    """

    rtt_s: float
    bytes_per_s: float | None = None

    def transfer_s(self, nbytes: int) -> float:
        """Seconds to move ``nbytes`` over the link (0 when throughput is unknown)."""
        return nbytes / self.bytes_per_s if self.bytes_per_s else 0.0


#: A local GPU of the master: no network hop.
LOCAL_LINK = LinkSpeed(0.0, None)


@dataclass(frozen=True)
class Measurements:
    """Everything the cost model needs, keyed so callers can use what they have.

    Attributes:
        compute: per device, keyed by ``Device.key`` (``node_id/index``), node id or endpoint.
        links: per node, keyed by node id or endpoint (one link serves all of a node's devices).
        host: the master CPU's speed for the slots it keeps.
        host_fixed_s: the host's own work per token whatever the split (embedding lookup,
            sampling, bookkeeping).
    """

    compute: Mapping[str, DeviceSpeed]
    links: Mapping[str, LinkSpeed] = field(default_factory=dict)
    host: DeviceSpeed | None = None
    host_fixed_s: float = 0.0

    def speed_of(self, device: Device) -> DeviceSpeed:
        """The device's :class:`DeviceSpeed`, or :class:`PlanError` naming the device."""
        for key in (device.key, device.node_id, device.endpoint):
            if key is not None and key in self.compute:
                return self.compute[key]
        raise PlanError(f"no compute measurement for {device.label} ({device.key})")

    def link_of(self, device: Device) -> LinkSpeed:
        """The device's link (:data:`LOCAL_LINK` for a local GPU), or :class:`PlanError`."""
        if device.kind == "gpu":
            return self.links.get(device.key, LOCAL_LINK)
        for key in (device.node_id, device.endpoint):
            if key is not None and key in self.links:
                return self.links[key]
        raise PlanError(f"no link measurement for {device.label} ({device.endpoint})")

    def host_speed(self, n_slots: int) -> DeviceSpeed:
        """The host's speed; without a measurement the host is assumed too slow to use."""
        return self.host if self.host is not None else DeviceSpeed((float("inf"),) * n_slots)


@dataclass(frozen=True)
class StepCost:
    """One decode step, broken down.

    Attributes:
        host_s: host compute (fixed work + its slots).
        compute_s: device compute, per assignment (0 for devices without slots).
        rtt_s: link round trips, per assignment.
        transfer_s: activation/logit transfer, per assignment.
    """

    host_s: float
    compute_s: tuple[float, ...]
    rtt_s: tuple[float, ...]
    transfer_s: tuple[float, ...]

    @property
    def total_s(self) -> float:
        """Seconds per generated token."""
        return self.host_s + sum(self.compute_s) + sum(self.rtt_s) + sum(self.transfer_s)

    @property
    def tokens_per_s(self) -> float:
        """Predicted decode speed."""
        return 1.0 / self.total_s if self.total_s > 0 else float("inf")


#: Tensors that cross between a block's device and its experts' home per token, for qwen3moe at
#: the pinned build (``bench/experts_traffic.py``): into the experts' device the block's residual
#: input (``ffn_inp``), the normed hidden state (``ffn_norm``), the router's chosen experts
#: (``ffn_moe_topk``) and their weights; back the block's output (``l_out``, or the last block's
#: ``norm``). Three are hidden states (``n_embd`` f32), two hold ``n_expert_used`` numbers.
EXPERT_CROSSINGS_PER_BLOCK = 5
EXPERT_HIDDEN_CROSSINGS = 3
#: Round trips per crossing: the worker refuses the server-side COPY_TENSOR (neither a GPU's nor
#: the CPU's buffer copies from the other kind), so llama.cpp fetches the tensor (GET_TENSOR) and
#: sends it back (a one-way SET_TENSOR).
ROUND_TRIPS_PER_CROSSING = 2


def expert_crossings(model: ModelInfo, blocks: int, tokens: int = 1) -> tuple[int, int]:
    """``(round trips, bytes each way)`` that ``blocks`` blocks with their experts on another
    device of the same worker add to one pass of ``tokens`` tokens (a decode step: 1; a prompt
    micro-batch: its tokens): the tensors cross through the master (constants above)."""
    per_block = (EXPERT_HIDDEN_CROSSINGS * model.activation_bytes
                 + (EXPERT_CROSSINGS_PER_BLOCK - EXPERT_HIDDEN_CROSSINGS) * model.expert_used_count * 4)
    return blocks * EXPERT_CROSSINGS_PER_BLOCK * ROUND_TRIPS_PER_CROSSING, blocks * tokens * per_block


def _expert_link_s(plan: Plan, model: ModelInfo, m: Measurements, tokens: int = 1) -> dict[int, tuple[float, float]]:
    """``(round-trip seconds, transfer seconds)`` that each assignment holding blocks with their
    experts elsewhere adds to a pass of ``tokens`` tokens, by assignment index."""
    out: dict[int, tuple[float, float]] = {}
    for h, _, blocks in plan.expert_moves():
        link = m.link_of(plan.assignments[h].device)
        trips, each_way = expert_crossings(model, len(blocks), tokens)
        rtt, xfer = out.get(h, (0.0, 0.0))
        out[h] = (rtt + trips * link.rtt_s, xfer + link.transfer_s(2 * each_way))
    return out


def hop_bytes(model: ModelInfo, holds_output: bool) -> int:
    """Bytes moved per token for one device hop: hidden state in, hidden state or logits out."""
    out = model.vocab_size * 4 if holds_output else model.activation_bytes
    return model.activation_bytes + out


def segment_s(model: ModelInfo, speed: DeviceSpeed, link: LinkSpeed, first: int, count: int) -> float:
    """Seconds a device adds to a step when it holds ``count`` slots from ``first`` (0 if none)."""
    if count == 0:
        return 0.0
    holds_output = first + count == model.n_layer + 1
    return sum(speed.slot_s[first:first + count]) + link.rtt_s + link.transfer_s(hop_bytes(model, holds_output))


def expert_share(model: ModelInfo) -> tuple[float, ...]:
    """Per slot, the share of a decode step's reading that is experts (``expert_used_count``
    of ``expert_count`` of the expert bytes, of the bytes a token reads): the part of a slot's
    time that moves with the experts to their home (:attr:`Plan.expert_homes`)."""
    n = model.n_layer + 1
    if not model.is_moe:
        return (0.0,) * n
    used = min(1.0, model.expert_used_count / model.expert_count)
    active = model.active_slot_bytes
    experts = model.expert_slot_bytes
    return tuple((experts[s] * used / active[s]) if s < len(experts) and active[s] else 0.0 for s in range(n))


def step_cost(plan: Plan, model: ModelInfo, m: Measurements) -> StepCost:
    """The predicted time of one decode step of ``plan`` (see the module docstring).

    A block whose experts live on another device of its worker (:attr:`Plan.expert_homes`) is
    timed in two parts: its experts' share (:func:`expert_share`) at the home's speed, the rest
    at its own device's; the tensors that cross between them go through the master
    (:func:`expert_crossings`: round trips and bytes on the worker's link)."""
    if plan.n_layer != model.n_layer:
        raise PlanError(f"the plan is for {plan.n_layer} blocks but the model has {model.n_layer}")
    host_speed = m.host_speed(plan.n_slots)
    _check_len(host_speed, plan.n_slots, "host")
    host = m.host_fixed_s + sum(host_speed.slot_s[:plan.host_layers])
    experts = _expert_link_s(plan, model, m)
    comp, rtt, xfer = [], [], []
    for i, (dev, count) in enumerate(plan.assignments):
        if count == 0:
            comp.append(0.0), rtt.append(0.0), xfer.append(0.0)
            continue
        speed, link = m.speed_of(dev), m.link_of(dev)
        _check_len(speed, plan.n_slots, dev.label)
        slots = plan.slots_of(i)
        comp.append(sum(speed.slot_s[slots.start:slots.stop]))
        extra_rtt, extra_xfer = experts.get(i, (0.0, 0.0))
        rtt.append(link.rtt_s + extra_rtt)
        xfer.append(link.transfer_s(hop_bytes(model, model.n_layer in slots)) + extra_xfer)
    if plan.expert_homes:
        share = expert_share(model)
        for h, k, blocks in plan.expert_moves():
            there = m.speed_of(plan.assignments[k].device)
            _check_len(there, plan.n_slots, plan.assignments[k].device.label)
            here = m.speed_of(plan.assignments[h].device)
            comp[h] -= sum(here.slot_s[b] * share[b] for b in blocks)
            comp[k] += sum(there.slot_s[b] * share[b] for b in blocks)
    return StepCost(host, tuple(comp), tuple(rtt), tuple(xfer))


def _check_len(speed: DeviceSpeed, n_slots: int, who: str) -> None:
    if len(speed.slot_s) != n_slots:
        raise PlanError(f"the speed of {who} covers {len(speed.slot_s)} slots, the model has {n_slots}")


def predicted_tokens_per_s(plan: Plan, model: ModelInfo, m: Measurements) -> float:
    """Shorthand for ``step_cost(...).tokens_per_s``."""
    return step_cost(plan, model, m).tokens_per_s


#: The prompt length the time to first token is predicted for, unless told otherwise.
DEFAULT_PROMPT = 512
#: llama.cpp's defaults: tokens per micro-batch (``-ub``) and per batch (``-b``).
N_UBATCH = DEFAULT_UBATCH
N_BATCH = 2048


def prompt_hop_bytes(model: ModelInfo, tokens: int, holds_output: bool) -> int:
    """Bytes one device hop moves for a micro-batch of ``tokens`` prompt tokens: their hidden
    states in, and out again (``tokens × n_embd × 4`` each way) — or, from the device with the
    output layer, the logits of the one token that is sampled."""
    out = model.vocab_size * 4 if holds_output else tokens * model.activation_bytes
    return tokens * model.activation_bytes + out


@dataclass(frozen=True)
class PromptCost:
    """A prompt's way through a plan, broken down.

    Attributes:
        n_prompt: prompt tokens.
        ubatches: tokens of each micro-batch, in order.
        batches: micro-batches per batch (``n_batch`` tokens), in order.
        host_s: the host's seconds per prompt token (its slots), times the prompt.
        stage_s: per assignment, seconds for each micro-batch (``[ub][assignment]``): compute,
            round trip and the hidden states over the link.
        pipeline: whether llama.cpp overlaps the micro-batches across devices.
    """

    n_prompt: int
    ubatches: tuple[int, ...]
    batches: tuple[int, ...]
    host_s: float
    stage_s: tuple[tuple[float, ...], ...]
    pipeline: bool

    @property
    def total_s(self) -> float:
        """Seconds to process the prompt: the time to the first generated token."""
        total, i = self.host_s, 0
        for n_ub in self.batches:
            stages = self.stage_s[i:i + n_ub]
            i += n_ub
            if self.pipeline and n_ub > 1:
                # the batch's micro-batches flow through the devices one behind the other: the
                # first passes every device, each further one adds the slowest device's time
                total += sum(stages[0]) + sum(max(s) for s in stages[1:])
            else:
                total += sum(sum(s) for s in stages)
        return total

    @property
    def tokens_per_s(self) -> float:
        """Predicted prompt speed."""
        return self.n_prompt / self.total_s if self.total_s > 0 else float("inf")


def _micro_batches(n_prompt: int, n_ubatch: int, n_batch: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    ubs, batches = [], []
    left = n_prompt
    while left > 0:
        b = min(left, n_batch)
        left -= b
        k = 0
        while b > 0:
            ubs.append(min(b, n_ubatch))
            b -= ubs[-1]
            k += 1
        batches.append(k)
    return tuple(ubs), tuple(batches)


def prompt_segment_s(model: ModelInfo, speed: DeviceSpeed, link: LinkSpeed, first: int, count: int,
                     tokens: int) -> float:
    """Seconds a device adds to one micro-batch of ``tokens`` when it holds ``count`` slots from
    ``first`` (0 if none); :class:`PlanError` when its prompt speed was not measured."""
    if count == 0:
        return 0.0
    if len(speed.prompt_slot_s) != len(speed.slot_s):
        raise PlanError("no prompt-speed measurement for a device (measure the nodes again)")
    holds_output = first + count == model.n_layer + 1
    return (tokens * sum(speed.prompt_slot_s[first:first + count]) + link.rtt_s
            + link.transfer_s(prompt_hop_bytes(model, tokens, holds_output)))


def prompt_cost(plan: Plan, model: ModelInfo, m: Measurements, n_prompt: int = DEFAULT_PROMPT,
                n_ubatch: int = N_UBATCH, n_batch: int = N_BATCH) -> PromptCost:
    """The predicted time of processing an ``n_prompt``-token prompt with ``plan`` (see the
    module docstring); :class:`PlanError` when a device used has no prompt measurement."""
    from gui.cluster.planning.plan.compute_buffer import pipeline_parallel

    if plan.n_layer != model.n_layer:
        raise PlanError(f"the plan is for {plan.n_layer} blocks but the model has {model.n_layer}")
    if n_prompt < 1:
        raise PlanError(f"a prompt has at least one token, got {n_prompt}")
    ubs, batches = _micro_batches(n_prompt, max(1, n_ubatch), max(1, n_batch))
    host = m.host_speed(plan.n_slots)
    host_s = 0.0
    if plan.host_layers:
        if len(host.prompt_slot_s) != plan.n_slots:
            raise PlanError("no prompt-speed measurement for the host (measure it again)")
        host_s = n_prompt * sum(host.prompt_slot_s[:plan.host_layers])
    stages = []
    for u in ubs:
        experts = _expert_link_s(plan, model, m, u)
        row = []
        for i, (dev, count) in enumerate(plan.assignments):
            if count == 0:
                row.append(0.0)
                continue
            speed = m.speed_of(dev)
            _check_len(speed, plan.n_slots, dev.label)
            row.append(prompt_segment_s(model, speed, m.link_of(dev), plan.slots_of(i).start, count, u)
                       + sum(experts.get(i, (0.0, 0.0))))
        stages.append(tuple(row))
    return PromptCost(n_prompt, ubs, batches, host_s, tuple(stages), pipeline_parallel(plan))


def relative_error(predicted: Sequence[float], measured: Sequence[float]) -> list[float]:
    """``(predicted - measured) / measured`` per pair, for reporting how well the model does."""
    return [(p - q) / q for p, q in zip(predicted, measured, strict=True)]
