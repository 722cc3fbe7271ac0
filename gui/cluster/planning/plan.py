"""Which layers go where: llama.cpp's layer map, plans, their command-line form and memory fit.

The rules come from llama.cpp build 11434 (``docs/llama-cpp.md``,
src/llama-model.cpp:1558-1616):

* A model has ``n_layer + 1`` *slots*: the blocks ``0 … n_layer-1`` and the output layer
  ``n_layer``. Token embeddings always stay on the host CPU.
* ``-ngl N`` offloads the *last* ``N`` slots; the leading ``n_layer + 1 - N`` stay on the host.
* The offloaded slots go to the devices in *model order* — all RPC devices first, in ``--rpc``
  order (a worker with two devices takes two places), then local GPUs — by cumulative ``-ts``
  fractions compared in float32 (:func:`layer_map`).
* Whole-number ``-ts`` counts are an exact inverse (:func:`layer_map_inverse`): any layout of
  contiguous runs is reproduced slot for slot. Normalised fractions are not.

A :class:`Plan` is the host's leading slot count plus an ordered list of
:class:`Assignment` (device, slot count) in model order. :meth:`Plan.layout` is its exact
inverse of the layer map, which :func:`gui.cluster.llama.server_command.layout_args` writes as
``--rpc … --fit off -ngl N -ts c0,c1,…``; :meth:`Plan.from_llama_args` reads such arguments
back exactly as llama.cpp would. :func:`estimate` checks each device's memory, and
:func:`plan_by_memory` / :func:`plan_from_split` make the two kinds of plan users ask for.
Reading back where llama-server really put the layers is :mod:`gui.cluster.launching.placement`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from agent.i18n import translate

# llama-server's defaults: the micro-batch (``-ub``; compute buffers scale with it) and its
# parallel sequences (``-np``)
from gui.cluster.llama.model import DEFAULT_SEQUENCES, DEFAULT_UBATCH, CacheShape
from gui.cluster.llama.placement_log import HOST_DEVICE_NAME

if TYPE_CHECKING:  # only for annotations; keeps this module importable without gguf
    from gui.cluster.llama.model import ModelInfo

#: Keys of a split that mean "the host keeps these slots".
HOST_KEYS = ("host", "cpu", "master")
#: Tokens whose logits llama-server keeps per step (one per parallel slot, ``-np``).
DEFAULT_OUTPUTS = DEFAULT_SEQUENCES
#: Input copies per device under pipeline parallelism (GGML_SCHED_MAX_COPIES in ggml-backend.cpp).
PIPELINE_COPIES = 4
DEVICE_KINDS = ("rpc", "gpu")

MiB = 1 << 20
#: Memory llama.cpp leaves free on each GPU when it fits a model itself (``--fit-target``, 1 GiB
#: per device by default, common/common.h): the driver and the desktop need it. herd plans GPUs
#: with the same headroom; CPU devices have none (their free RAM already is what is left).
GPU_HEADROOM_BYTES = 1 << 30


def slot_span(slots: Iterable[int], empty: str = "-") -> str:
    """Layer slots as runs, the one way herd writes them: ``[0, 1, 2, 5]`` → ``"0-2, 5"``,
    ``range(3, 6)`` → ``"3-5"``, nothing → ``empty``."""
    runs: list[str] = []
    start = prev = None
    for s in sorted(slots):
        if start is not None and s == prev + 1:
            prev = s
            continue
        if start is not None:
            runs.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = prev = s
    if start is not None:
        runs.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ", ".join(runs) or empty


def is_gpu(device: Device) -> bool:
    """A GPU (or other accelerator) rather than a CPU: a local GPU, or a worker's device not
    named ``CPU…`` (``Vulkan0``, ``CUDA0``, ``ROCm0`` …)."""
    return device.kind == "gpu" or bool(device.name) and not device.name.upper().startswith("CPU")


def headroom_bytes(device: Device | None) -> int:
    """Free memory a plan leaves on ``device`` (:data:`GPU_HEADROOM_BYTES` on a GPU)."""
    return GPU_HEADROOM_BYTES if device is not None and is_gpu(device) else 0


# host:port, with IPv6 hosts in brackets ("[fe80::1]:50052")
_ENDPOINT_RE = re.compile(r"(\[[0-9A-Za-z:.%]+\]|[^\s,:\[\]]+):\d{1,5}")

#: The machine key of the master itself (its CPU, and workers it reaches on loopback).
MASTER_MACHINE = "master"


def endpoint_machine(endpoint: str | None) -> str:
    """The computer an RPC endpoint is on: :data:`MASTER_MACHINE` for loopback (the demo's
    agents run on the master itself), else the endpoint's host; "" for no endpoint."""
    if not endpoint:
        return ""
    host = endpoint.rsplit(":", 1)[0].strip("[]").lower()
    if host in ("localhost", "::1") or host.startswith("127."):
        return MASTER_MACHINE
    return host


def ram_machine(device: Device | None) -> str | None:
    """Which computer's RAM ``device`` allocates from: :data:`MASTER_MACHINE` for the host
    (``None``), the device's :attr:`Device.machine` for a worker's CPU; None for a GPU (its
    memory is its own) and for a device whose computer is not known.

    Two CPU devices of one computer report the same free RAM; counting it once per device
    claimed "Everything fits" for three devices that were all one PC."""
    if device is None:
        return MASTER_MACHINE
    if is_gpu(device) or not device.machine:
        return None
    return device.machine


