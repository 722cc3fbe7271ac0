"""Is llama.cpp's CPU weight repacking safe on this machine? Asked once per engine and CPU.

llama.cpp's CPU backend keeps repacked copies of host weights in *extra buffer types* for this
CPU's fastest kernels (``CPU_REPACK`` on AVX2, ``AMX`` on Intel CPUs with AMX). On Intel CPUs
with AMX, llama-server of the pinned build dies right after "warming up the model with an empty
run" — by SIGILL or SIGSEGV, the signal varying from run to run — whenever host layers hold
weights of a type its AMX kernels take (``Q4_0``, ``Q4_1``, ``Q8_0``, ``Q4_K``, ``Q5_K``,
``Q6_K``, ``IQ4_XS``; every Q4_K_M mix is among them). ``--no-repack`` serves all of them, the
host's layers then computing without those kernels. F16 weights in the AMX buffer did not crash,
and ``ggml-rpc-server`` (whose weights sit in plain CPU buffers) did not either.

So herd asks once, before anything depends on it: :func:`probe_repack` starts llama-server on a
tiny generated model of each repackable type (:data:`PROBE_QUANTS`), host only, through warm-up.
The answer, a :class:`RepackVerdict`, is kept beside the engine (:func:`verdict_path`), keyed by
the engine's programs and this CPU's model and flags (:func:`machine_key`): a new CPU or a new
build asks again. :mod:`gui.cluster.llama.server_start` applies it to every start of llama-server, and
records there a crash the probe did not foresee (:func:`record_crash`), so it happens once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from agent.engine_lookup import managed_engine_root
from agent.files import CorruptFile, parse_json_object, read_or_set_aside, write_json_atomic
from agent.hardware import cpu_model
from agent.i18n import translate
from agent.ports import free_port
from gui.cluster.llama.server_command import NO_REPACK_FLAG, ServerOptions, ServerSpec
from gui.cluster.llama.server_process import CRASH_SIGNALS, FAILED, LaunchError, ServerProcess, signal_name

log = logging.getLogger(__name__)

#: The repackable types the probe tries, as demo-model quant choices (``Q4_K_M`` is the mix of
#: Q4_K and Q6_K that llama-quantize makes): between them, every kind of kernel that repacks.
PROBE_QUANTS = ("Q4_0", "Q8_0", "Q4_K_M")

#: The weight types llama.cpp's AMX kernels take (ggml-cpu/amx/common.h,
#: ``qtype_has_amx_kernels``): what a CPU where repacking crashes dies on.
AMX_TYPES = frozenset({"Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"})
#: Every weight type some CPU's llama.cpp repacks (the AMX kernels', and repack.cpp's for AVX2,
#: AVX-512, ARM and RISC-V): a crash with none of them on the host is not repacking's.
REPACKABLE_TYPES = AMX_TYPES | {"IQ4_NL", "MXFP4", "Q2_K"}

VERDICT_VERSION = 1
#: Where a verdict goes when the engine's own folder cannot be written (a system install).
FALLBACK_FOLDER = "repack-verdicts"


class ProbeError(RuntimeError):
    """The probe could not tell (llama-server failed in a way that is not a repacking crash)."""


@dataclass(frozen=True)
class RepackVerdict:
    """What this machine's llama-server does with repacked host weights.

    Attributes:
        key: the :func:`machine_key` it was found for (engine programs + CPU).
        cpu: the CPU's name, for the words.
        crashed: each probed type that crashed with repacking on, and the signal
            (``{"Q4_0": "SIGILL"}``); empty when repacking is safe.
        served_without_repack: whether the crashing type then served with ``--no-repack``
            (None when nothing crashed).
        learned_from: ``probe``, or ``start`` when a real start crashed and taught it.
        checked_at: when (seconds since the epoch).
    """

    key: str
    cpu: str
    crashed: dict = field(default_factory=dict)
    served_without_repack: bool | None = None
    learned_from: str = "probe"
    checked_at: float = 0.0

    @property
    def needs_no_repack(self) -> bool:
        """Whether every start of llama-server here must turn repacking off."""
        return bool(self.crashed)

    def to_json(self) -> dict:
        return {"version": VERDICT_VERSION, "key": self.key, "cpu": self.cpu, "crashed": dict(self.crashed),
                "served_without_repack": self.served_without_repack, "learned_from": self.learned_from,
                "checked_at": self.checked_at}

    @classmethod
    def from_json(cls, doc: dict) -> "RepackVerdict":
        if doc.get("version") != VERDICT_VERSION:
            raise ValueError(f"verdict version {doc.get('version')!r}, expected {VERDICT_VERSION}")
        crashed = doc["crashed"]
        if not isinstance(crashed, dict) or not all(isinstance(v, str) for v in crashed.values()):
            raise ValueError("'crashed' must map types to signal names")
        served = doc.get("served_without_repack")
        if served is not None and not isinstance(served, bool):
            raise ValueError("'served_without_repack' must be true, false or null")
        return cls(key=str(doc["key"]), cpu=str(doc.get("cpu", "")), crashed=dict(crashed),
                   served_without_repack=served, learned_from=str(doc.get("learned_from", "probe")),
                   checked_at=float(doc.get("checked_at", 0.0)))


# --- which machine is this ------------------------------------------------------------------

def cpu_identity() -> tuple[str, str]:
    """This CPU's name and its feature flags (Linux: ``/proc/cpuinfo``'s ``flags``; elsewhere
    the processor string, which names family, model and stepping on Windows)."""
    flags = ""
    if sys.platform.startswith("linux"):
        try:
            for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
                if line.lower().startswith(("flags", "features")):
                    flags = " ".join(sorted(line.split(":", 1)[1].split()))
                    break
        except OSError:
            pass
    return cpu_model(), flags or platform.processor() or platform.machine()


def _program_identity(program: Path) -> list[str]:
    """The program and the CPU backend libraries beside it, by path, size and time: a rebuilt
    or replaced engine is another engine."""
    folder = program.parent
    parts = []
    for f in [program, *sorted(folder.glob("*ggml-cpu*")), *sorted(folder.glob("*ggml-base*"))]:
        try:
            st = f.stat()
        except OSError:
            continue
        parts.append(f"{f.resolve()}:{st.st_size}:{st.st_mtime_ns}")
    return parts


def machine_key(program: str | os.PathLike, cpu: tuple[str, str] | None = None) -> str:
    """A short digest of this engine's programs and this CPU's model and flags."""
    name, flags = cpu or cpu_identity()
    h = hashlib.sha256("\n".join([name, flags, *_program_identity(Path(program))]).encode())
    return h.hexdigest()[:16]


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK)


def verdict_path(program: str | os.PathLike, key: str | None = None) -> Path:
    """Where the verdict for ``program`` on this CPU lives: beside the engine when its folder can
    be written (a managed engine), else in herd's own engine folder."""
    program = Path(program)
    key = key or machine_key(program)
    folder = program.parent if _writable(program.parent) else managed_engine_root() / FALLBACK_FOLDER
    return folder / f"repack-verdict-{key}.json"


