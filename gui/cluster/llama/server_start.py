"""The one way herd starts ``llama-server``: as this machine needs it, with a safety net.

Every path that runs llama-server on the master goes through :class:`ServerStart` — a launch and
its failover relaunches (:class:`~gui.cluster.launching.launcher.ClusterLauncher`), *Fastest*'s calibration
runs (:mod:`gui.cluster.planning.measure`), the benchmarks and the tests' own harnesses — so what this
machine needs is applied in one place:

1. **what this CPU needs** (:func:`machine_args`): where llama.cpp's weight repacking crashes
   llama-server (Intel CPUs with AMX, :mod:`gui.cluster.llama.repack_probe`), ``--no-repack``. The
   verdict is probed at the first start if ``herd engine install`` has not asked yet.
2. **the safety net**: a crash as the warm-up begins, with repacking on, that no verdict foresaw
   (the probe's tiny models may miss a kernel a real model meets): llama-server is started again
   once with ``--no-repack``, and when that serves, the verdict keeps it — so it happens once on
   this machine.

Profile start scripts made on this master take the same :func:`machine_args`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

from agent.i18n import translate
from gui.cluster.llama import repack_probe
from gui.cluster.llama.placement_log import HOST_LOADED, HOST_MAPPED
from gui.cluster.llama.server_command import NO_REPACK_FLAG, ServerSpec
from gui.cluster.llama.server_process import (
    CRASH_SIGNALS,
    FAILED,
    LaunchError,
    ServerProcess,
    signal_name,
    startup_step,
)

log = logging.getLogger(__name__)

#: Spellings of the switch that turns repacking off (llama-server also reads LLAMA_ARG_REPACK).
_NO_REPACK_SPELLINGS = (NO_REPACK_FLAG, "-nr")


def repacking_off(spec: ServerSpec) -> bool:
    """Whether ``spec`` already runs llama-server without weight repacking."""
    return any(a in _NO_REPACK_SPELLINGS for a in spec.args())


def machine_args(llama_server: str | os.PathLike) -> list[str]:
    """What every start of ``llama_server`` on this machine must add, as far as it is known now
    (``["--no-repack"]`` where repacking crashes; nothing where it is safe or not asked yet)."""
    return [NO_REPACK_FLAG] if repack_probe.no_repack_needed(llama_server) else []


#: Lines llama-server prints once the model's weights are in place, as the warm-up begins (the
#: threadpool's at every level, the warm-up's own from ``-lv 4``): a crash after them is in compute.
_WARMING_UP = re.compile(r"llama threadpool init|warming up the model")


def repack_crash(server: ServerProcess) -> list[str] | None:
    """The repacked host buffers (``["AMX"]``, ``["CPU_REPACK"]``, or ``[]`` when the log named
    none) of a llama-server that crashed while starting with repacking on, once its weights were
    in place, with weights of a repackable type on the host; None when that is not what happened.

    What the crash looks like on an Intel CPU with AMX: a signal (SIGILL or SIGSEGV) right after
    "warming up the model with an empty run", before the server listens.
    """
    if server.state != FAILED or server.was_ready or repacking_off(server.spec):
        return None
    if signal_name(server.returncode) not in CRASH_SIGNALS:
        return None
    if not host_repack_types(server.spec):
        return None  # nothing on the host that any CPU repacks (F16, say): not repacking's crash
    extras = [k for k in server.placement().host_buffers() if k not in (HOST_MAPPED, HOST_LOADED)]
    warming = any(_WARMING_UP.search(ln) for ln in server.startup_log)
    return extras if (extras or warming) else None


def host_repack_types(spec: ServerSpec) -> set[str]:
    """The repackable weight types (:data:`~gui.cluster.llama.repack_probe.REPACKABLE_TYPES`) that
    ``spec`` leaves on the host: matrices of the first ``n_slots − ngl`` slots (every slot when
    there is no RPC worker: a CPU master computes them all). ``{"?"}`` when the model cannot be
    read (then it may be)."""
    from gui.cluster.llama.model import ModelError, inspect_model
    from gui.cluster.llama.placement_log import can_be_repacked

    try:
        info = inspect_model(spec.model)
    except (ModelError, OSError):
        return {"?"}
    n = info.n_slots
    if not spec.rpc:
        host = n
    elif spec.ngl is None or spec.ngl < 0:
        host = 0
    else:
        host = n - min(spec.ngl, n)
    return {t.ggml_type for t in info.tensors
            if can_be_repacked(t) and t.slot < host and t.ggml_type in repack_probe.REPACKABLE_TYPES}


class ServerStart:
    """Starting one llama-server for ``spec``, the way every herd path does (module docstring).

    Args:
        llama_server: the program.
        spec: what to run; :attr:`spec` becomes this plus what the machine needs.
        probe: ask the repacking verdict first if it was never asked (False: use what is known).

    Attributes:
        spec: the command line actually run (a new spec; the one given is left as it was).
        server: the current :class:`~gui.cluster.llama.server_process.ServerProcess` (a new one after
            the safety net's restart), None before :meth:`run`.
        notes: what the start had to do differently, for the user (translated).
        crashes: how many times llama-server crashed in repacking during this start (0 when the
            verdict was known; 1 when the safety net caught it).
    """

    def __init__(self, llama_server: str | os.PathLike, spec: ServerSpec, *, probe: bool = True) -> None:
        self.llama_server = Path(llama_server)
        self.requested = spec
        self.spec = spec
        self.probe = probe
        self.server: ServerProcess | None = None
        self.notes: list[str] = []
        self.crashes = 0

    def _with_machine_args(self, spec: ServerSpec) -> ServerSpec:
        if repacking_off(spec):
            return spec
        return spec.with_extra(*machine_args(self.llama_server))

    async def _spawn(self) -> ServerProcess:
        self.server = ServerProcess(self.llama_server, self.spec)
        await self.server.start()
        return self.server

    async def run(self, timeout: float = 300.0) -> ServerProcess:
        """Start llama-server and wait until it serves; returns it. Raises
        :class:`~gui.cluster.llama.server_process.LaunchError` with the reason when it does not come
        up (the failed :attr:`server` stays for its log; :meth:`stop` reaps it)."""
        if self.probe and not repacking_off(self.spec):
            await repack_probe.ensure_verdict(self.llama_server)
        self.spec = self._with_machine_args(self.requested)
        server = await self._spawn()
        try:
            await server.wait_ready(timeout)
            return server
        except LaunchError:
            buffers = repack_crash(server)
            if buffers is None:
                raise
        # It may be repacking that crashed although no verdict said so: once, without it. Only
        # when that serves is it kept as this machine's verdict (never learned from a guess).
        self.crashes += 1
        sig = signal_name(server.returncode) or "?"
        step = startup_step(server.startup_log)
        self.spec = self.spec.with_extra(NO_REPACK_FLAG)
        server = await self._spawn()
        await server.wait_ready(timeout)
        repack_probe.record_crash(self.llama_server, sig, buffers)
        self.notes.append(translate(
            "Launcher", "llama-server crashed ({signal}) while {step} with host weights repacked for this "
                        "CPU{buffers}; it was started again with --no-repack, which serves but computes the "
                        "host's layers more slowly, and herd starts it that way on this machine from now on "
                        "(`herd engine status` says so)").format(
            signal=sig, step=step, buffers=f" ({', '.join(buffers)})" if buffers else ""))
        log.warning("%s", self.notes[-1])
        return server

    async def stop(self) -> None:
        """Stop the server this start runs (or reap the one that failed)."""
        if self.server is not None:
            await self.server.stop()


@contextlib.asynccontextmanager
async def serving(llama_server: str | os.PathLike, spec: ServerSpec, *, timeout: float = 300.0,
                  notes: list[str] | None = None) -> AsyncIterator[ServerProcess]:
    """``async with serving(program, spec) as server:`` — a ready llama-server for the block,
    started by :class:`ServerStart` and stopped at its end (also when it failed to come up).
    What the start had to do differently is appended to ``notes``."""
    start = ServerStart(llama_server, spec)
    try:
        server = await start.run(timeout)
        if notes is not None:
            notes.extend(start.notes)
        yield server
    finally:
        await start.stop()