class PlanError(ValueError):
    """A plan, a split or llama.cpp arguments that cannot work. The message says why."""


# --------------------------------------------------------------------------------------------
# llama.cpp's layer map and its exact inverse


def layer_map(n_layer: int, ngl: int, ts: Sequence[float]) -> list[int]:
    """The device index of every slot (``-1`` = host CPU), exactly as llama.cpp computes it.

    ``n_layer`` blocks plus the output slot; ``ngl`` is ``-ngl`` (negative = all slots); ``ts``
    is ``-ts`` in model order. The cumulative fractions are float32, as in llama.cpp, so the
    result matches llama-server slot for slot (including its rounding at run boundaries).
    """
    n = n_layer + 1
    ngl = n if ngl < 0 else min(ngl, n)
    start = n - ngl
    if ngl == 0 or not ts:
        return [-1] * n
    acc: list[np.float32] = []
    s = np.float32(0)
    for x in ts:
        if x < 0:
            raise PlanError(f"tensor split values must not be negative, got {x}")
        s = np.float32(s + np.float32(x))
        acc.append(s)
    if s == 0:
        raise PlanError("all tensor split values are zero (llama.cpp would split by free memory)")
    acc = [np.float32(a / s) for a in acc]
    out = [-1] * start
    k = 0
    for i in range(start, n):
        frac = np.float32(np.float32(i - start) / np.float32(ngl))
        # upper_bound over a non-decreasing list: the first split point strictly above frac
        while not acc[k] > frac:
            k += 1
        out.append(k)
    return out


def layer_map_inverse(layout: Sequence[int], n_devices: int) -> tuple[int, list[int]]:
    """``(ngl, ts)`` with whole-number ``ts`` that makes :func:`layer_map` return ``layout``.

    ``layout`` gives each slot's device index (``-1`` = host); it must be a run of host slots
    followed by non-decreasing device indices (the only layouts llama.cpp can produce).
    """
    if not layout:
        raise PlanError("a layout needs at least one slot")
    counts = [0] * n_devices
    host = 0
    prev = -1
    for slot, d in enumerate(layout):
        if d < -1 or d >= n_devices:
            raise PlanError(f"slot {slot}: device index {d} is outside 0…{n_devices - 1}")
        if d == -1:
            if prev != -1:
                raise PlanError(f"slot {slot}: host slots must all come first")
            host += 1
        else:
            if d < prev:
                raise PlanError(f"slot {slot}: devices must be in model order (got {d} after {prev})")
            counts[d] += 1
        prev = d
    return len(layout) - host, counts


# --------------------------------------------------------------------------------------------
# devices and plans


@dataclass(frozen=True)
class Device:
    """One device that can hold layers: a device of an RPC worker, or a local GPU of the master.

    Attributes:
        node_id: stable id of the node (the agent's ``id``; ``"master"`` for local GPUs).
        node_name: the node's human name.
        endpoint: ``"host:port"`` of the node's RPC server, or None for a local GPU.
        index: the device's number on that RPC server (``ggml-rpc-server -d`` order), or the
            local GPU's number.
        name: the device's name as its server reports it (``CPU``, ``CUDA0``, ``Vulkan0`` …).
        free_bytes: memory free for weights, cache and buffers.
        total_bytes: total memory of the device.
        kind: ``"rpc"`` (reached through ``--rpc``) or ``"gpu"`` (a GPU of the master itself).
        machine: the computer whose RAM a CPU device uses (:func:`endpoint_machine`, set where
            devices are made from live nodes); CPU devices with the same machine share that RAM
            with each other, and with the host when it is :data:`MASTER_MACHINE`. "" when not
            known. Not part of a device's identity nor of its JSON: it follows the live address.
    """

    node_id: str
    node_name: str
    endpoint: str | None
    index: int = 0
    name: str = ""
    free_bytes: int = 0
    total_bytes: int = 0
    kind: str = "rpc"
    machine: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.kind not in DEVICE_KINDS:
            raise PlanError(f"device {self.node_id}: kind must be one of {DEVICE_KINDS}, got {self.kind!r}")
        if self.kind == "rpc":
            if not isinstance(self.endpoint, str) or not _ENDPOINT_RE.fullmatch(self.endpoint):
                raise PlanError(f"device {self.node_id}: RPC endpoint must be 'host:port', got {self.endpoint!r}")
        elif self.endpoint is not None:
            raise PlanError(f"device {self.node_id}: a local GPU has no endpoint, got {self.endpoint!r}")
        if not isinstance(self.index, int) or self.index < 0:
            raise PlanError(f"device {self.node_id}: index must be a non-negative integer, got {self.index!r}")
        if self.free_bytes < 0 or self.total_bytes < 0:
            raise PlanError(f"device {self.node_id}: memory sizes must not be negative")

    @property
    def key(self) -> str:
        """``node_id/index``: unique per device, stable across address changes."""
        return f"{self.node_id}/{self.index}"

    @property
    def label(self) -> str:
        """A short human label, e.g. ``gaming-pc CUDA0``."""
        return f"{self.node_name} {self.name}".strip() if self.name else self.node_name

    def to_json(self) -> dict:
        """A JSON-ready dict (see :meth:`from_json`)."""
        return {"node_id": self.node_id, "node_name": self.node_name, "endpoint": self.endpoint,
                "index": self.index, "name": self.name, "free_bytes": self.free_bytes,
                "total_bytes": self.total_bytes, "kind": self.kind}

    @classmethod
    def from_json(cls, d: Mapping) -> Device:
        """The inverse of :meth:`to_json` (types are checked by the constructor and callers)."""
        return cls(node_id=d["node_id"], node_name=d["node_name"], endpoint=d.get("endpoint"),
                   index=d.get("index", 0), name=d.get("name", ""),
                   free_bytes=d.get("free_bytes", 0), total_bytes=d.get("total_bytes", 0),
                   kind=d.get("kind", "rpc"))


