"""A plan's devices: :class:`Device` (an RPC worker's device or a local GPU), which machine
each is on, the headroom llama.cpp leaves on a GPU, and llama.cpp's model order of devices.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gui.cluster.planning.plan.layer_map import PlanError


DEVICE_KINDS = ("rpc", "gpu")

MiB = 1 << 20

#: Memory llama.cpp leaves free on each GPU when it fits a model itself (``--fit-target``, 1 GiB
#: per device by default, common/common.h): the driver and the desktop need it. herd plans GPUs
#: with the same headroom; CPU devices have none (their free RAM already is what is left).
GPU_HEADROOM_BYTES = 1 << 30


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
