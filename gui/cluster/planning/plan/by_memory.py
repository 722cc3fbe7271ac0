"""A plan by memory: layers spread over the devices in proportion to their free memory,
checked with the fit (:func:`plan_by_memory`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gui.cluster.llama.model import CacheShape
from gui.cluster.planning.plan.assignment import Assignment, Plan
from gui.cluster.planning.plan.device import Device, model_order
from gui.cluster.planning.plan.fit import estimate
from gui.cluster.planning.plan.layer_map import layer_map

if TYPE_CHECKING:  # only for annotations; keeps this module importable without gguf
    from gui.cluster.llama.model import ModelInfo


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
