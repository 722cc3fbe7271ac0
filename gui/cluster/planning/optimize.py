"""The fastest split that fits: an exact search over plans with the cost model.

What is searched — every plan llama.cpp can run:

* the host keeps ``h`` leading slots (``0 ≤ h ≤ n_layer + 1``);
* any subset of the RPC workers takes part, in any ``--rpc`` order; a worker that takes part
  lists all its devices in index order (llama.cpp numbers every device of a worker), each
  holding a contiguous run of zero or more slots;
* the master's local GPUs come after every RPC device, in their fixed order;
* every device (and the host, when its free memory is known) must fit its weights, KV cache at
  the chosen context and compute margin — the very check :func:`gui.cluster.planning.plan.estimate` makes.

Why order is searched at all: with identical blocks, the cost of a run of ``k`` blocks on a
device does not depend on where the run starts, so the order of workers barely matters — except
for the *last* device, which holds the output layer: it computes the (often large) output matrix,
returns the logits instead of a hidden state (``n_vocab`` vs ``n_embd`` floats per token over its
link) and needs room for them. Per-slot times may also differ slightly. Rather than guess, the
search is exact over orders too, and cheap enough to be:

1. For one device, ``C[s][t]`` is the cost of holding slots ``s … t-1`` (∞ when it does not fit;
   0 when empty), from prefix sums over the slots.
2. For one worker, its devices in order combine by min-plus products of their matrices.
3. A dynamic programme over (set of workers used so far, next free slot) adds one worker at a
   time: ``2^W × (n+2)`` states, each extended by a min-plus row-times-matrix. For 8 workers and
   80 layers that is 256 × 82 states — well under a second in numpy.
4. The local GPUs' combined matrix closes the last stretch, and the best state is traced back.

Memory depends on one global fact: llama.cpp runs the devices as a pipeline (extra input
copies on each) exactly when the host keeps no slot and more than one device is in play; the
search is split along that line so it stays exact (see :func:`fastest`).

Ties go to the first plan found (fewer workers, lower host count), so results are deterministic.

**What is fastest** depends on the use (``objective``): ``"chat"`` minimises the decode step
(tokens/s while a reply streams); ``"documents"`` minimises the time to first token of a long
prompt (:func:`gui.cluster.planning.cost_model.prompt_cost`, ``n_prompt`` tokens), where the devices'
matrix-matrix speed and the hidden states of whole micro-batches over each link count instead.
Both sums are additive over devices, so the same exact search serves both. The one term that is
not additive — the overlap of micro-batches when llama.cpp runs a pipeline, for prompts longer
than one micro-batch — is left out of the search (it only makes pipelined plans faster than
searched) and is in the figure reported for the plan found.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from agent.i18n import translate
from gui.cluster.llama.model import DEFAULT_UBATCH
from gui.cluster.planning.cost_model import (
    DEFAULT_PROMPT,
    N_BATCH,
    N_UBATCH,
    Measurements,
    PromptCost,
    StepCost,
    _micro_batches,
    expert_crossings,
    expert_share,
    hop_bytes,
    prompt_cost,
    prompt_hop_bytes,
    step_cost,
)
from gui.cluster.planning.plan.assignment import Assignment, Plan
from gui.cluster.planning.plan.compute_buffer import compute_buffer_bytes
from gui.cluster.planning.plan.device import Device, headroom_bytes, is_gpu, model_order, ram_machine
from gui.cluster.planning.plan.fit import estimate
from gui.cluster.planning.plan.layer_map import PlanError

if TYPE_CHECKING:
    from gui.cluster.llama.model import ModelInfo

INF = float("inf")
#: Above this many workers the subset search (2^W states) would be slow; no home LAN gets there.
MAX_WORKERS = 12
#: What Fastest can optimise: the decode speed (a chat) or the time to first token of a long
#: prompt (documents).
OBJECTIVES = ("chat", "documents")
#: How many times :func:`fastest` shares out a computer's RAM among its devices and searches again.
SHARE_ROUNDS = 3


@dataclass(frozen=True)
class FastestResult:
    """The outcome of :func:`fastest`.

    Attributes:
        plan: the fastest plan that fits.
        cost: its predicted decode step, broken down.
        prompt: its predicted prompt processing of ``prompt.n_prompt`` tokens (None when the
            prompt speeds were not measured).
        objective: what was optimised (:data:`OBJECTIVES`).
    """

    plan: Plan
    cost: StepCost
    prompt: PromptCost | None = None
    objective: str = "chat"


class _Slots:
    """Prefix sums over the slots of a model at one context, shared by every device."""

    def __init__(self, model: ModelInfo, ctx: int, n_ubatch: int) -> None:
        n = model.n_layer + 1
        self.n = n
        self.model = model
        self.weights = np.concatenate([[0], np.cumsum(model.slot_bytes, dtype=np.int64)])
        experts = list(model.expert_slot_bytes or ()) + [0] * (n - len(model.expert_slot_bytes or ()))
        self.experts = np.concatenate([[0], np.cumsum(experts[:n], dtype=np.int64)])
        #: one micro-batch's hidden state: a split input the scheduler keeps per crossing
        self.hidden = min(n_ubatch, ctx) * model.embedding_length * 4
        kv = [model.kv_bytes_per_layer(ctx, s) if s < model.n_layer else 0 for s in range(n)]
        self.kv = np.concatenate([[0], np.cumsum(kv, dtype=np.int64)])
        self.n_layer = model.n_layer
        # Compute margins by (holds blocks, holds output, pipeline, first device), as estimate()
        # sizes them; the host's by (holds blocks, holds output). A sliding-window model's
        # device is given every kind of attention mask here, estimate() only those its blocks
        # read: never more, so a plan found here fits there too.
        self.cb = {(b, o, p, f): compute_buffer_bytes(model, ctx, b, o, n_ubatch, p, first=f)
                   for b in (False, True) for o in (False, True) for p in (False, True) for f in (False, True)}
        self.host_cb = {(b, o): compute_buffer_bytes(model, ctx, b, o, n_ubatch, not b, host=True)
                        for b in (False, True) for o in (False, True)}
        # the host beside one device that holds every slot: no pipeline
        self.host_cb_alone = compute_buffer_bytes(model, ctx, False, False, n_ubatch, False, host=True)
        self.hop_mid = hop_bytes(model, False)
        self.hop_out = hop_bytes(model, True)
        idx = np.arange(n + 1)
        self.s = idx[:, None]
        self.t = idx[None, :]
        self.valid = self.t > self.s

    def margin(self, holds_blocks: np.ndarray, holds_output: np.ndarray, pipeline: bool) -> np.ndarray:
        """The compute margin for each cell, from boolean arrays."""
        out = np.zeros(np.broadcast(holds_blocks, holds_output, self.s).shape, dtype=np.int64)
        first = self.s == 0  # a device from slot 0 on is the first of the pipeline
        for b in (False, True):
            for o in (False, True):
                for f in (False, True):
                    out = np.where((holds_blocks == b) & (holds_output == o) & (first == f),
                                   self.cb[b, o, pipeline, f], out)
        return out

    def host_margin(self, h: np.ndarray) -> np.ndarray:
        """The host's compute margin when it keeps ``h`` leading slots (a pipeline when none)."""
        n = self.n
        return np.where(h > 0, np.where(h == n, self.host_cb[True, True], self.host_cb[True, False]),
                        self.host_cb[False, False])