def load_verdict(program: str | os.PathLike) -> RepackVerdict | None:
    """The verdict for ``program`` on this CPU, or None when it was never asked (or the engine
    or CPU changed since). A corrupt file is set aside and asked anew."""
    key = machine_key(program)
    path = verdict_path(program, key)
    try:
        doc = read_or_set_aside(path, parse_json_object, missing=lambda: None)
        if doc is None:
            return None
        verdict = RepackVerdict.from_json(doc)
    except CorruptFile as exc:
        log.warning("%s", exc)
        return None
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc)
        return None
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring %s: %s", path, exc)
        return None
    return verdict if verdict.key == key else None


def save_verdict(program: str | os.PathLike, verdict: RepackVerdict) -> Path:
    """Keep ``verdict`` beside the engine (atomically)."""
    path = verdict_path(program, verdict.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_json_atomic(path, verdict.to_json())


def no_repack_needed(program: str | os.PathLike) -> bool:
    """Whether the known verdict says llama-server must run with ``--no-repack`` here (False
    when it was never asked: see :func:`ensure_verdict`)."""
    verdict = load_verdict(program)
    return verdict is not None and verdict.needs_no_repack


# --- asking ---------------------------------------------------------------------------------


def _probe_model(folder: Path, quant: str) -> Path:
    """A two-block model of ``quant`` whose matrices every repacking kernel takes (rows and
    columns multiples of 256)."""
    from gui.cluster.llama.random_model import DemoShape, write_demo_model

    return write_demo_model(folder / f"probe-{quant}.gguf", DemoShape(layers=2, embd=256, ff=512, quant=quant))


async def _serves(program: Path, model: Path, extra: list[str], timeout: float) -> str | None:
    """Run llama-server host-only on ``model`` through warm-up: None when it served, else the
    signal it crashed by. Raises :class:`ProbeError` when it failed otherwise."""
    spec = ServerSpec(model=model, ngl=0, verbosity=3, options=ServerOptions(ctx=256, port=free_port(), extra_args=extra))
    server = ServerProcess(program, spec)
    try:
        await server.start()
        try:
            await server.wait_ready(timeout)
            return None
        except LaunchError as exc:
            name = signal_name(server.returncode)
            if server.state == FAILED and name in CRASH_SIGNALS:
                return name
            raise ProbeError(str(exc)) from None
    finally:
        await server.stop()


async def probe_repack(program: str | os.PathLike, *, timeout: float = 120.0) -> RepackVerdict:
    """Start ``program`` (a llama-server) on a tiny model of each of :data:`PROBE_QUANTS`, host
    only, and see whether it crashes with repacking on. Where one does, check that it serves
    with ``--no-repack``. Nothing is saved: see :func:`ensure_verdict`."""
    program = Path(program)
    cpu = cpu_identity()
    crashed: dict[str, str] = {}
    served: bool | None = None
    with tempfile.TemporaryDirectory(prefix="herd-repack-probe-") as tmp:
        models = {q: _probe_model(Path(tmp), q) for q in PROBE_QUANTS}
        for quant, model in models.items():
            sig = await _serves(program, model, [], timeout)
            if sig is not None:
                crashed[quant] = sig
        if crashed:
            first = next(iter(crashed))
            served = await _serves(program, models[first], [NO_REPACK_FLAG], timeout) is None
    return RepackVerdict(key=machine_key(program, cpu), cpu=cpu[0], crashed=crashed,
                         served_without_repack=served, learned_from="probe", checked_at=time.time())


async def ensure_verdict(program: str | os.PathLike, *, again: bool = False) -> RepackVerdict | None:
    """The verdict for ``program`` here, probed and kept now if it was never asked (or ``again``).
    None when the probe could not tell (it is logged; llama-server then starts as asked, and the
    start's safety net still catches a repacking crash)."""
    if not again:
        known = load_verdict(program)
        if known is not None:
            return known
    log.info("checking once whether llama.cpp's weight repacking is safe on this CPU (%s)", cpu_model())
    try:
        verdict = await probe_repack(program)
    except (ProbeError, LaunchError, OSError) as exc:
        log.warning("could not check llama.cpp's weight repacking on this CPU: %s", exc)
        return None
    try:
        save_verdict(program, verdict)
    except OSError as exc:
        log.warning("could not keep the repacking verdict: %s", exc)
    log.info("%s", describe_verdict(verdict))
    return verdict


def ensure_verdict_sync(program: str | os.PathLike, *, again: bool = False) -> RepackVerdict | None:
    """:func:`ensure_verdict` for callers that are not coroutines (``herd engine install``, the
    demo's engine check); from a thread whose event loop runs, on a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(ensure_verdict(program, again=again))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="repack-probe") as pool:
        return pool.submit(asyncio.run, ensure_verdict(program, again=again)).result()


def record_crash(program: str | os.PathLike, signal: str, types: list[str] | tuple[str, ...] = ()) -> RepackVerdict:
    """A start crashed in repacking although no verdict foresaw it: keep that, so the next start
    goes without repacking at once."""
    known = load_verdict(program)
    crashed = dict(known.crashed) if known else {}
    for t in types or ("start",):
        crashed.setdefault(t, signal)
    verdict = RepackVerdict(key=machine_key(program), cpu=cpu_model(), crashed=crashed,
                            served_without_repack=known.served_without_repack if known else None,
                            learned_from="start", checked_at=time.time())
    try:
        save_verdict(program, verdict)
    except OSError as exc:
        log.warning("could not keep the repacking verdict: %s", exc)
    return verdict


# --- saying it ------------------------------------------------------------------------------

def describe_verdict(verdict: RepackVerdict | None) -> str:
    """One or two sentences for ``herd engine status`` and the doctor (translated)."""
    if verdict is None:
        return translate("Engine", "Not checked yet whether llama.cpp's weight repacking is safe on this CPU; "
                                   "herd checks at the first start of llama-server (or run `herd engine probe`).")
    if not verdict.needs_no_repack:
        return translate("Engine", "llama.cpp's weight repacking is safe on this CPU ({cpu}): host layers use "
                                   "its fastest kernels.").format(cpu=verdict.cpu)
    types = ", ".join(f"{t} ({s})" for t, s in verdict.crashed.items())
    text = translate("Engine", "On this CPU ({cpu}) llama-server crashes when it repacks host weights "
                               "({types}), so herd starts it with --no-repack here: the host's layers then "
                               "compute without the CPU's repacked kernels (AMX on Intel), which is slower "
                               "for them; layers on workers are not affected. To check again (after a new "
                               "engine or BIOS/firmware update): herd engine probe.").format(cpu=verdict.cpu, types=types)
    if verdict.served_without_repack is False:
        text += " " + translate("Engine", "It crashed even without repacking: this engine build does not run "
                                          "on this CPU; rebuild it here with `herd engine install --from-source "
                                          "--force`.")
    return text


def verdict_json(verdict: RepackVerdict | None) -> dict | None:
    """The verdict as ``herd engine status --json`` prints it."""
    if verdict is None:
        return None
    out = verdict.to_json()
    out["needs_no_repack"] = verdict.needs_no_repack
    return out

