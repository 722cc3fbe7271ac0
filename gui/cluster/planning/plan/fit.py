"""The memory fit: what each device (and the host) needs for a plan against what it has free
(:class:`DeviceFit`, :func:`estimate`), and the devices that do not fit (:func:`misfits`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from agent.i18n import translate
from gui.cluster.llama.model import CacheShape
from gui.cluster.planning.plan.assignment import Plan
from gui.cluster.planning.plan.compute_buffer import compute_buffer_bytes, pipeline_parallel
from gui.cluster.planning.plan.device import Device, MiB, headroom_bytes, ram_machine
from gui.cluster.planning.plan.layer_map import PlanError

if TYPE_CHECKING:  # only for annotations; keeps this module importable without gguf
    from gui.cluster.llama.model import ModelInfo


@dataclass(frozen=True)
class DeviceFit:
    """The memory a device (or the host) needs for a plan, against what it has free.

    Attributes:
        device: the device, or None for the master's CPU (the host).
        slots: the slots it holds.
        weights_bytes: bytes of its weights.
        kv_bytes: bytes of its KV cache at the planned context.
        compute_bytes: margin for its compute buffer.
        free_bytes: what it reports free; None when unknown (then it is assumed to fit).
        shared_bytes: what the plan's other devices on the same computer need from the same
            RAM (:func:`ram_machine`); it must fit in ``free_bytes`` too.
        draft_bytes: of the needs above, what the draft model takes (its weights, KV cache and
            compute buffer) on the device that runs it, the host (#35); 0 without a draft.
    """

    device: Device | None
    slots: range
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    free_bytes: int | None
    shared_bytes: int = 0
    draft_bytes: int = 0

    @property
    def is_host(self) -> bool:
        return self.device is None

    @property
    def label(self) -> str:
        return translate("Plan", "host CPU") if self.device is None else self.device.label

    @property
    def need_bytes(self) -> int:
        """Weights + KV cache + compute margin."""
        return self.weights_bytes + self.kv_bytes + self.compute_bytes

    @property
    def headroom_bytes(self) -> int:
        """Free memory the plan leaves on the device (:func:`headroom_bytes`); none on a device
        that holds no slot (it is not used at all)."""
        return headroom_bytes(self.device) if len(self.slots) else 0

    @property
    def fits(self) -> bool:
        return self.short_by_bytes == 0

    @property
    def short_by_bytes(self) -> int:
        """How much more free memory it would need (0 when it fits), headroom and the same
        computer's other devices included."""
        if self.free_bytes is None:
            return 0
        return max(0, self.need_bytes + self.headroom_bytes + self.shared_bytes - self.free_bytes)

    def describe(self) -> str:
        """One human line: ``gaming-pc CPU: needs 812.0 MiB of 1024.0 MiB free — fits``."""
        # in the user's language (see agent.i18n); the numbers stay as they are
        have = (translate("Plan", "unknown") if self.free_bytes is None
                else f"{self.free_bytes / MiB:.1f} MiB")
        verdict = (translate("Plan", "fits") if self.fits else
                   translate("Plan", "short by {size}").format(size=f"{self.short_by_bytes / MiB:.1f} MiB"))
        if self.draft_bytes:
            return translate("Plan", "{device}: needs {need} (of which the draft model {draft}) of {free} free "
                                     "— {verdict}").format(
                device=self.label, need=f"{self.need_bytes / MiB:.1f} MiB",
                draft=f"{self.draft_bytes / MiB:.1f} MiB", free=have, verdict=verdict)
        if self.shared_bytes:
            return translate("Plan", "{device}: needs {need}, and the other devices on the same computer "
                                     "{shared}, of {free} free — {verdict}").format(
                device=self.label, need=f"{self.need_bytes / MiB:.1f} MiB",
                shared=f"{self.shared_bytes / MiB:.1f} MiB", free=have, verdict=verdict)
        if self.headroom_bytes:
            return translate("Plan", "{device}: needs {need} (and keeps {headroom} free) of {free} free — "
                                     "{verdict}").format(
                device=self.label, need=f"{self.need_bytes / MiB:.1f} MiB",
                headroom=f"{self.headroom_bytes / MiB:.0f} MiB", free=have, verdict=verdict)
        return translate("Plan", "{device}: needs {need} of {free} free — {verdict}").format(
            device=self.label, need=f"{self.need_bytes / MiB:.1f} MiB", free=have, verdict=verdict)


def estimate(plan: Plan, model: ModelInfo, ctx: int | CacheShape, host_free_bytes: int | None = None,
             n_ubatch: int | None = None, draft: ModelInfo | None = None) -> list[DeviceFit]:
    """Memory needs of every device of ``plan`` at context ``ctx``, then the host's as last entry.

    ``ctx`` is a context size (llama-server's defaults for the rest), or a
    :class:`~gui.cluster.llama.model.CacheShape` read from the server options
    (:meth:`~gui.cluster.llama.server_command.ServerOptions.cache_shape`: ``-np``, ``-ub``,
    ``--swa-full``…). ``n_ubatch`` overrides the shape's micro-batch.

    Per device: the bytes of its slots, the f16 KV cache of its blocks at ``ctx`` tokens, and
    :func:`compute_buffer_bytes` (for devices that hold at least one slot), against its
    ``free_bytes`` (with more room for inputs when llama.cpp will run the devices as a pipeline,
    :func:`pipeline_parallel`). The host (``device=None``) keeps the token embeddings and its leading slots;
    its free memory is ``host_free_bytes`` (None: unknown, assumed to fit).

    ``draft`` is the speculation's draft model (#35): llama-server runs it on the host (herd
    passes ``-ngld 0 -devd none``) with a context of its own as large as the target's, so the
    host also needs its weights, its KV cache at the same shape and its compute buffer
    (:func:`_with_draft`).
    """
    if plan.n_layer != model.n_layer:
        raise PlanError(f"the plan is for {plan.n_layer} blocks but the model has {model.n_layer}")
    shape = CacheShape.of(ctx)
    if n_ubatch is not None:
        shape = replace(shape, ubatch=n_ubatch)
    if shape.ctx < 1:
        raise PlanError(f"context length must be positive, got {shape.ctx}")
    ctx, n_ubatch = shape.ctx, shape.ubatch
    pipeline = pipeline_parallel(plan)
    out: list[DeviceFit] = []
    for i, (dev, count) in enumerate(plan.assignments):
        slots = plan.slots_of(i)
        out.append(DeviceFit(
            device=dev, slots=slots,
            weights_bytes=model.block_bytes(slots.start, count),
            kv_bytes=model.kv_bytes(shape, slots),
            compute_bytes=compute_buffer_bytes(model, shape, slots.start < model.n_layer, model.n_layer in slots,
                                               n_ubatch, pipeline, shape.sequences, first=slots.start == 0,
                                               slots=slots) if count else 0,
            free_bytes=dev.free_bytes))
    host = plan.host_slots()
    weights = model.input_bytes + model.block_bytes(0, plan.host_layers)
    if model.n_layer in host:
        weights -= model.output_duplicate_bytes  # the host's own token_embd is reused
    out.append(DeviceFit(device=None, slots=host, weights_bytes=weights,
                         kv_bytes=model.kv_bytes(shape, host),
                         compute_bytes=compute_buffer_bytes(model, shape, plan.host_layers > 0,
                                                            model.n_layer in host, n_ubatch, pipeline,
                                                            shape.sequences, host=True),
                         free_bytes=host_free_bytes))
    if draft is not None:
        out[-1] = _with_draft(out[-1], draft, shape)
    return _share_ram(_move_experts(plan, model, out, ctx, n_ubatch))


def _with_draft(host: DeviceFit, draft: ModelInfo, shape: CacheShape) -> DeviceFit:
    """``host`` with the draft model's memory on it: all its weights, its KV cache for every
    block at ``shape`` (llama-server gives the draft the target's context; seen at ``-lv 4``:
    ``llama_kv_cache: CPU KV buffer size`` once per model) and the compute buffer of a model
    that runs whole on the host."""
    blocks = range(draft.n_slots)
    weights = draft.file_bytes
    kv = draft.kv_bytes(shape, blocks)
    compute = compute_buffer_bytes(draft, shape, True, True, shape.ubatch, False, shape.sequences, host=True)
    return replace(host, weights_bytes=host.weights_bytes + weights, kv_bytes=host.kv_bytes + kv,
                   compute_bytes=host.compute_bytes + compute, draft_bytes=weights + kv + compute)


def _move_experts(plan: Plan, model: ModelInfo, fits: list[DeviceFit], ctx: int, n_ubatch: int) -> list[DeviceFit]:
    """``fits`` with each :class:`ExpertHome`'s expert bytes moved from the device holding the
    blocks to their home, which then also needs a compute buffer for the experts' work.

    Each block whose experts live elsewhere is cut into graph splits, and the scheduler keeps
    every split's inputs live (ggml-backend.cpp marks them input and output): a hidden state
    (``ub × n_embd`` f32) per block on the holder (the block's output coming back), and on a
    home that holds blocks of its own 1.25 of one per block (the residual, the normed state and
    the router's choices going there, partly reused). Measured on build 11434 (qwen3moe, 6 and
    8 blocks, ``-d Vulkan0,CPU``): the holder within +0 … +26 %, the home within +1 … +27 %."""
    fits = list(fits)
    experts = model.expert_slot_bytes
    hidden = min(n_ubatch, ctx) * model.embedding_length * 4
    for h, k, blocks in plan.expert_moves():
        moved = sum(experts[s] for s in blocks if s < len(experts))
        fits[h] = replace(fits[h], weights_bytes=fits[h].weights_bytes - moved,
                          compute_bytes=fits[h].compute_bytes + len(blocks) * hidden)
        home = fits[k]
        if home.compute_bytes:  # blocks of its own too
            compute = home.compute_bytes + len(blocks) * hidden * 5 // 4
        else:
            compute = compute_buffer_bytes(model, ctx, True, False, n_ubatch, False)
        fits[k] = replace(home, weights_bytes=home.weights_bytes + moved, compute_bytes=compute)
    return fits


def _share_ram(fits: list[DeviceFit]) -> list[DeviceFit]:
    """``fits`` with each one's :attr:`DeviceFit.shared_bytes`: what the others that use the
    same computer's RAM need (those that need nothing are not used and share nothing)."""
    need_of: dict[str, int] = {}
    for f in fits:
        machine = ram_machine(f.device)
        if machine is not None and f.need_bytes:
            need_of[machine] = need_of.get(machine, 0) + f.need_bytes
    out = []
    for f in fits:
        machine = ram_machine(f.device)
        others = need_of.get(machine, 0) - f.need_bytes if machine is not None and f.need_bytes else 0
        out.append(replace(f, shared_bytes=others) if others else f)
    return out


def misfits(fits: Iterable[DeviceFit]) -> list[str]:
    """Human lines for the devices that do not fit (empty when the plan fits)."""
    return [f.describe() for f in fits if not f.fits]
