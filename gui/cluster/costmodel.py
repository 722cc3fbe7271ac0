"""The predicted time of one decode step (one generated token) for a plan.

The traffic of a token through llama.cpp's RPC backend (``../shared/handbook/llama-cpp.md``,
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

Inputs are plain measurements (:class:`DeviceSpeed`, :class:`LinkSpeed`, :class:`Measurements`),
so the cost model can be tested and used without any network. ``gui.cluster.measure`` produces
the numbers; :func:`measurements_for` looks them up per device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gui.cluster.plan import Device, Plan, PlanError

if TYPE_CHECKING:
    from gui.cluster.model import ModelInfo


@dataclass(frozen=True)
class DeviceSpeed:
    """How long a device computes each layer slot of one model, for one token.

    Attributes:
        slot_s: seconds per slot ``0 … n_layer`` (the last is the output layer).
    """

    slot_s: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "slot_s", tuple(float(x) for x in self.slot_s))
        if any(x < 0 for x in self.slot_s):
            raise ValueError("slot times must not be negative")

    @classmethod
    def uniform(cls, n_layer: int, seconds_per_layer: float, output_s: float | None = None) -> DeviceSpeed:
        """Every block takes ``seconds_per_layer``; the output slot ``output_s`` (default: same)."""
        out = seconds_per_layer if output_s is None else output_s
        return cls((seconds_per_layer,) * n_layer + (out,))

    @classmethod
    def from_bytes(cls, model: ModelInfo, seconds_per_byte: float) -> DeviceSpeed:
        """Time proportional to each slot's weight bytes (a decode step is memory-bound)."""
        return cls(tuple(b * seconds_per_byte for b in model.slot_bytes))


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


def step_cost(plan: Plan, model: ModelInfo, m: Measurements) -> StepCost:
    """The predicted time of one decode step of ``plan`` (see the module docstring)."""
    if plan.n_layer != model.n_layer:
        raise PlanError(f"the plan is for {plan.n_layer} blocks but the model has {model.n_layer}")
    host_speed = m.host_speed(plan.n_slots)
    _check_len(host_speed, plan.n_slots, "host")
    host = m.host_fixed_s + sum(host_speed.slot_s[:plan.host_layers])
    comp, rtt, xfer = [], [], []
    for i, (dev, count) in enumerate(plan.assignments):
        if count == 0:
            comp.append(0.0), rtt.append(0.0), xfer.append(0.0)
            continue
        speed, link = m.speed_of(dev), m.link_of(dev)
        _check_len(speed, plan.n_slots, dev.label)
        slots = plan.slots_of(i)
        comp.append(sum(speed.slot_s[slots.start:slots.stop]))
        rtt.append(link.rtt_s)
        xfer.append(link.transfer_s(hop_bytes(model, model.n_layer in slots)))
    return StepCost(host, tuple(comp), tuple(rtt), tuple(xfer))


def _check_len(speed: DeviceSpeed, n_slots: int, who: str) -> None:
    if len(speed.slot_s) != n_slots:
        raise PlanError(f"the speed of {who} covers {len(speed.slot_s)} slots, the model has {n_slots}")


def predicted_tokens_per_s(plan: Plan, model: ModelInfo, m: Measurements) -> float:
    """Shorthand for ``step_cost(...).tokens_per_s``."""
    return step_cost(plan, model, m).tokens_per_s


def relative_error(predicted: Sequence[float], measured: Sequence[float]) -> list[float]:
    """``(predicted - measured) / measured`` per pair, for reporting how well the model does."""
    return [(p - q) / q for p, q in zip(predicted, measured, strict=True)]
