"""The split syntax users type (``--split a=5,b=2,host=2``): parsing it
(:func:`parse_split`) and the plan it means (:func:`plan_from_split`), with experts in RAM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from gui.cluster.planning.plan.assignment import Assignment, Plan
from gui.cluster.planning.plan.device import Device, is_gpu, model_order
from gui.cluster.planning.plan.layer_map import PlanError, check_slot_count, layer_map, layer_map_inverse

if TYPE_CHECKING:  # only for annotations; keeps this module importable without gguf
    from gui.cluster.llama.model import ModelInfo


#: Keys of a split that mean "the host keeps these slots".
HOST_KEYS = ("host", "cpu", "master")


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
        check_slot_count(count, f"split {key!r}")
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
