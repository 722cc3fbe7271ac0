"""Checking where llama-server put each layer slot against the plan.

The log is read by :mod:`gui.cluster.llama.placement_log`; this module compares what it read with
the plan and the model's bytes.

llama-server (build 11434) reports its placement at two verbosity levels
(``docs/llama-cpp.md``, "Reading what llama-server did"):

* ``-lv 4`` (info) — what herd runs by default:

  - the devices in model order: ``llama_prepare_model_devices: using device RPC0 (host:port) …``;
  - the offload summary: ``load_tensors: offloaded 8/9 layers to GPU`` (offloaded / all slots);
  - the weights of each buffer: ``load_tensors: RPC0[127.0.0.1:50062] model buffer size = 3.26 MiB``
    (``RPCk`` is the device's number *on that worker*), and the host's ``CPU_Mapped`` (or ``CPU``
    when the model is not memory-mapped) buffer.

* ``-lv 5`` (debug) adds one ``load_tensors: layer N assigned to device RPC1`` line per slot, but
  also about twenty debug lines per generated token, which costs decode speed (see
  ``bench/log_level.py``). It stays available for debugging (``herd up --verify-layers``).

**Why the level-4 report is enough.** llama.cpp only ever makes one kind of layout: the first
``h`` slots on the host, then each device in model order takes the next ``c_k`` contiguous slots
(src/llama-model.cpp, the layer map in :mod:`gui.cluster.planning.plan`). The summary gives ``h`` exactly
(all slots minus offloaded ones) and the ``using device`` lines give the order. Device 0 then
starts at slot ``h`` and holds ``bytes(h … h+c_0-1)``; every slot has a positive size, so that sum
grows strictly with ``c_0`` and the reported size names exactly one count. Device 1 starts where
device 0 stopped, and so on: by induction the buffer sizes determine the whole layout, slot for
slot — as long as one slot is bigger than the uncertainty of a reported size. Two different
layouts can give a device the same bytes only if they give it the same start and the same count,
i.e. the same slots. The output slot (``n_layer``) has its own size (``output`` and
``output_norm``, plus the duplicated token embeddings of a tied model), which is taken from the
model's per-slot bytes like every other slot, so it needs no special case — only a slot smaller
than the uncertainty (possible for a tiny output layer) makes two counts indistinguishable, and
then the report says so instead of guessing.

The uncertainty of a reported size: llama.cpp prints MiB with two decimals (±0.005 MiB), and ggml
pads each tensor of a buffer up to the buffer's alignment (32 bytes on CPU and RPC-CPU, 128 on
CUDA, up to 256 on Vulkan; nothing on this machine's models, whose tensors are multiples of
128 bytes). So a device's weights must lie in ``[expected - rounding, expected + rounding +
padding]`` with :data:`PAD_PER_TENSOR` bytes of padding allowed per tensor.

The host is checked the same way, with one twist: a memory-mapped model's ``CPU_Mapped`` buffer
is the *file range* from the host's first tensor to its last, including any tensors stored in
between that live elsewhere (the output tensors sit between ``token_embd`` and ``blk.0`` in most
files). That range is computed from the tensors' file offsets.

**Repacked host weights.** llama.cpp's CPU backend may keep some of the host's weights in *extra
buffer types* that hold them repacked for this CPU's kernels (ggml/src/ggml-cpu), each reported as
its own ``… model buffer size`` line: ``CPU_REPACK`` (repack.cpp: Q4_0, Q4_K, IQ4_NL and MXFP4
matrices on AVX2 CPUs, Q2_K with AVX-512, more types on ARM; same size as in the file) and ``AMX``
(amx/amx.cpp: F16, Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K and IQ4_XS matrices on Intel CPUs with AMX;
the quantized ones grow by a few bytes per block, :func:`repacked_bytes`), and on ARM
``CPU_KLEIDIAI``. Only a 2-D matrix that is multiplied (never the token embeddings, which are
looked up by row, nor a norm or bias) can move there, and whether it does depends only on its
type and shape and on the CPU. So the check looks for the grouping that explains the log: each
group of host matrices of one type and shape stays in ``CPU_Mapped`` or goes to one of the extra
buffers, and the host is as planned when some grouping gives every buffer its reported size —
the mapped buffer then spans only the file range of the tensors left in it. A buffer type whose
repacked size is not known here has its size reported, not checked.

The problems a check lists are shown to the user, so they are written through
:func:`agent.i18n.translate` (Chinese in a zh_CN app, English in the CLI); the report lines
are for the CLI and logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.i18n import translate
from gui.cluster.llama.placement_log import HOST_LOADED, HOST_MAPPED, Placement, can_be_repacked, repacked_bytes
from gui.cluster.llama.server_command import BUFFER_LINES_LEVEL
from gui.cluster.planning.plan import Plan, slot_span

if TYPE_CHECKING:
    from gui.cluster.llama.model import ModelInfo

MiB = 1 << 20
#: Half of the last printed digit of a ``… MiB`` figure.
ROUNDING_BYTES = int(0.005 * MiB) + 1
#: Alignment padding allowed per tensor of a buffer (the largest backend alignment, Vulkan's).
PAD_PER_TENSOR = 256
#: More groupings than this and the host's repacked buffers are reported, not matched.
MAX_GROUPINGS = 1 << 14

# --- what the plan asks for ---------------------------------------------------------------------

def expected_slots(host_layers: int, devices: Sequence[tuple[str, int]]) -> dict[str, list[int]]:
    """Slots each endpoint should hold: the first ``host_layers`` on the host, then each
    ``(endpoint, count)`` in order takes the next ``count`` contiguous slots.

    An endpoint listed twice (a worker with two devices) collects both ranges.
    """
    out: dict[str, list[int]] = {}
    if host_layers:
        out["host"] = list(range(host_layers))
    nxt = host_layers
    for ep, count in devices:
        if count:
            out.setdefault(ep, []).extend(range(nxt, nxt + count))
        nxt += count
    return out


def plan_expected_slots(plan: Plan) -> dict[str, list[int]]:
    """{endpoint (or local GPU name) or ``host``: slots} that ``plan`` asks for."""
    out: dict[str, list[int]] = {}
    if plan.host_layers:
        out["host"] = list(plan.host_slots())
    for i, (dev, count) in enumerate(plan.assignments):
        if count:
            out.setdefault(dev.endpoint or dev.name, []).extend(plan.slots_of(i))
    return out


# --- comparing --------------------------------------------------------------------------------

@dataclass(frozen=True)
class PlacementCheck:
    """Result of comparing the placement llama-server reports with the one asked for.

    Attributes:
        ok: everything checked is where it was asked to be.
        expected, actual: {endpoint or ``host``: slots}. ``actual`` comes from the per-layer
            lines when the log has them, else it is read off the buffer sizes (see the module
            docstring); a device whose slots cannot be told is left out.
        problems: one sentence per difference.
        report: one sentence per device (host first), e.g. ``127.0.0.1:50062 (RPC1) holds
            slots 4-8 as planned (2.04 MiB of weights)``.
        per_layer: True when the check had llama-server's per-layer lines (``-lv 5``).
    """

    ok: bool
    expected: dict[str, list[int]]
    actual: dict[str, list[int]]
    problems: list[str]
    report: list[str] = field(default_factory=list)
    per_layer: bool = False


def _span(slots: Sequence[int]) -> str:
    return slot_span(slots, empty=translate("Placement", "none"))


def _slots(r: Sequence[int]) -> str:
    """"slot 3" / "slots 3-5" / "no slot"."""
    if not r:
        return translate("Placement", "no slot")
    return (translate("Placement", "slot {slots}") if len(r) == 1
            else translate("Placement", "slots {slots}")).format(slots=_span(r))


def _mib(n: int) -> str:
    return f"{n / MiB:.2f} MiB"


class _Weights:
    """Byte arithmetic over a model's slots: sums, tensor counts and the host's file range."""

    def __init__(self, model: ModelInfo) -> None:
        self.model = model
        self.tensors = list(getattr(model, "tensors", ()) or ())

    def bytes(self, start: int, count: int) -> int:
        return self.model.block_bytes(start, count)

    def padding(self, start: int, count: int) -> int:
        if not self.tensors:
            return 0
        n = sum(1 for t in self.tensors if start <= t.slot < start + count)
        if self.model.tied_embeddings and start <= self.model.n_layer < start + count:
            n += 1  # the duplicated token embeddings
        return n * PAD_PER_TENSOR

    def matches(self, reported: int, start: int, count: int) -> bool:
        diff = reported - self.bytes(start, count)
        return -ROUNDING_BYTES <= diff <= ROUNDING_BYTES + self.padding(start, count)

    def host_range(self, host_slots: int) -> tuple[int, int, int]:
        """(sum of the host's weights, its memory-mapped file range, tensors) for ``host_slots``
        leading slots on the host (plus the input tensors, which always stay there)."""
        m = self.model
        total = m.input_bytes + m.block_bytes(0, host_slots)
        if m.n_layer < host_slots:
            total -= m.output_duplicate_bytes  # the host shares its own token_embd
        mine = [t for t in self.tensors if t.slot < host_slots]  # inputs have slot -1
        if not mine:
            return total, total, 0
        return total, max(t.offset + t.nbytes for t in mine) - min(t.offset for t in mine), len(mine)

    def host_grouping(self, host_slots: int, got: dict[str, int],
                      extras: list[str]) -> dict[str, list[str]] | None:
        """How many host matrices of each type went to which extra buffer, as ``{buffer:
        ["24 Q4_K", "2 Q6_K"]}``, for the first grouping that explains every reported size ``got`` (bytes per
        buffer); None when none does. Buffers whose size cannot be modelled are left out of the
        answer and accept any size."""
        import itertools

        m = self.model
        mine = [t for t in self.tensors if t.slot < host_slots]
        if m.tied_embeddings and m.n_layer < host_slots:
            # The output layer's copy of the token embeddings: shared with the input copy in the
            # mapped buffer, but a buffer of its own when it is repacked.
            embd = next((t for t in self.tensors if t.name == "token_embd.weight"), None)
            if embd is not None:
                mine.append(embd._replace(slot=m.n_layer, name="output (token_embd)"))
        fixed = [t for t in mine if not can_be_repacked(t)]
        groups: dict[tuple, list] = {}
        for t in mine:
            if can_be_repacked(t):
                groups.setdefault((t.ggml_type, t.shape), []).append(t)
        keys = list(groups)
        if (len(extras) + 1) ** len(keys) > MAX_GROUPINGS:
            return None
        mapped_name = HOST_MAPPED if HOST_MAPPED in got else (HOST_LOADED if HOST_LOADED in got else None)
        for choice in itertools.product(range(len(extras) + 1), repeat=len(keys)):
            stay = fixed + [t for k, c in zip(keys, choice) if c == 0 for t in groups[k]
                            if t.name != "output (token_embd)"]
            if not self._mapped_fits(got, mapped_name, stay):
                continue
            answer: dict[str, list[str]] = {}
            for b, buf in enumerate(extras, start=1):
                moved = [t for k, c in zip(keys, choice) if c == b for t in groups[k]]
                sizes = [repacked_bytes(buf, t) for t in moved]
                if any(x is None for x in sizes):
                    continue  # a layout not known here: reported, not checked
                want = sum(sizes)
                if not -ROUNDING_BYTES <= got[buf] - want <= ROUNDING_BYTES + len(moved) * PAD_PER_TENSOR:
                    break
                types: dict[str, int] = {}
                for t in moved:
                    types[t.ggml_type] = types.get(t.ggml_type, 0) + 1
                answer[buf] = [f"{n} {ty}" for ty, n in sorted(types.items())]
            else:
                return answer
        return None

    @staticmethod
    def _mapped_fits(got: dict[str, int], mapped_name: str | None, stay: list) -> bool:
        """Whether the mapped (file range) or loaded (sum) buffer holds just ``stay``."""
        if mapped_name is None:
            return not stay
        if not stay:
            return False
        if mapped_name == HOST_MAPPED:
            want = max(t.offset + t.nbytes for t in stay) - min(t.offset for t in stay)
            slack = ROUNDING_BYTES + len(stay) * PAD_PER_TENSOR
        else:
            want = sum(t.nbytes for t in stay if t.name != "output (token_embd)")
            slack = ROUNDING_BYTES + len(stay) * PAD_PER_TENSOR
        return -ROUNDING_BYTES <= got[mapped_name] - want <= slack


def check_placement(plan: Plan, placement: Placement, model: ModelInfo | None = None) -> PlacementCheck:
    """Compare what llama-server reported (``placement``) with ``plan``.

    With the per-layer lines (``-lv 5``) every slot is compared. Without them (the default
    ``-lv 4``) the offload summary, the device order and — given ``model`` — each device's weight
    bytes are compared, which pins the layout down slot for slot (module docstring). With
    neither, the check fails: nothing says where the layers went.
    """
    expected = plan_expected_slots(plan)
    problems: list[str] = []
    report: list[str] = []
    names = plan.device_names()
    active = plan.active_assignments()
    # Model order of the devices llama-server should see: (name, endpoint or GPU name, index).
    want_devices = [(names[i], plan.assignments[i].device.endpoint or plan.assignments[i].device.name, i)
                    for i in active]

    if not placement.slots and placement.offloaded is None and not placement.buffers:
        problems.append(translate("Placement", "llama-server's log has no placement report (it needs "
                                               "-lv {level} or higher)").format(level=BUFFER_LINES_LEVEL))
        return PlacementCheck(False, expected, {}, problems, report)

    rpc_want = [(n, ep) for n, ep, i in want_devices if plan.assignments[i].device.kind == "rpc"]
    rpc_got = [(n, ep) for n, ep in placement.devices if n.startswith("RPC")]
    if placement.devices and rpc_got != rpc_want:
        none = translate("Placement", "no RPC device")
        problems.append(translate("Placement", "llama-server's device order is {got}; the plan "
                                               "expected {want}").format(
            got=", ".join(f"{n} {ep}" for n, ep in rpc_got) or none,
            want=", ".join(f"{n} {ep}" for n, ep in rpc_want) or none))

    if placement.offloaded is not None:
        off, total = placement.offloaded
        if total != plan.n_slots:
            problems.append(translate("Placement", "llama-server's model has {total} layer slots, the "
                                                   "plan has {planned}").format(total=total, planned=plan.n_slots))
        elif off != plan.offloaded:
            problems.append(translate("Placement", "llama-server offloaded {off} of {total} slots (the "
                                                   "host keeps {host}), the plan offloads {planned}")
                            .format(off=off, total=total, host=_span(range(total - off)), planned=plan.offloaded))

    if placement.slots:
        actual = placement.by_endpoint()
        for ep in sorted(set(expected) | set(actual)):
            want, got = sorted(expected.get(ep, [])), sorted(actual.get(ep, []))
            if want != got:
                problems.append(translate("Placement", "{endpoint} holds layer slots {got}, the plan gave "
                                                       "it {want}").format(endpoint=ep, got=_span(got),
                                                                          want=_span(want)))
            else:
                report.append(f"{ep} holds {_slots(got)} as planned")
    else:
        actual = {}

    if model is not None and placement.buffers:
        by_bytes, byte_problems, byte_report = _check_bytes(plan, placement, model, want_devices)
        problems += byte_problems
        if not placement.slots:
            actual, report = by_bytes, byte_report
    elif not placement.slots:
        # Only the summary: the host's count is known, the devices' shares are not.
        if placement.offloaded is not None:
            off, total = placement.offloaded
            actual = {"host": list(range(total - off))} if total - off else {}
        report.append("weights per device were not checked (no model sizes or buffer lines)")
    return PlacementCheck(not problems, expected, actual, problems, report, bool(placement.slots))


def _check_bytes(plan: Plan, placement: Placement, model: ModelInfo,
                 want_devices: list[tuple[str, str, int]]):
    """(slots read off the buffer sizes by endpoint, problems, report) — see the module docstring."""
    w = _Weights(model)
    problems: list[str] = []
    report: list[str] = []
    actual: dict[str, list[int]] = {}
    n = plan.n_slots
    host = n - placement.offloaded[0] if placement.offloaded else plan.host_layers

    # The host: its buffers against the sum (not mapped) or file range (memory-mapped), with
    # repacked matrices in extra buffers where this CPU has them (module docstring).
    host_bufs = placement.host_buffers()
    if host_bufs:
        ok, said = _check_host(w, host, host_bufs)
        where = f"host keeps {_slots(range(host))}"
        if ok:
            report.append(f"{where} as planned ({said})" if host == plan.host_layers else f"{where} ({said})")
        else:
            problems.append(said)
    if host:
        actual["host"] = list(range(host))

    # The devices, in the order llama-server reports them (the plan's order if it printed none).
    planned = {_plan_key(plan, i): (ep, plan.slots_of(i)) for _, ep, i in want_devices}
    if placement.devices:
        order = _log_keys(placement.devices)
    else:
        order = [(name, _plan_key(plan, i)) for name, _, i in want_devices]
    shift, expert_lines = _expert_shift(plan, placement, model)
    start: int | None = host
    for seen in _read_devices(placement, w, order, host, n, shift):
        ep, want = planned.get(seen.key, (seen.key[0], range(0)))
        said, problem, start = _judge_device(seen, f"{ep} ({seen.name})", want, w)
        if said:
            report.append(said)
        if problem:
            problems.append(problem)
        if seen.slots:
            actual.setdefault(ep, []).extend(seen.slots)
    if start is not None and start != n:
        problems.append(translate("Placement", "the reported weights cover slots up to {last}, the "
                                               "model has {n} slots (0-{top})").format(last=start - 1, n=n,
                                                                                       top=n - 1))
    if not problems:
        report += expert_lines
    return actual, problems, report


def _expert_shift(plan: Plan, placement: Placement, model: ModelInfo) -> tuple[dict[str, int], list[str]]:
    """Experts in RAM: a home's buffer also holds the experts of another device's blocks, which
    that device's buffer lacks; with those bytes put back, each device reads as whole slots.
    Returns ({device name: bytes to add to what it reports}, a report line per move)."""
    names = plan.device_names()
    shift: dict[str, int] = {}
    expert_lines: list[str] = []
    experts = model.expert_slot_bytes
    for h, k, blocks in plan.expert_moves():
        moved = sum(experts[s] for s in blocks if s < len(experts))
        shift[str(names[h])] = shift.get(str(names[h]), 0) - moved
        shift[str(names[k])] = shift.get(str(names[k]), 0) + moved
        reported = placement.device_bytes()
        expert_lines.append(f"{names[h]} keeps the experts of {_slots(blocks)} ({_mib(moved)}) on "
                            f"{names[k]} as planned (llama-server reports {_mib(reported.get(str(names[h]), 0))} "
                            f"of weights on {names[h]}, {_mib(reported.get(str(names[k]), 0))} on {names[k]})")
    return shift, expert_lines


def _judge_device(seen: _Seen, label: str, want: range, w: _Weights) -> tuple[str | None, str | None, int | None]:
    """One device as read off its weights buffer against the slots the plan gave it (``want``):
    (a line for the report, a problem, the slot the next device starts at; None: not known)."""
    b = seen.bytes
    planned_bytes = _mib(w.bytes(want.start, len(want)))
    if seen.slots is not None:
        got = seen.slots
        if got == want:
            return (f"{label} holds {_slots(got)} as planned ({_mib(b)} of weights)"
                    if got else f"{label} holds no slot, as planned"), None, got.stop
        return None, translate("Placement", "{device} holds {got} ({size} of weights), the "
                                            "plan gave it {want} ({planned})").format(
            device=label, got=_slots(got), size=_mib(b), want=_slots(want), planned=planned_bytes), got.stop
    if seen.start is None:
        return None, translate("Placement", "{device}: {size} of weights; its slots cannot be "
                                            "told because an earlier device's could not").format(
            device=label, size=_mib(b)), None
    if not seen.candidates:
        return None, translate("Placement", "{device} has {size} of weights, which is no run of "
                                            "whole slots from slot {start}; the plan gave it {want} "
                                            "({planned})").format(
            device=label, size=_mib(b), start=seen.start, want=_slots(want), planned=planned_bytes), None
    return None, translate("Placement", "{device}: {size} of weights fits {n} slot counts "
                                        "from slot {start} ({counts}): some slots are smaller "
                                        "than the log's rounding, so bytes alone cannot tell; "
                                        "use --verify-layers").format(
        device=label, size=_mib(b), n=len(seen.candidates), start=seen.start,
        counts=", ".join(map(str, seen.candidates))), None


def _check_host(w: _Weights, host: int, host_bufs: dict[str, float]) -> tuple[bool, str]:
    """(the host's buffers are what keeping ``host`` slots takes, a sentence for the report or
    the problem). ``host_bufs`` is {buffer name: MiB} as printed."""
    got = {k: round(v * MiB) for k, v in host_bufs.items()}
    extras = sorted(k for k in got if k not in (HOST_MAPPED, HOST_LOADED))
    total, mapped, count = w.host_range(host)
    if not extras:
        got_sum = sum(got.values())
        low = min(total, mapped) - ROUNDING_BYTES
        high = max(total, mapped) + ROUNDING_BYTES + count * PAD_PER_TENSOR
        want = translate("Placement", "{low} to {high}").format(low=_mib(min(total, mapped)),
                                                                 high=_mib(max(total, mapped)))
        if set(got) == {HOST_MAPPED}:
            low, want = mapped - ROUNDING_BYTES, translate("Placement", "{size} of the file").format(
                size=_mib(mapped))
        elif set(got) == {HOST_LOADED}:
            high, want = total + ROUNDING_BYTES + count * PAD_PER_TENSOR, _mib(total)
        if low <= got_sum <= high:
            return True, f"{_mib(got_sum)} incl. token embeddings"
        return False, translate("Placement", "the host's weights are {got}, but keeping {slots} and the "
                                             "token embeddings takes {want}").format(
            got=_mib(got_sum), slots=_slots(range(host)), want=want)

    grouping = w.host_grouping(host, got, extras)
    shown = ", ".join(f"{k} {_mib(v)}" for k, v in sorted(got.items()))
    if grouping is not None:
        moved = "; ".join(f"{buf} holds {' + '.join(kinds)} matrices" for buf, kinds in grouping.items() if kinds)
        unchecked = [k for k in extras if k not in grouping]
        said = f"{shown}; repacked for this CPU: {moved or 'none'}"
        if unchecked:
            said += f"; size of {', '.join(unchecked)} not checked"
        return True, said
    return False, translate("Placement", "the host's weights are {got} (llama.cpp repacks some for this "
                                         "CPU), which no split of keeping {slots} and the token embeddings "
                                         "between those buffers explains ({want} in all)").format(
        got=shown, slots=_slots(range(host)), want=_mib(total))


@dataclass(frozen=True)
class _Seen:
    """One device as read off the buffer sizes: ``slots`` when exactly one count fits."""

    name: str
    key: tuple[str, int]
    bytes: int
    start: int | None
    candidates: tuple[int, ...]

    @property
    def slots(self) -> range | None:
        if self.start is None or len(self.candidates) != 1:
            return None
        return range(self.start, self.start + self.candidates[0])


def _read_devices(placement: Placement, w: _Weights, order, host: int, n: int,
                  shift: dict[str, int] | None = None) -> list[_Seen]:
    """Walk the devices in model order from slot ``host``: each one's count is the one whose
    slots' bytes match its reported weights (less ``shift[name]``: experts it keeps for
    another device, or plus those it sends away). Stops telling once a device cannot be told."""
    got_bytes = placement.device_bytes()
    shift = shift or {}
    out: list[_Seen] = []
    start: int | None = host
    for name, key in order:
        b = got_bytes.get(name, 0) - shift.get(name, 0)
        fits = tuple(c for c in range(n - start + 1) if w.matches(b, start, c)) if start is not None else ()
        seen = _Seen(name, key, b, start, fits)
        out.append(seen)
        start = seen.slots.stop if seen.slots is not None else None
    return out


def layout_from_log(placement: Placement, model: ModelInfo) -> dict[str, list[int]]:
    """{endpoint (local GPU: its name) or ``host``: slots} as llama-server placed them.

    From the per-layer lines when the log has them (``-lv 5``), else read off the offload summary
    and the weights per device (``-lv 4``, module docstring). Devices whose slots cannot be told
    are left out; an empty dict means the log has no usable report.
    """
    if placement.slots:
        return placement.by_endpoint()
    if placement.offloaded is None:
        return {}
    off, n = placement.offloaded
    host = n - off
    out: dict[str, list[int]] = {"host": list(range(host))} if host else {}
    for seen in _read_devices(placement, _Weights(model), _log_keys(placement.devices), host, n):
        if seen.slots:
            out.setdefault(seen.key[0], []).extend(seen.slots)
    return out


def _plan_key(plan: Plan, i: int) -> tuple[str, int]:
    """Identity of assignment ``i``'s device: (endpoint, its number on that worker), or a local
    GPU's (name, 0)."""
    dev = plan.assignments[i].device
    return (dev.endpoint, dev.index) if dev.kind == "rpc" else (dev.name, 0)


def _log_keys(devices: list[tuple[str, str]]) -> list[tuple[str, tuple[str, int]]]:
    """(model-order name, identity) of the devices in the log, identities as in :func:`_plan_key`."""
    out, seen = [], {}
    for name, ep in devices:
        if name.startswith("RPC"):
            k = seen.get(ep, 0)
            seen[ep] = k + 1
            out.append((name, (ep, k)))
        else:
            out.append((name, (name, 0)))
    return out