class Assignment(NamedTuple):
    """``count`` consecutive slots on ``device`` (zero: the device is in the list but unused)."""

    device: Device
    count: int


class ExpertHome(NamedTuple):
    """"Experts in RAM": the expert tensors of the blocks one device holds, kept on another
    device of the same worker (a gaming PC's GPU keeps its blocks' attention and shared
    tensors; the same PC's CPU device keeps their experts).

    Both are :attr:`Device.key` values of the plan's devices. llama-server places the experts
    with ``-ot`` (:meth:`gui.cluster.llama.server_command.ServerSpec.for_plan`); the tensors
    that pass between the two devices stay on that worker (``COPY_TENSOR`` within one
    ``ggml-rpc-server``, ``docs/llama-cpp.md``).
    """

    layers: str
    experts: str


def model_order(devices: Iterable[Device], endpoint_order: Sequence[str] = ()) -> list[Device]:
    """``devices`` in llama.cpp's model order: RPC devices grouped by endpoint, by index, then GPUs.

    Endpoints are taken in ``endpoint_order`` first, then in order of first appearance. Local
    GPUs keep their given order (llama.cpp lists them after every RPC device).
    """
    devices = list(devices)
    order = list(dict.fromkeys(list(endpoint_order) + [d.endpoint for d in devices if d.kind == "rpc"]))
    rank = {ep: i for i, ep in enumerate(order)}
    rpc = sorted((d for d in devices if d.kind == "rpc"), key=lambda d: (rank[d.endpoint], d.index))
    return rpc + [d for d in devices if d.kind == "gpu"]


