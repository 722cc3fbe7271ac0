"""The devices of a node, as a plan sees them, from what its agent reports."""

from __future__ import annotations

import functools

import psutil

from agent.protocol import AgentStatus
from gui.cluster.planning.plan.device import MASTER_MACHINE, Device, endpoint_machine


def node_devices(node, status: AgentStatus | dict) -> list[Device]:
    """The plan :class:`~gui.cluster.planning.plan.Device` list of a node from its agent's ``status``
    (an :class:`~agent.protocol.AgentStatus`, or the decoded document). The one place that turns
    what an agent reports into what a plan is made over: the app, ``herd``, the failover re-plan
    and the benchmarks all call it.

    A node whose engine offers more than its CPU (a GPU build that finds a GPU) has a device per
    GPU and one for its CPU, in the order its worker is then started with (``-d Vulkan0,CPU``),
    with the worker's live free memory when it already runs with exactly those. Otherwise, while
    the worker runs, the devices it exposes; when it does not run yet, one CPU device with the
    RAM free — what ``ggml-rpc-server`` exposes on a machine without a GPU.
    """
    status = AgentStatus.of(status)
    found = status.rpc.devices
    machine = node_machine(node, status)  # its CPU devices share this computer's RAM
    if status.offers_gpu:
        offered = status.engine_devices
        if [d.name for d in found] == [d.name for d in offered]:
            free = [f.free_bytes for f in found]  # the running worker's own view, live
        else:
            free = [d.free_bytes for d in offered]
        return [Device(node_id=node.id, node_name=node.name, endpoint=node.rpc_endpoint, index=i,
                       name=d.name, free_bytes=f, total_bytes=d.total_bytes, machine=machine)
                for i, (d, f) in enumerate(zip(offered, free))]
    if found:
        return [Device(node_id=node.id, node_name=node.name, endpoint=node.rpc_endpoint, index=d.index,
                       name=d.name, free_bytes=d.free_bytes, total_bytes=d.total_bytes, machine=machine)
                for d in found]
    return [Device(node_id=node.id, node_name=node.name, endpoint=node.rpc_endpoint, index=0,
                   name="CPU", free_bytes=status.ram_free_bytes, total_bytes=status.ram_total_bytes,
                   machine=machine)]


def node_machine(node, status: AgentStatus) -> str:
    """The computer whose RAM a node's CPU devices use, as :attr:`Device.machine`:
    :data:`~gui.cluster.planning.plan.MASTER_MACHINE` when its agent runs on this computer (it
    says the same :func:`~agent.hardware.machine_id` as this master, at whatever address), else
    its agent's machine id; from an agent that does not say, by its address (loopback: this
    computer)."""
    if status.machine:
        return MASTER_MACHINE if status.machine == _this_machine() else status.machine
    return endpoint_machine(node.rpc_endpoint)


@functools.lru_cache(maxsize=1)
def _this_machine() -> str:
    from agent.hardware import machine_id  # noqa: PLC0415

    return machine_id()


def host_free_bytes() -> int:
    """The master's RAM free now: what its host device (llama-server's CPU) can hold."""
    return int(psutil.virtual_memory().available)