def _device_matrix(sl: _Slots, slot_s: Sequence[float], rtt: float, bps: float | None, free: int,
                   pipeline: bool, ubatches: Sequence[int] = (), weights: np.ndarray | None = None,
                   extra_need: np.ndarray | int = 0) -> np.ndarray:
    """``C[s][t]``: seconds the device adds for slots ``s … t-1`` (∞ if it does not fit): to a
    decode step, or — with ``ubatches`` (tokens per micro-batch) and ``slot_s`` the prompt
    seconds per token — to the whole prompt. ``weights``: prefix sums of the bytes it holds
    per slot, when not every byte of a slot (a GPU whose experts live elsewhere); ``extra_need``:
    more memory per cell (its compute buffer's inputs from an expert home)."""
    weights = sl.weights if weights is None else weights
    n = sl.n
    if len(slot_s) != n:
        raise PlanError(f"a device speed covers {len(slot_s)} slots, the model has {n}")
    p = np.concatenate([[0.0], np.cumsum(np.asarray(slot_s, dtype=np.float64))])
    holds_out = sl.t == n
    if ubatches:
        cost = np.zeros_like(p[sl.t] - p[sl.s])
        for u in ubatches:
            hop = np.where(holds_out, prompt_hop_bytes(sl.model, u, True), prompt_hop_bytes(sl.model, u, False))
            cost = cost + u * (p[sl.t] - p[sl.s]) + rtt + (hop / bps if bps else 0.0)
    else:
        xfer = np.where(holds_out, sl.hop_out, sl.hop_mid) / bps if bps else 0.0
        cost = p[sl.t] - p[sl.s] + rtt + xfer
    need = (weights[sl.t] - weights[sl.s]) + (sl.kv[sl.t] - sl.kv[sl.s]) \
        + sl.margin(sl.s < sl.n_layer, holds_out, pipeline) + extra_need
    c = np.where(sl.valid & (need <= free), cost, INF)
    np.fill_diagonal(c, 0.0)  # an empty device costs nothing and needs nothing
    return c


