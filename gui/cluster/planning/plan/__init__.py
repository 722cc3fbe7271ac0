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

Each topic is a module of this package (#33): :mod:`.layer_map`, :mod:`.device`,
:mod:`.assignment` (the plan), :mod:`.compute_buffer`, :mod:`.fit`, :mod:`.by_memory` and
:mod:`.split_syntax`. Their names are handed on from here for ``from
gui.cluster.planning.plan import …``; within ``gui.cluster.planning`` import from the modules.
"""

# llama-server's default micro-batch, for the callers that plan with it
from gui.cluster.llama.model import DEFAULT_UBATCH
from gui.cluster.planning.plan.assignment import Assignment, ExpertHome, Plan
from gui.cluster.planning.plan.by_memory import plan_by_memory
from gui.cluster.planning.plan.compute_buffer import (
    DEFAULT_OUTPUTS, PIPELINE_COPIES, compute_buffer_bytes, pipeline_parallel,
)
from gui.cluster.planning.plan.device import (
    DEVICE_KINDS, GPU_HEADROOM_BYTES, MASTER_MACHINE, Device, MiB, endpoint_machine,
    headroom_bytes, is_gpu, model_order, ram_machine,
)
from gui.cluster.planning.plan.fit import DeviceFit, estimate, misfits
from gui.cluster.planning.plan.layer_map import PlanError, layer_map, layer_map_inverse, slot_span
from gui.cluster.planning.plan.split_syntax import (
    HOST_KEYS, cpu_sibling, experts_in_ram, parse_split, plan_from_split,
)

__all__ = [
    "DEFAULT_UBATCH", "layer_map", "layer_map_inverse", "PlanError", "slot_span", "Device",
    "DEVICE_KINDS", "endpoint_machine", "GPU_HEADROOM_BYTES", "headroom_bytes", "is_gpu",
    "MASTER_MACHINE", "MiB", "model_order", "ram_machine", "Assignment", "ExpertHome", "Plan",
    "compute_buffer_bytes", "DEFAULT_OUTPUTS", "PIPELINE_COPIES", "pipeline_parallel", "DeviceFit",
    "estimate", "misfits", "plan_by_memory", "cpu_sibling", "experts_in_ram", "HOST_KEYS",
    "parse_split", "plan_from_split",
]
