"""A plan: the host's leading slot count and the devices' slot counts in model order
(:class:`Plan` of :class:`Assignment`), where a mixture's routed experts live (:class:`ExpertHome`),
and a plan read back from llama-server's arguments (:meth:`Plan.from_llama_args`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from gui.cluster.llama.placement_log import HOST_DEVICE_NAME
from gui.cluster.planning.plan.device import Device
from gui.cluster.planning.plan.layer_map import (
    PlanError, check_slot_count, layer_map, layer_map_inverse, slot_span,
)


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
        check_slot_count(self.host_layers, "plan.host_layers")
        seen: set[str] = set()
        for i, (dev, count) in enumerate(items):
            if not isinstance(dev, Device):
                raise PlanError(f"plan.assignments[{i}].device: expected a Device, got {dev!r}")
            check_slot_count(count, f"plan.assignments[{i}].count ({dev.label})")
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
