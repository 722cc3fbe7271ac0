"""What llama-server's log says about where the model went: devices, buffers, slots, caches.

:func:`parse_placement` reads the lines llama-server prints at ``-lv 4`` and ``-lv 5``
(``docs/llama-cpp.md``, "Reading what llama-server did") into a :class:`Placement`. Host weights
that llama.cpp's CPU backend repacks for this CPU's kernels appear as buffers of their own
(``CPU_REPACK``, ``AMX``): :func:`repacked_bytes` and :func:`can_be_repacked` say what may move
there and how large it gets. The check against a plan is
:mod:`gui.cluster.launching.placement`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

MiB = 1 << 20
#: The name llama.cpp gives the host's CPU in its device lists and logs.
HOST_DEVICE_NAME = "CPU"
#: The host's own weight buffers: memory-mapped from the file, or loaded (``--no-mmap``).
HOST_MAPPED, HOST_LOADED = "CPU_Mapped", "CPU"
#: Extra bytes per quant block of a matrix repacked into the AMX buffer (amx/mmq.cpp
#: ``get_row_size``: a compensation int32 per Q8_0 block, packed scales for Q4_K/Q5_K/IQ4_XS).
AMX_EXTRA_PER_BLOCK = {"Q8_0": (32, 4), "Q4_K": (256, 4), "Q5_K": (256, 4), "IQ4_XS": (256, 2)}
#: The types with AMX kernels (amx/common.h ``qtype_has_amx_kernels``); F16 is copied as it is.
AMX_PACKED_TYPES = frozenset({"Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"})

_DEVICE_RE = re.compile(r"llama_prepare_model_devices: using device (\S+) \(([^)]*)\)")
_LAYER_RE = re.compile(r"load_tensors:\s+layer\s+(\d+)\s+assigned to device\s+([^\s,]+)")
_OFFLOADED_RE = re.compile(r"load_tensors: offloaded (\d+)/(\d+) layers to GPU")
_BUFFER_RE = re.compile(r"load_tensors:\s+(\S+) model buffer size =\s+([\d.]+) MiB")
_KV_RE = re.compile(r"llama_kv_cache:\s+(\S+) KV buffer size =\s+([\d.]+) MiB")
_COMPUTE_RE = re.compile(r"sched_reserve:\s+(\S+) compute buffer size =\s+([\d.]+) MiB")
_OUTPUT_RE = re.compile(r"llama_context:\s+(\S+)\s+output buffer size =\s+([\d.]+) MiB")
_RPC_BUFFER_RE = re.compile(r"RPC(\d+)\[([^\]]+)\]$")
#: Where llama-server starts loading a speculation's draft model (#35): the buffer lines after
#: it are the draft's, not the target's; and where it (re)loads the target.
_DRAFT_START = "loading draft model"
_TARGET_START = "load_model: loading model"


@dataclass
class Placement:
    """What llama-server's log says about where the model went.

    Attributes:
        devices: model-order devices as ``(name, endpoint)``; RPC devices carry ``host:port``
            (local GPUs carry their description).
        offloaded: ``(offloaded slots, all slots)`` from the summary line, or None.
        buffers: MiB of weights per buffer, as printed: ``{"RPC0[127.0.0.1:50062]": 3.26,
            "CPU_Mapped": 1.38}``.
        slots: device name per layer slot (``CPU`` for the host), only with ``-lv 5``; slot
            ``n_layer`` is the output layer.
        kv, compute: MiB of the KV cache and of the compute buffer per buffer, as printed
            (``llama_kv_cache: … KV buffer size``, ``sched_reserve: … compute buffer size``);
            ``compute`` includes the host's output buffer (the logits, ``llama_context: CPU
            output buffer size``).
        draft: MiB the speculation's draft model took on the host, by kind (``weights``,
            ``kv``, ``compute``); empty without a draft (#35).
    """

    devices: list[tuple[str, str]] = field(default_factory=list)
    offloaded: tuple[int, int] | None = None
    buffers: dict[str, float] = field(default_factory=dict)
    slots: dict[int, str] = field(default_factory=dict)
    kv: dict[str, float] = field(default_factory=dict)
    compute: dict[str, float] = field(default_factory=dict)
    draft: dict[str, float] = field(default_factory=dict)

    @property
    def n_slots(self) -> int:
        return len(self.slots)

    def endpoint_of(self, device: str) -> str:
        """The endpoint a device name refers to (``host`` for the CPU)."""
        for name, ep in self.devices:
            if name == device:
                return ep
        return "host" if device.upper().startswith(HOST_DEVICE_NAME) else device

    def by_endpoint(self) -> dict[str, list[int]]:
        """{endpoint or ``host``: sorted slots it holds}, from the per-layer lines."""
        out: dict[str, list[int]] = {}
        for slot in sorted(self.slots):
            out.setdefault(self.endpoint_of(self.slots[slot]), []).append(slot)
        return out

    def device_bytes(self) -> dict[str, int]:
        """Reported weight bytes per model-order device name (``RPC1``, ``CUDA0``); devices
        without a buffer line hold no weights and are absent."""
        out: dict[str, int] = {}
        for label, mib in self.buffers.items():
            name = self._device_of_buffer(label)
            if name is not None:
                out[name] = out.get(name, 0) + round(mib * MiB)
        return out

    def memory(self) -> dict[str, dict[str, int]]:
        """What llama-server reports it allocated, per model-order device name and ``host``:
        ``{"RPC0": {"weights": …, "kv": …, "compute": …}}`` in bytes (what the memory estimate
        of :func:`gui.cluster.planning.plan.estimate` is compared with)."""
        out: dict[str, dict[str, int]] = {}
        for what, table in (("weights", self.buffers), ("kv", self.kv), ("compute", self.compute)):
            for label, mib in table.items():
                where = self._device_of_buffer(label) or "host"
                slot = out.setdefault(where, {"weights": 0, "kv": 0, "compute": 0})
                slot[what] += round(mib * MiB)
        return out

    def host_buffers(self) -> dict[str, float]:
        """The buffers that belong to no device: the host's (``CPU_Mapped``, ``CPU``, …)."""
        return {k: v for k, v in self.buffers.items() if self._device_of_buffer(k) is None}

    def _device_of_buffer(self, label: str) -> str | None:
        m = _RPC_BUFFER_RE.match(label)
        if m:
            # RPCk[ep] is device k of that worker: the k-th device of ep in model order.
            mine = [name for name, ep in self.devices if ep == m.group(2)]
            k = int(m.group(1))
            return mine[k] if k < len(mine) else label
        names = [name for name, _ in self.devices]
        return label if label in names else None

    def to_json(self) -> dict:
        return {"devices": [{"name": n, "endpoint": e} for n, e in self.devices],
                "offloaded": list(self.offloaded) if self.offloaded else None,
                "buffers_mib": dict(self.buffers),
                "slots": {str(k): v for k, v in sorted(self.slots.items())},
                "by_endpoint": self.by_endpoint()}


def parse_placement(log: str | Iterable[str]) -> Placement:
    """Read llama-server's placement report from its log (a string or lines).

    A later report replaces an earlier one line by line (a reload prints it again). What is
    printed while a draft model loads goes to :attr:`Placement.draft` (#35).
    """
    lines = log.splitlines() if isinstance(log, str) else log
    p = Placement()
    in_draft = False
    for line in lines:
        if _DRAFT_START in line or _TARGET_START in line:
            in_draft = _DRAFT_START in line
            if in_draft:
                p.draft.clear()
            continue
        if in_draft:
            _read_draft_line(p.draft, line)
            continue
        m = _DEVICE_RE.search(line)
        if m:
            if (m.group(1), m.group(2)) not in p.devices:
                p.devices.append((m.group(1), m.group(2)))
            continue
        m = _LAYER_RE.search(line)
        if m:
            p.slots[int(m.group(1))] = m.group(2)
            continue
        m = _OFFLOADED_RE.search(line)
        if m:
            p.offloaded = (int(m.group(1)), int(m.group(2)))
            continue
        m = _BUFFER_RE.search(line)
        if m:
            p.buffers[m.group(1)] = float(m.group(2))
            continue
        m = _KV_RE.search(line)
        if m:
            # a sliding-window model has two caches, each printing its buffer on every device
            p.kv[m.group(1)] = p.kv.get(m.group(1), 0.0) + float(m.group(2))
            continue
        m = _COMPUTE_RE.search(line) or _OUTPUT_RE.search(line)
        if m:
            key = m.group(1) if m.re is _COMPUTE_RE else f"{m.group(1)} output"
            p.compute[key] = float(m.group(2))
    return p


def _read_draft_line(draft: dict[str, float], line: str) -> None:
    """Add a draft model's buffer line to ``draft`` (MiB by kind)."""
    for kind, pattern in (("weights", _BUFFER_RE), ("kv", _KV_RE), ("compute", _COMPUTE_RE), ("compute", _OUTPUT_RE)):
        m = pattern.search(line)
        if m:
            draft[kind] = draft.get(kind, 0.0) + float(m.group(2))
            return


def repacked_bytes(buffer: str, tensor) -> int | None:
    """Bytes ``tensor`` (a :class:`gui.cluster.llama.model.TensorExtent`) takes in the extra CPU buffer
    type ``buffer``, or None when that buffer type's layout is not known here."""
    if buffer == "CPU_REPACK":
        return tensor.nbytes  # repack.cpp keeps ggml_nbytes (no get_alloc_size)
    if buffer == "AMX":
        if tensor.ggml_type not in AMX_PACKED_TYPES:
            return tensor.nbytes
        per, extra = AMX_EXTRA_PER_BLOCK.get(tensor.ggml_type, (1, 0))
        elements = 1
        for d in tensor.shape:
            elements *= d
        return tensor.nbytes + elements // per * extra
    return None


def can_be_repacked(tensor) -> bool:
    """Whether llama.cpp may move a host tensor into an extra CPU buffer: a matrix of a block
    or the output layer (the token embeddings are looked up by row; norms and biases are 1-D)."""
    return tensor.slot >= 0 and len(tensor.shape) >= 2