def _minplus(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``R[s][t] = min_u a[s][u] + b[u][t]`` and the arg-min ``u`` (first on ties)."""
    cand = a[:, :, None] + b[None, :, :]
    arg = np.argmin(cand, axis=1)
    return np.take_along_axis(cand, arg[:, None, :], axis=1)[:, 0, :], arg


def _experts_in_ram_matrix(sl: _Slots, gpu: tuple, cpu: tuple) -> tuple[np.ndarray, np.ndarray]:
    """For a worker of two devices, a GPU then its CPU, with the GPU's experts on the CPU
    (:attr:`Plan.expert_homes`): ``(M, mid)`` where ``M[s][u]`` is the least decode seconds of
    the GPU holding slots ``s … t-1`` and the CPU ``t … u-1`` (``t = mid[s][u]``), ∞ when nothing
    fits. ``gpu``/``cpu`` are ``(slot seconds, rtt, bytes/s, free bytes)``.

    The GPU holds its slots without their experts and spends the rest of each slot's time
    (:func:`expert_share`); the CPU holds its own slots and the GPU's experts, spends the
    experts' share of each of those slots at its own speed, and each such block costs the
    round trips and bytes of the tensors that cross through the master (:func:`expert_crossings`).
    No pipeline: llama.cpp runs none with ``-ot``."""
    n = sl.n
    share = np.asarray(expert_share(sl.model))
    g_slot, rtt, bps, g_free = gpu
    c_slot, _, _, c_free = cpu
    blocks = np.clip(np.minimum(sl.t, sl.n_layer) - sl.s, 0, None)                # [s, t]
    # compute-buffer inputs of the splits, as estimate() counts them (plan._move_experts)
    g = _device_matrix(sl, np.asarray(g_slot) * (1.0 - share), rtt, bps, g_free, False,
                       weights=sl.weights - sl.experts, extra_need=blocks * sl.hidden)
    c = _device_matrix(sl, c_slot, rtt, bps, np.iinfo(np.int64).max, False)  # its fit is checked below
    c_need = (sl.weights[sl.t] - sl.weights[sl.s]) + (sl.kv[sl.t] - sl.kv[sl.s]) \
        + sl.margin(sl.s < sl.n_layer, sl.t == n, False)
    c_need = np.where(sl.valid, c_need, sl.cb[True, False, False, False])  # an empty CPU still computes
    home_inputs = np.where(sl.valid, 1, 0)[None, :, :] * (blocks * sl.hidden * 5 // 4)[:, :, None]  # [s, t, u]
    ex_time = np.concatenate([[0.0], np.cumsum(np.asarray(c_slot) * share)])
    trips, each_way = expert_crossings(sl.model, 1)
    per_block = trips * rtt + (2 * each_way / bps if bps else 0.0)
    x = ex_time[sl.t] - ex_time[sl.s] + per_block * blocks                         # [s, t]
    moved = sl.experts[sl.t] - sl.experts[sl.s]                                   # [s, t]
    # total[s, t, u]: the GPU takes s … t-1, the CPU t … u-1
    fits = (c_need[None, :, :] + moved[:, :, None] + home_inputs) <= c_free
    total = np.where(fits, g[:, :, None] + x[:, :, None] + c[None, :, :], INF)
    order = (sl.s[:, :, None] <= sl.t[:, :, None]) & (np.arange(n + 1)[None, :, None] <= np.arange(n + 1)[None, None, :])
    total = np.where(order & (moved[:, :, None] > 0), total, INF)  # no experts moved: the plain case
    mid = np.argmin(total, axis=1)
    return np.take_along_axis(total, mid[:, None, :], axis=1)[:, 0, :], mid


class _Group:
    """Devices that enter the plan together, in fixed order: one worker, or the local GPUs.

    With ``experts`` (from :func:`_experts_in_ram_matrix`) a two-device worker may also run
    with its GPU's experts on its CPU; :attr:`matrix` is the better of the two per cell."""

    def __init__(self, devices: list[Device], mats: list[np.ndarray],
                 experts: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self.devices = devices
        self.partial = [mats[0]]
        self.args: list[np.ndarray] = []
        for m in mats[1:]:
            r, arg = _minplus(self.partial[-1], m)
            self.partial.append(r)
            self.args.append(arg)
        self.experts = experts
        self._matrix = self.partial[-1] if experts is None else np.minimum(self.partial[-1], experts[0])

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix

    def experts_home(self, s: int, t: int) -> tuple[str, str] | None:
        """``(GPU key, CPU key)`` when the best way to hold ``s … t-1`` keeps the GPU's experts
        on the CPU, else None."""
        if self.experts is None or not self.experts[0][s, t] < self.partial[-1][s, t]:
            return None
        return self.devices[0].key, self.devices[1].key

    def split(self, s: int, t: int) -> list[int]:
        """Slot counts per device that achieve ``matrix[s][t]``."""
        if self.experts_home(s, t):
            mid = int(self.experts[1][s, t])
            return [mid - s, t - mid]
        counts = [0] * len(self.devices)
        for k in range(len(self.devices) - 1, 0, -1):
            u = int(self.args[k - 1][s, t])
            counts[k] = t - u
            t = u
        counts[0] = t - s
        return counts


@dataclass
class _Best:
    """The best end state found so far: its cost and how to rebuild its plan."""

    total: float = INF
    build: object = None  # () -> (host_layers, counts by device key, worker order)


def _subset_dp(groups: list[_Group], gpu_group: _Group | None, start: np.ndarray, n: int, best: _Best) -> None:
    """Extend ``start`` (cost of the host keeping ``h`` slots) worker by worker; keep the best."""
    w = len(groups)
    dp = np.full((1 << w, n + 1), INF)
    dp[0] = start
    parent: dict[tuple[int, int], tuple[int, int, int]] = {}
    cols = np.arange(n + 1)
    for mask in range(1 << w):
        row = dp[mask]
        if not np.isfinite(row).any():
            continue
        for j in range(w):
            bit = 1 << j
            if mask & bit:
                continue
            cand = row[:, None] + groups[j].matrix
            best_s = np.argmin(cand, axis=0)
            val = cand[best_s, cols]
            new = mask | bit
            better = val < dp[new]
            if better.any():
                dp[new] = np.where(better, val, dp[new])
                for t in np.nonzero(better)[0]:
                    parent[(new, int(t))] = (mask, j, int(best_s[t]))
    # Close with the local GPUs (or nothing: then the last worker must end at slot n).
    tail = gpu_group.matrix[:, n] if gpu_group else np.where(cols == n, 0.0, INF)
    totals = dp + tail[None, :]
    flat = int(np.argmin(totals))
    if not totals.flat[flat] < best.total:
        return
    mask, s = divmod(flat, n + 1)

    def build():
        counts: dict[str, int] = {}
        homes: list[tuple[str, str]] = []
        if gpu_group:
            counts.update(zip((d.key for d in gpu_group.devices), gpu_group.split(s, n)))
        order: list[int] = []
        m, t = mask, s
        while m:
            prev, j, s0 = parent[(m, t)]
            counts.update(zip((d.key for d in groups[j].devices), groups[j].split(s0, t)))
            home = groups[j].experts_home(s0, t)
            if home:
                homes.append(home)
            order.append(j)
            m, t = prev, s0
        return t, counts, [groups[j].devices[0].endpoint for j in reversed(order)], homes

    best.total, best.build = float(totals.flat[flat]), build


def fastest(model: ModelInfo, devices: Sequence[Device], measurements: Measurements, ctx: int,
            host_free_bytes: int | None = None, n_ubatch: int = DEFAULT_UBATCH,
            skip_unmeasured: bool = False, objective: str = "chat",
            n_prompt: int = DEFAULT_PROMPT, _shares: int = SHARE_ROUNDS) -> FastestResult:
    """The plan with the lowest predicted decode step (``objective="chat"``) or time to first
    token of an ``n_prompt``-token prompt (``"documents"``) among all plans that fit (see the
    module doc). A device without a prompt measurement holds nothing for ``"documents"`` when
    ``skip_unmeasured``, else it is a :class:`PlanError`.

    Every device needs a compute measurement and every RPC worker a link measurement
    (:class:`PlanError` names the first one missing) — unless ``skip_unmeasured``, which gives
    such devices no slots (a worker's other, measured devices still take part). The host takes
    part when
    ``measurements.host`` is given; its memory is checked when ``host_free_bytes`` is.

    Memory follows :func:`gui.cluster.planning.plan.estimate`, including llama.cpp's pipeline mode (all
    slots offloaded to two or more devices costs each device extra input copies). So three
    searches run: host keeps ≥ 1 slot (no pipeline); host keeps none and several devices are in
    play (pipeline margins); host keeps none and a single device holds everything.

    Devices of one computer share its RAM (:func:`gui.cluster.planning.plan.ram_machine`), which
    the search, sizing each device on its own, does not see. When its best plan does not fit
    for that reason, the search runs again with that computer's free RAM shared out among its
    devices (and the host) in proportion to what the plan asked of each, up to
    :data:`SHARE_ROUNDS` times; if no round fits, :class:`PlanError` says why in words.
    """
    if ctx < 1:
        raise PlanError(f"context length must be positive, got {ctx}")
    if objective not in OBJECTIVES:
        raise PlanError(f"Fastest optimises {' or '.join(OBJECTIVES)}, not {objective!r}")
    search = _Search.over(model, devices, measurements, ctx, n_ubatch, skip_unmeasured,
                          docs=objective == "documents", n_prompt=n_prompt)
    host_cost, alone_host_cost = search.host_costs(measurements, n_prompt, host_free_bytes)
    plan = search.best_plan(host_cost, alone_host_cost, host_free_bytes)
    fits = estimate(plan, model, ctx, host_free_bytes, n_ubatch)
    bad = [f for f in fits if not f.fits]
    if bad and all(f.shared_bytes for f in bad) and _shares > 0:
        shared = _share_out(fits, host_free_bytes)
        if shared is not None:
            capped, host_cap = shared
            try:
                result = fastest(model, [capped.get(d.key, d) for d in devices], measurements, ctx, host_cap,
                                 n_ubatch, skip_unmeasured, objective, n_prompt, _shares - 1)
            except PlanError:
                pass
            else:  # the same split on the devices as they are (their real free memory)
                real = {d.key: d for d in devices}
                plan = replace(result.plan, assignments=tuple(Assignment(real[d.key], c)
                                                              for d, c in result.plan.assignments))
                if all(f.fits for f in estimate(plan, model, ctx, host_free_bytes, n_ubatch)):
                    return replace(result, plan=plan)
    if bad and all(f.shared_bytes for f in bad):
        # The search sizes each device on its own; devices on one computer share its RAM, which
        # only estimate() adds up. Say so rather than offer a split that does not fit.
        raise PlanError(translate("Plan", "the fastest split does not fit once the devices on the same computer "
                                          "share its memory: {misfits}").format(
            misfits="; ".join(f.describe() for f in bad)))
    if bad:  # the search and estimate() must agree; say so loudly if not
        raise AssertionError(f"fastest plan does not fit: {[f.describe() for f in bad]}")
    return FastestResult(plan, step_cost(plan, model, measurements),
                         predicted_prompt(plan, model, measurements, n_prompt), objective)


@dataclass
class _Search:
    """What Fastest's search runs over: the model's slots, the devices in model order, each
    measured device's (speed, link), and the objective (``docs``: a long prompt's time to first
    token, with its micro-batches ``ubatches``; else the decode step)."""

    model: ModelInfo
    sl: _Slots
    devs: list[Device]
    speeds: dict[str, tuple]
    docs: bool
    ubatches: tuple

    @classmethod
    def over(cls, model: ModelInfo, devices: Sequence[Device], measurements: Measurements, ctx: int,
             n_ubatch: int, skip_unmeasured: bool, *, docs: bool, n_prompt: int) -> "_Search":
        """The search over ``devices``; :class:`PlanError` for a device listed twice, too many
        workers, or a device without its measurements (unless ``skip_unmeasured``)."""
        ubatches = _micro_batches(n_prompt, N_UBATCH, N_BATCH)[0] if docs else ()
        devs = model_order(devices)
        keys = [d.key for d in devs]
        if len(set(keys)) != len(keys):
            raise PlanError("a device is listed twice")
        sl = _Slots(model, ctx, n_ubatch)
        endpoints = list(dict.fromkeys(d.endpoint for d in devs if d.kind == "rpc"))
        if len(endpoints) > MAX_WORKERS:
            raise PlanError(f"{len(endpoints)} workers is more than the fastest-plan search handles "
                            f"({MAX_WORKERS}); leave some out")
        speeds: dict[str, tuple] = {}
        for d in devs:
            try:
                speeds[d.key] = (measurements.speed_of(d), measurements.link_of(d))
                if docs and len(speeds[d.key][0].prompt_slot_s) != sl.n:
                    del speeds[d.key]
                    raise PlanError(f"no prompt-speed measurement for {d.label} (measure it again)")
            except PlanError:
                if not skip_unmeasured:
                    raise
        if not speeds and measurements.host is None:
            raise PlanError("no device and no host has a speed measurement")
        return cls(model, sl, devs, speeds, docs, ubatches)

    @property
    def gpus(self) -> list[Device]:
        return [d for d in self.devs if d.kind == "gpu"]

    def groups(self, pipeline: bool) -> tuple[list[_Group], _Group | None]:
        """A group per worker (its devices in order) and one of the local GPUs (None without)."""
        endpoints = list(dict.fromkeys(d.endpoint for d in self.devs if d.kind == "rpc"))
        by_worker = [[d for d in self.devs if d.endpoint == ep] for ep in endpoints]
        gpus = self.gpus
        return ([_Group(mine, [self._matrix(d, pipeline) for d in mine], self._experts(mine))
                 for mine in by_worker],
                _Group(gpus, [self._matrix(d, pipeline) for d in gpus]) if gpus else None)

    def _matrix(self, d: Device, pipeline: bool) -> np.ndarray:
        n = self.sl.n
        if d.key not in self.speeds:  # unmeasured: may only hold nothing
            return np.where(np.eye(n + 1, dtype=bool), 0.0, INF)
        speed, link = self.speeds[d.key]
        return _device_matrix(self.sl, speed.prompt_slot_s if self.docs else speed.slot_s, link.rtt_s,
                              link.bytes_per_s, d.free_bytes - headroom_bytes(d), pipeline, self.ubatches)

    def _experts(self, mine: list[Device]) -> tuple[np.ndarray, np.ndarray] | None:
        # experts in RAM: a chat with a mixture-of-experts model, on a worker that offers
        # a GPU and then its CPU, both measured
        if self.docs or not self.model.is_moe or len(mine) != 2 or not is_gpu(mine[0]) or is_gpu(mine[1]) \
                or any(d.key not in self.speeds for d in mine):
            return None
        (g_speed, link), (c_speed, _) = self.speeds[mine[0].key], self.speeds[mine[1].key]
        return _experts_in_ram_matrix(
            self.sl, (g_speed.slot_s, link.rtt_s, link.bytes_per_s, mine[0].free_bytes - headroom_bytes(mine[0])),
            (c_speed.slot_s, link.rtt_s, link.bytes_per_s, mine[1].free_bytes - headroom_bytes(mine[1])))

    def host_costs(self, measurements: Measurements, n_prompt: int,
                   host_free_bytes: int | None) -> tuple[np.ndarray, float]:
        """The host's cost of keeping the leading ``h`` slots (plus its fixed work), ∞ where it
        does not fit; and its cost when it keeps none and one device holds everything (its
        margin differs there, so it is checked in :meth:`best_plan`)."""
        model, sl, n = self.model, self.sl, self.sl.n
        host = measurements.host_speed(n)
        if len(host.slot_s) != n:
            raise PlanError(f"the host speed covers {len(host.slot_s)} slots, the model has {n}")
        if self.docs:
            host_prompt = host.prompt_slot_s if len(host.prompt_slot_s) == n else (INF,) * n
            host_cost = n_prompt * np.concatenate([[0.0], np.cumsum(host_prompt)])
            host_cost[0] = 0.0  # (∞ × 0: a host that keeps nothing costs nothing)
        else:
            host_cost = measurements.host_fixed_s + np.concatenate([[0.0], np.cumsum(host.slot_s)])
        alone_host_cost = float(host_cost[0])  # before the memory check: the host's margin differs there
        if host_free_bytes is not None:
            h = np.arange(n + 1)
            need = model.input_bytes + sl.weights + sl.kv + sl.host_margin(h)
            need = need - np.where(h == n, model.output_duplicate_bytes, 0)
            host_cost = np.where(need <= host_free_bytes, host_cost, INF)
        return host_cost, alone_host_cost

    def best_plan(self, host_cost: np.ndarray, alone_host_cost: float, host_free_bytes: int | None) -> Plan:
        """The cheapest plan of the three searches (see :func:`fastest`), in model order."""
        n, model = self.sl.n, self.model
        best = _Best()
        plain, gpu_plain = self.groups(pipeline=False)
        # 1. The host keeps at least one slot: llama.cpp runs no pipeline.
        _subset_dp(plain, gpu_plain, np.where(np.arange(n + 1) > 0, host_cost, INF), n, best)
        # 2. The host keeps none: with two or more devices in play, pipeline margins apply.
        piped, gpu_piped = self.groups(pipeline=True)
        _subset_dp(piped, gpu_piped, np.where(np.arange(n + 1) == 0, host_cost, INF), n, best)
        # 3. The host keeps none and one device is all llama-server sees: no pipeline.
        gpus = self.gpus
        alone = [g for g in plain if len(g.devices) == 1] if not gpus else \
            ([gpu_plain] if len(gpus) == 1 else [])
        if host_free_bytes is not None and model.input_bytes + self.sl.host_cb_alone > host_free_bytes:
            alone_host_cost = INF
        for g in alone:
            total = alone_host_cost + g.matrix[0, n]
            if total < best.total:
                best.total = float(total)
                best.build = (lambda g=g: (0, {g.devices[0].key: n}, [g.devices[0].endpoint], []))
        if best.build is None:
            raise PlanError("no plan fits in the memory the devices and the host have free")
        host_layers, counts, worker_order, homes = best.build()
        # Workers that got slots first (in the order found), then the unused ones (not in --rpc).
        used = [ep for ep in worker_order if ep and any(counts.get(d.key) for d in self.devs if d.endpoint == ep)]
        final = model_order(self.devs, used)
        return Plan(model.n_layer, host_layers, tuple(Assignment(d, counts.get(d.key, 0)) for d in final),
                    tuple(homes))


def _share_out(fits, host_free_bytes: int | None) -> tuple[dict[str, Device], int | None] | None:
    """For each computer whose devices together need more RAM than it has free, that RAM split
    among them (the host included) in proportion to their need: ``({device key: device with
    its share as free memory}, the host's share)``; None when no computer is short."""
    need: dict[str, int] = {}
    for f in fits:
        machine = ram_machine(f.device)
        if machine is not None and f.need_bytes:
            need[machine] = need.get(machine, 0) + f.need_bytes
    capped: dict[str, Device] = {}
    host_cap = host_free_bytes
    short = False
    for f in fits:
        machine = ram_machine(f.device)
        if machine is None or f.free_bytes is None or need.get(machine, 0) <= f.free_bytes:
            continue
        short = True
        share = f.free_bytes * f.need_bytes // need[machine]
        if f.device is None:
            host_cap = share
        else:
            capped[f.device.key] = replace(f.device, free_bytes=share)
    return (capped, host_cap) if short else None


def predicted_prompt(plan: Plan, model: ModelInfo, measurements: Measurements,
                     n_prompt: int = DEFAULT_PROMPT) -> PromptCost | None:
    """:func:`~gui.cluster.planning.cost_model.prompt_cost` of ``plan``, or None when a device it uses
    (or the host) has no prompt measurement."""
    try:
        return prompt_cost(plan, model, measurements, n_prompt)
    except PlanError:
        return None


def fastest_plan(model: ModelInfo, devices: Sequence[Device], measurements: Measurements, ctx: int,
                 host_free_bytes: int | None = None, skip_unmeasured: bool = False,
                 objective: str = "chat") -> Plan:
    """Just the plan of :func:`fastest`."""
    return fastest(model, devices, measurements, ctx, host_free_bytes, skip_unmeasured=skip_unmeasured,
                   objective=objective).plan