def _check_count(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise PlanError(f"{what}: expected a whole number of slots, got {value!r}")
    if value < 0:
        raise PlanError(f"{what}: must not be negative, got {value}")
    return int(value)


@dataclass(frozen=True)
class Plan:
    """Where each layer slot of a model goes.

    Attributes:
        n_layer: blocks of the model (slots are ``0 … n_layer``; ``n_layer`` is the output).
        host_layers: leading slots kept on the master's CPU.
        assignments: ``(device, count)`` in llama.cpp's model order; the remaining slots, in
            order, go to these devices. Devices with count 0 are listed but hold nothing.
        expert_homes: devices whose blocks keep their expert tensors on another device of the
            same worker (:class:`ExpertHome`); the common case is none: whole layers.
    """

    n_layer: int
    host_layers: int
    assignments: tuple[Assignment, ...] = field(default_factory=tuple)
    expert_homes: tuple[ExpertHome, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        items = tuple(Assignment(*a) for a in self.assignments)
        object.__setattr__(self, "assignments", items)
        object.__setattr__(self, "expert_homes", tuple(ExpertHome(*h) for h in self.expert_homes))
        if isinstance(self.n_layer, bool) or not isinstance(self.n_layer, int) or self.n_layer < 1:
            raise PlanError(f"plan.n_layer: expected a positive whole number, got {self.n_layer!r}")
        _check_count(self.host_layers, "plan.host_layers")
        seen: set[str] = set()
        for i, (dev, count) in enumerate(items):
            if not isinstance(dev, Device):
                raise PlanError(f"plan.assignments[{i}].device: expected a Device, got {dev!r}")
            _check_count(count, f"plan.assignments[{i}].count ({dev.label})")
            if dev.key in seen:
                raise PlanError(f"plan.assignments[{i}]: device {dev.key} ({dev.label}) is listed twice")
            seen.add(dev.key)
        total = self.host_layers + sum(c for _, c in items)
        if total != self.n_layer + 1:
            raise PlanError(
                f"plan: host {self.host_layers} + device counts {[c for _, c in items]} = {total} "
                f"slots, but the model has {self.n_layer + 1} ({self.n_layer} blocks + output)")
        self._check_order()
        self._check_expert_homes()

    def _check_expert_homes(self) -> None:
        """Each home is another device of the holder's worker; a device keeps its experts in one
        place, and a home does not send its own experts elsewhere."""
        by_key = {d.key: d for d, _ in self.assignments}
        holders: set[str] = set()
        for i, (layers, experts) in enumerate(self.expert_homes):
            for key in (layers, experts):
                if key not in by_key:
                    raise PlanError(f"plan.expert_homes[{i}]: device {key!r} is not in the plan")
            holder, home = by_key[layers], by_key[experts]
            if layers == experts:
                raise PlanError(f"plan.expert_homes[{i}]: {holder.label} cannot be its own experts' home")
            if holder.kind != "rpc" or home.kind != "rpc" or holder.endpoint != home.endpoint:
                raise PlanError(f"plan.expert_homes[{i}]: the experts of {holder.label} can only go to "
                                f"another device of the same worker, not to {home.label}")
            if layers in holders:
                raise PlanError(f"plan.expert_homes[{i}]: {holder.label} has two homes for its experts")
            holders.add(layers)
        for layers, experts in self.expert_homes:
            if experts in holders:
                raise PlanError(f"plan.expert_homes: {by_key[experts].label} keeps another device's experts "
                                "and cannot send its own elsewhere")

    def _check_order(self) -> None:
        """Model order: RPC before GPUs; one endpoint's devices together, numbered 0, 1, …"""
        seen_gpu = False
        done_endpoints: set[str] = set()
        current: str | None = None
        expect = 0
        for i, (dev, _) in enumerate(self.assignments):
            if dev.kind == "gpu":
                seen_gpu = True
                continue
            if seen_gpu:
                raise PlanError(f"plan.assignments[{i}]: RPC device {dev.label} comes after a local GPU; "
                                "llama.cpp puts every RPC device before local GPUs")
            if dev.endpoint != current:
                if dev.endpoint in done_endpoints:
                    raise PlanError(f"plan.assignments[{i}]: devices of {dev.endpoint} must be listed together")
                if current is not None:
                    done_endpoints.add(current)
                current, expect = dev.endpoint, 0
            if dev.index != expect:
                raise PlanError(
                    f"plan.assignments[{i}]: expected device {expect} of {dev.endpoint}, got {dev.index}; "
                    "llama.cpp numbers every device of a worker in order, so list them all")
            expect += 1

    # -- views ------------------------------------------------------------------------------

    @property
    def n_slots(self) -> int:
        """``n_layer + 1``: the blocks and the output layer."""
        return self.n_layer + 1

    @property
    def offloaded(self) -> int:
        """Slots on devices (llama.cpp's ``-ngl``)."""
        return self.n_slots - self.host_layers

    def devices(self) -> list[Device]:
        """The devices of the plan, in model order."""
        return [d for d, _ in self.assignments]

    def counts(self) -> list[int]:
        """Slot count per assignment, in model order."""
        return [c for _, c in self.assignments]

    def slots_of(self, i: int) -> range:
        """The slots held by assignment ``i``."""
        start = self.host_layers + sum(c for _, c in self.assignments[:i])
        return range(start, start + self.assignments[i].count)

    def host_slots(self) -> range:
        """The slots kept on the host CPU."""
        return range(self.host_layers)

    def layer_map(self) -> list[int]:
        """Assignment index of every slot, ``-1`` for the host."""
        out = [-1] * self.host_layers
        for i, (_, c) in enumerate(self.assignments):
            out.extend([i] * c)
        return out

    def active_assignments(self) -> list[int]:
        """Indices of the assignments llama-server will see: every device of each endpoint that
        holds at least one slot, and every local GPU (llama-server always sees those)."""
        eps = set(self.rpc_endpoints())
        return [i for i, (d, _) in enumerate(self.assignments) if d.kind == "gpu" or d.endpoint in eps]

    def rpc_endpoints(self) -> list[str]:
        """``--rpc`` endpoints, unique, in order; workers that hold no slot are left out (there is
        no reason to start or connect them)."""
        used = {d.endpoint for d, c in self.assignments if d.kind == "rpc" and c > 0}
        return list(dict.fromkeys(d.endpoint for d, _ in self.assignments if d.endpoint in used))

    def layout(self) -> tuple[list[str], int, list[int]]:
        """The plan as llama-server takes it: ``(rpc endpoints, ngl, tensor split)``.

        One whole-number count per device llama-server will see, in model order (zero for
        devices left out); the split is empty when there is nothing to put there.
        """
        active = self.active_assignments()
        ts = [self.assignments[i].count for i in active] if active and self.offloaded > 0 else []
        return self.rpc_endpoints(), self.offloaded, ts

    def device_names(self) -> list[str | None]:
        """The name llama-server gives each assignment's device in its log (``RPC0``, ``CUDA0``),
        None for devices it will not see. RPC devices are numbered across all workers in
        ``--rpc`` order (ggml-rpc.cpp numbers them with one running counter)."""
        names: list[str | None] = [None] * len(self.assignments)
        k = 0
        for i in self.active_assignments():
            dev = self.assignments[i].device
            if dev.kind == "rpc":
                names[i] = f"RPC{k}"
                k += 1
            else:
                names[i] = dev.name or f"GPU{dev.index}"
        return names

    def expert_moves(self) -> list[tuple[int, int, range]]:
        """``(holder, home, block slots)`` per :class:`ExpertHome` whose holder holds blocks:
        assignment indices, and the holder's block slots (the output slot has no experts)."""
        index = {d.key: i for i, (d, _) in enumerate(self.assignments)}
        out = []
        for layers, experts in self.expert_homes:
            h = index[layers]
            slots = self.slots_of(h)
            blocks = range(slots.start, min(slots.stop, self.n_layer))
            if len(blocks):
                out.append((h, index[experts], blocks))
        return out

    def with_experts_on(self, layers: str, experts: str | None) -> Plan:
        """This plan with the experts of device ``layers`` on device ``experts`` (None: back
        with their layers). Both are :attr:`Device.key` values."""
        homes = tuple(h for h in self.expert_homes if h.layers != layers)
        if experts is not None:
            homes += (ExpertHome(layers, experts),)
        return replace(self, expert_homes=homes)

    def expected_placement(self) -> dict[int, str]:
        """Slot → llama.cpp device name, as llama-server's per-layer lines (``-lv 5``) name it."""
        names = self.device_names()
        return {slot: HOST_DEVICE_NAME if a < 0 else str(names[a]) for slot, a in enumerate(self.layer_map())}

    def describe(self) -> list[str]:
        """One human line per holder of slots (host first), for CLIs and logs."""
        out = [f"host CPU      {self.host_layers:3d} slots  {slot_span(self.host_slots())}"]
        for i, (dev, count) in enumerate(self.assignments):
            where = dev.endpoint or "local"
            out.append(f"{dev.label:<13} {count:3d} slots  {slot_span(self.slots_of(i))}  ({where})")
        for h, k, blocks in self.expert_moves():
            out.append(f"{'':<13}     experts of {slot_span(blocks)} on {self.assignments[k].device.label}")
        return out

    def to_json(self) -> dict:
        """A JSON-ready dict: ``{"n_layer", "host_layers", "assignments": [{"device", "count"}]}``."""
        out = {"n_layer": self.n_layer, "host_layers": self.host_layers,
               "assignments": [{"device": d.to_json(), "count": c} for d, c in self.assignments]}
        if self.expert_homes:
            out["expert_homes"] = [{"layers": h.layers, "experts": h.experts} for h in self.expert_homes]
        return out

    @classmethod
    def from_json(cls, d: Mapping) -> Plan:
        """The inverse of :meth:`to_json`. Field-level checking of untrusted files is in
        ``gui.cluster.launching.profile``; this raises :class:`PlanError` for an impossible plan."""
        return cls(n_layer=d["n_layer"], host_layers=d["host_layers"],
                   assignments=tuple(Assignment(Device.from_json(a["device"]), a["count"])
                                     for a in d["assignments"]),
                   expert_homes=tuple(ExpertHome(h["layers"], h["experts"]) for h in d.get("expert_homes", ())))

    @classmethod
    def from_layout(cls, n_layer: int, devices: Sequence[Device], layout: Sequence[int]) -> Plan:
        """A plan from a slot → device-index layout (as :func:`layer_map` returns)."""
        if len(layout) != n_layer + 1:
            raise PlanError(f"layout has {len(layout)} slots, the model has {n_layer + 1}")
        ngl, counts = layer_map_inverse(layout, len(devices))
        return cls(n_layer, n_layer + 1 - ngl, tuple(Assignment(d, c) for d, c in zip(devices, counts)))

    @classmethod
    def from_llama_args(cls, args: Sequence[str], devices: Sequence[Device], n_layer: int) -> Plan:
        """What llama-server would do with ``args`` (``--rpc``, ``-ngl``, ``-ts``), as a plan.

        ``devices`` are the known devices (RPC devices of every worker, and the master's local
        GPUs). The devices llama-server sees are each ``--rpc`` endpoint's devices by index, then
        the local GPUs. ``-ts`` may hold fractions; missing values count as 0, as in llama.cpp;
        no ``-ts`` (or all zeros) splits by free memory like llama.cpp's default; no ``-ngl``
        (or ``-ngl all``) offloads every slot. This is what llama-server does with ``--fit off``;
        with ``--fit`` on it may re-plan behind these numbers.
        """
        opts = _parse_opts(args)
        eps = [e for e in (opts.get("rpc") or "").split(",") if e]
        if len(set(eps)) != len(eps):
            raise PlanError(f"--rpc lists an endpoint twice: {opts['rpc']}")
        seen: list[Device] = []
        for ep in eps:
            mine = sorted((d for d in devices if d.kind == "rpc" and d.endpoint == ep), key=lambda d: d.index)
            if not mine:
                raise PlanError(f"--rpc {ep}: unknown device (no known node serves that endpoint)")
            seen += mine
        seen += [d for d in devices if d.kind == "gpu"]
        ngl_text = opts.get("ngl")
        try:
            ngl = -1 if ngl_text is None or ngl_text == "all" else int(ngl_text)
        except ValueError:
            raise PlanError(f"-ngl: expected a whole number or 'all', got {ngl_text!r}") from None
        ts_text = opts.get("ts")
        ts: list[float] = []
        if ts_text:
            try:
                ts = [float(x) for x in ts_text.replace("/", ",").split(",") if x.strip()]
            except ValueError:
                raise PlanError(f"-ts: expected numbers separated by commas, got {ts_text!r}") from None
            if len(ts) > len(seen):
                raise PlanError(f"-ts has {len(ts)} values but llama-server would see only "
                                f"{len(seen)} device(s)")
            if any(x < 0 for x in ts):
                raise PlanError(f"-ts: values must not be negative, got {ts_text!r}")
            ts += [0.0] * (len(seen) - len(ts))
        if not ts or not any(ts):
            ts = [float(d.free_bytes) for d in seen]
        if not seen or not any(ts):
            layout = [-1] * (n_layer + 1)
        else:
            layout = layer_map(n_layer, ngl, ts)
        return cls.from_layout(n_layer, seen, layout)


def _parse_opts(args: Sequence[str]) -> dict[str, str]:
    """The llama-server options a plan is made of, from an argument list."""
    names = {"--rpc": "rpc", "-ngl": "ngl", "--gpu-layers": "ngl", "--n-gpu-layers": "ngl",
             "-ts": "ts", "--tensor-split": "ts"}
    out: dict[str, str] = {}
    args = [str(a) for a in args]
    i = 0
    while i < len(args):
        a = args[i]
        name, eq, value = a.partition("=")
        if name in names and eq:
            out[names[name]] = value
        elif a in names:
            if i + 1 >= len(args):
                raise PlanError(f"{a}: missing value")
            out[names[a]] = args[i + 1]
            i += 1
        i += 1
    return out


# --------------------------------------------------------------------------------------------
# memory fit


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
    """

    device: Device | None
    slots: range
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    free_bytes: int | None
    shared_bytes: int = 0

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


#: Hidden-state-sized (``ub × n_embd`` f32) tensors live at the peak of a compute buffer, by
#: where the buffer is (``first``: the device holding block 0) and whether the scheduler runs a
#: pipeline (:func:`pipeline_parallel`). They are the residual stream, its normed copy and the
#: split inputs the scheduler copies in from the previous backend (ggml-backend.cpp: a pipeline
#: keeps GGML_SCHED_MAX_COPIES copies of every split input, and the first device of one also
#: keeps the token embeddings' rows). ggml-alloc reuses freed tensors, so a buffer holds the
#: tensors live at its peak, not all of them; these counts are read off build 11434's
#: ``sched_reserve: … compute buffer size`` over widths 256-1024, feed-forward widths 512-2816
#: and contexts 1024-32768 (``bench/models``).
_HIDDEN_COPIES = {("device", False): 2, ("first", False): 4, ("device", True): 7, ("first", True): 16,
                  ("host", False): 5, ("host-no-blocks", False): 4, ("host", True): 10,
                  ("host-no-blocks", True): 10}
#: Hidden-state-sized tensors live during a block's attention on a device without a pipeline:
#: the residual, the normed input, Q, the attention output and its projection.
_ATTENTION_COPIES = 5
#: What else a compute buffer holds: the small inputs (token ids, positions, output ids; copied
#: per pipeline stage) and each tensor's alignment in ggml-alloc.c. Measured at up to 0.11 MiB.
_SLACK_BYTES = 64 << 10


def _mask_bytes(model: ModelInfo, shape: CacheShape, ub: int, slots: Iterable[int] | None) -> tuple[int, int]:
    """The f16 attention masks (``ub × n_kv``; llama-graph.cpp builds them f16 when flash
    attention is on, one per kind of KV cache) the blocks in ``slots`` read (all kinds when
    None): ``(windowed, global)`` bytes. A windowed block's mask spans its window's cells
    (:meth:`~gui.cluster.llama.model.ModelInfo.kv_cells`), a global block's the whole context."""
    streams = 1 if shape.unified else max(1, shape.sequences)
    blocks = range(model.n_layer) if slots is None else [s for s in slots if s < model.n_layer]
    windowed = [b for b in blocks if model.is_windowed(b)]
    overall = [b for b in blocks if not model.is_windowed(b)]
    w = model.kv_cells(shape, windowed[0]) // streams * ub * 2 if windowed else 0
    g = model.kv_cells(shape, overall[0]) // streams * ub * 2 if overall else 0
    return w, g


def _ffn_bytes(model: ModelInfo, ub: int) -> tuple[int, int]:
    """The feed-forward intermediates of one block (llama-graph.cpp ``build_ffn`` /
    ``build_moe_ffn``) and the largest one of them.

    A dense block: gate, up and their product, ``ub × n_ff`` f32 each. A mixture of experts:
    the same per routed expert, ``[n_ff_exp, n_expert_used, ub]`` f32 (``E``); the experts'
    outputs ``[n_embd, n_expert_used, ub]`` beyond the one hidden state they replace; the
    router's logits and probabilities ``[n_expert, ub]``. When the experts' outputs do not fit
    in the place gate and up leave (they are at least ``2E``), ggml-alloc puts them above it,
    which leaves one more ``E`` unused below: measured on build 11434 with 2-8 routed experts
    of width 256-768 and widths 256-1024 (``bench/models``)."""
    if model.expert_count and model.expert_used_count:
        exp_ff = model.expert_feed_forward_length or model.feed_forward_length
        one = ub * exp_ff * model.expert_used_count * 4
        outputs = model.expert_used_count * ub * model.embedding_length * 4
        router = 2 * ub * model.expert_count * 4
        gap = one if outputs >= 2 * one else 0
        return 3 * one + gap + outputs - ub * model.embedding_length * 4 + router, one
    one = ub * model.feed_forward_length * 4
    return 3 * one, one


def compute_buffer_bytes(model: ModelInfo, ctx: int | CacheShape, holds_blocks: bool, holds_output: bool,
                         n_ubatch: int = DEFAULT_UBATCH, pipeline: bool = False,
                         n_outputs: int = DEFAULT_OUTPUTS, *, host: bool = False,
                         first: bool = False, slots: Iterable[int] | None = None) -> int:
    """The compute buffer llama.cpp reserves on a device (or, with ``host``, on the host CPU)
    for its worst-case graph: one micro-batch of ``ub = min(n_ubatch, ctx)`` tokens
    (``sched_reserve`` in src/llama-context.cpp), flash attention on (the default where the
    backend supports it, as CPU and RPC-CPU do). The sum of what is live at the buffer's peak:

    * the attention masks the device's blocks read (:func:`_mask_bytes`; ``slots``, all kinds
      when None; the host builds every kind as graph inputs) — :data:`PIPELINE_COPIES` of each
      under pipeline parallelism (``pipeline``), one otherwise;
    * copies of the hidden state, ``ub × n_embd`` f32, as many as :data:`_HIDDEN_COPIES` says
      for the buffer's place (``first``: the device that holds block 0);
    * with blocks, the feed-forward intermediates (:func:`_ffn_bytes`);
    * on the host, llama-server's output buffer: the logits of ``n_outputs`` tokens (``n_vocab``
      f32 each; ``llama_context: CPU output buffer size``), wherever the output layer runs;
    * :data:`_SLACK_BYTES` for the small inputs and alignment.

    Without a pipeline a device's buffer is the larger of two moments: a block's attention (all
    its masks and :data:`_ATTENTION_COPIES` hidden states) and its feed-forward. The global mask
    of a sliding-window model is freed after the device's last global block (ggml-alloc frees a
    tensor after its last use); when the device's first block is a global one, that mask lies
    at the bottom of the buffer and the feed-forward of the windowed blocks after it takes its
    place when its tensors fit there (ggml-alloc.c, best fit).

    With ``holds_output`` the buffer is at least the output layer's logits, ``n_vocab ×
    n_outputs`` f32 (``n_outputs`` = llama-server's ``-np``): on a device with blocks they fit
    in what the last block freed, on one that holds only the output layer they are its peak.
    Checked against the real server over the model matrix of ``bench/models`` and the real
    models the tests run (``tests/cluster/models/test_model_matrix.py``).
    """
    shape = replace(CacheShape.of(ctx), ubatch=n_ubatch)
    ub = min(n_ubatch, shape.ctx)
    copies = PIPELINE_COPIES if pipeline else 1
    hidden = ub * model.embedding_length * 4
    # the host builds every mask (graph inputs); a device copies in those its blocks read
    window_mask, global_mask = (_mask_bytes(model, shape, ub, None if host else slots)
                                if host or holds_blocks else (0, 0))
    masks = window_mask + global_mask
    ffn, ffn_one = _ffn_bytes(model, ub) if holds_blocks else (0, 0)
    if host:
        place = "host" if holds_blocks else "host-no-blocks"
        logits = n_outputs * model.vocab_size * 4
        return copies * masks + _HIDDEN_COPIES[place, pipeline] * hidden + ffn + logits + _SLACK_BYTES
    place = "first" if first else "device"
    # the output layer's logits, n_vocab × n_outputs f32, on a device that holds little else
    logits = n_outputs * model.vocab_size * 4 if holds_output else 0
    if not holds_blocks:  # the output layer alone: its input is the n_outputs rows kept
        return logits + copies * n_outputs * model.embedding_length * 4 + _SLACK_BYTES
    if pipeline:
        return max(copies * masks + _HIDDEN_COPIES[place, True] * hidden + ffn, logits) + _SLACK_BYTES
    # a global mask copied in for the device's first block lies at the bottom of its buffer;
    # once the last global block is done, the windowed blocks after it put their feed-forward
    # there when its tensors fit
    blocks = [s for s in (slots or ()) if s < model.n_layer]
    freed = (window_mask and global_mask >= ffn_one and blocks
             and not model.is_windowed(blocks[0]) and model.is_windowed(blocks[-1]))
    kept = window_mask if freed else masks
    feed_forward = kept + _HIDDEN_COPIES[place, False] * hidden + ffn
    attention = masks + _ATTENTION_COPIES * hidden if holds_blocks else 0
    return max(feed_forward, attention, logits) + _SLACK_BYTES


def pipeline_parallel(plan: Plan) -> bool:
    """Whether llama.cpp will enable pipeline parallelism for ``plan`` (src/llama-context.cpp):
    more than one device in play, every slot offloaded, and no tensor overrides (``-ot``, which
    :attr:`Plan.expert_homes` use). It then keeps :data:`PIPELINE_COPIES` copies of each
    device's inputs, which costs memory."""
    return plan.host_layers == 0 and len(plan.active_assignments()) > 1 and not plan.expert_homes


def estimate(plan: Plan, model: ModelInfo, ctx: int | CacheShape, host_free_bytes: int | None = None,
             n_ubatch: int | None = None) -> list[DeviceFit]:
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
    return _share_ram(_move_experts(plan, model, out, ctx, n_ubatch))


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


# --------------------------------------------------------------------------------------------
# making plans


def plan_by_memory(model: ModelInfo, devices: Sequence[Device], ctx: int | CacheShape,
                   host_free_bytes: int | None = None) -> Plan:
    """llama.cpp's default: split in proportion to each device's free memory.

    Every slot is offloaded when that fits; otherwise the host keeps leading slots, one more at
    a time, until every device fits (what ``-ngl N`` without ``-ts`` would do). The result is
    exact: its whole-number ``-ts`` gives the very layout llama.cpp would compute from the
    free-memory fractions. With no devices (or none with free memory) the host keeps all.
    """
    devs = model_order(devices)
    free = [float(d.free_bytes) for d in devs]
    n = model.n_layer + 1
    if not devs or not any(free):
        return Plan(model.n_layer, n, tuple(Assignment(d, 0) for d in devs))
    plan = None
    for ngl in range(n, -1, -1):
        plan = Plan.from_layout(model.n_layer, devs, layer_map(model.n_layer, ngl, free))
        if all(f.fits for f in estimate(plan, model, ctx, host_free_bytes)[:-1]):
            return plan
    return plan  # ngl = 0: nothing on the devices (always "fits" them)


def parse_split(text: str) -> dict[str, int]:
    """``"nodeA=10,nodeB=23,host=0"`` → ``{"nodeA": 10, "nodeB": 23, "host": 0}`` (order kept)."""
    out: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, eq, value = part.rpartition("=")
        if not eq or not key.strip():
            raise PlanError(f"split entry {part!r}: expected NODE=COUNT")
        key = key.strip()
        try:
            count = int(value)
        except ValueError:
            raise PlanError(f"split entry {part!r}: {value!r} is not a whole number") from None
        if count < 0:
            raise PlanError(f"split entry {part!r}: the count must not be negative")
        if key in out:
            raise PlanError(f"split names {key!r} twice")
        out[key] = count
    if not out:
        raise PlanError("empty split: expected NODE=COUNT,…")
    return out


def _match(key: str, devices: Sequence[Device]) -> list[Device]:
    """Devices a split key names: a device key, else a node id, name, endpoint or device name.

    A key that names devices of more than one node (two nodes with the same name, or ``CPU``)
    is ambiguous and refused: the user must say which node.
    """
    for attr in ("key", "node_id", "node_name", "endpoint", "name"):
        hit = [d for d in devices if getattr(d, attr) == key]
        if len({d.node_id for d in hit}) > 1:
            choices = ", ".join(sorted({d.key for d in hit}))
            raise PlanError(f"split {key!r}: names devices of several nodes; use one of {choices}")
        if hit:
            return hit
    # NODE/N or NODE/DEVICE: one device of a node with several (``gaming-pc/1``,
    # ``gaming-pc/Vulkan0``), the node by its id, name or endpoint.
    node, slash, which = key.rpartition("/")
    if slash and node:
        mine = _match(node, devices)
        hit = [d for d in mine if str(d.index) == which or d.name == which]
        if len({d.node_id for d in mine}) == 1:
            return hit
    return []


def _spread(count: int, devices: Sequence[Device]) -> list[int]:
    """Split ``count`` slots over one node's devices in proportion to free memory (llama.cpp's
    float32 rule; equal shares when none reports memory)."""
    if count == 0:
        return [0] * len(devices)
    weights = [float(d.free_bytes) for d in devices]
    if not any(weights):
        weights = [1.0] * len(devices)
    _, counts = layer_map_inverse(layer_map(count - 1, count, weights), len(devices))
    return counts


def cpu_sibling(plan: Plan, key: str) -> Device | None:
    """The CPU device of the worker that holds device ``key`` in ``plan`` (where "experts in
    RAM" puts that device's experts), or None when the worker offers no CPU device."""
    dev = next((d for d in plan.devices() if d.key == key), None)
    if dev is None or dev.kind != "rpc":
        return None
    return next((d for d in plan.devices() if d.endpoint == dev.endpoint and d.key != key and not is_gpu(d)), None)


def experts_in_ram(plan: Plan, model: ModelInfo, name: str) -> Plan:
    """``plan`` with the experts of the GPU that ``name`` names (as a split names devices:
    ``gaming-pc/0``, ``gaming-pc/Vulkan0``, or a node with one GPU) on its worker's CPU device:
    the GPU keeps the blocks' attention and shared tensors, the same PC's RAM their experts."""
    if not model.is_moe:
        raise PlanError("experts in RAM: the model has no experts (it is not a mixture-of-experts model)")
    gpus = [d for d in _match(name, plan.devices()) if is_gpu(d)]
    if len(gpus) != 1:
        known = ", ".join(d.key for d in plan.devices() if is_gpu(d) and d.kind == "rpc") or "none"
        raise PlanError(f"experts in RAM: {name!r} names {len(gpus)} GPUs of the plan's workers; "
                        f"name one (GPUs: {known})")
    home = cpu_sibling(plan, gpus[0].key)
    if home is None:
        raise PlanError(f"experts in RAM: {gpus[0].label} has no CPU device beside it on its worker "
                        "(the worker's agent offers only its GPU)")
    return plan.with_experts_on(gpus[0].key, home.key)


def plan_from_split(model: ModelInfo | int, devices: Sequence[Device], split: Mapping[str, int]) -> Plan:
    """A plan from user counts, as in ``herd plan --split nodeA=10,nodeB=23``.

    Keys name a device (``node_id/index``), a node (id, name or ``host:port`` — a node with
    several devices shares its count among them by free memory), a local GPU by name, or the
    host (``host``/``cpu``/``master``). Workers get ``--rpc`` places in the order the split
    names them; devices it does not name get 0. Without a host entry the host keeps whatever
    the counts leave of the ``n_layer + 1`` slots.
    """
    n_layer = model if isinstance(model, int) else model.n_layer
    n = n_layer + 1
    counts: dict[str, int] = {}
    host: int | None = None
    named_eps: list[str] = []
    for key, count in split.items():
        _check_count(count, f"split {key!r}")
        if key.lower() in HOST_KEYS:
            host = count
            continue
        hit = _match(key, devices)
        if not hit:
            known = ", ".join(sorted({d.node_name for d in devices} | {d.key for d in devices}))
            raise PlanError(f"split {key!r}: unknown node or device (known: {known or 'none'})")
        for dev, c in zip(hit, _spread(count, hit)):
            if dev.key in counts:
                raise PlanError(f"split {key!r}: device {dev.key} ({dev.label}) already has a count")
            counts[dev.key] = c
            if dev.kind == "rpc":
                named_eps.append(dev.endpoint)
    total = sum(counts.values())
    if host is None:
        if total > n:
            raise PlanError(f"the split gives {total} slots but the model has only {n} "
                            f"({n_layer} blocks + output)")
        host = n - total
    elif host + total != n:
        raise PlanError(f"the split gives host {host} + devices {total} = {host + total} slots, "
                        f"but the model has {n} ({n_layer} blocks + output)")
    devs = model_order(devices, named_eps)
    return Plan(n_layer, host, tuple(Assignment(d, counts.get(d.key, 0)) for d in devs))
