"""Supervising llama.cpp's RPC worker (``ggml-rpc-server``): start, stop, probe, restart.

Three facts about the worker shape this module (``docs/llama-cpp.md``):

* Its banner goes to **stdout and is not flushed to a pipe**, so a supervisor reading a pipe may
  see nothing until the process exits. Readiness and the device list therefore come from the
  RPC protocol itself — HELLO, DEVICE_COUNT and GET_DEVICE_MEMORY sent right after the start —
  which works the same on Windows, Linux and macOS. On POSIX the worker additionally runs under
  a pseudo-terminal, which makes its C library line-buffer stdout, so the banner's device
  *names* arrive live too; on Windows (no pty for a console program without ConPTY plumbing)
  devices are listed by index and memory until the banner shows up.
* A failed bind prints ``Failed to create server socket`` on stderr and **exits 0**: a worker
  that exits before answering the handshake and printed that line is a port conflict, reported
  as such and not restarted.
* It serves one client at a time, so the protocol probe runs only while the worker is
  ``starting`` (the relay admits nobody before ``ready``).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from agent import protocol as P
from agent import rpc_protocol

log = logging.getLogger("herd.agent.rpc")

BIND_FAILED_LINE = "Failed to create server socket"
#: Seconds between restarts after successive crashes; the first retry is quick so a killed
#: worker is back well within the 3 s the master tolerates.
BACKOFF = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
#: A worker that lived this long resets the backoff.
STABLE_AFTER = 30.0
#: How long a fresh worker may take to answer the handshake before it counts as hung.
READY_TIMEOUT = 20.0
#: Seconds a worker gets to exit after SIGTERM before it is killed (the whole agent has 3 s).
STOP_GRACE = 1.5
MAX_LINE = 2000

_DEVICE_RE = re.compile(r"^\s+(?P<name>[^\s:]+): (?P<desc>.*) \((?P<total>\d+) MiB, (?P<free>\d+) MiB free\)\s*$")
_VERSION_RE = re.compile(r"Starting RPC server v(\d+\.\d+\.\d+)")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


#: The worker did not answer the protocol probe as expected.
RpcProbeError = rpc_protocol.RpcProtocolError


@dataclass
class RpcOptions:
    """How to run the worker (``-H -p -t -d -c``).

    Attributes:
        host: address the worker binds (127.0.0.1 behind the relay).
        port: its port.
        threads: ``-t`` (0 = the worker's default).
        devices: ``-d`` list (empty = the worker's default).
        cache: ``-c``.
    """

    host: str = "127.0.0.1"
    port: int = P.DEFAULT_RPC_PORT
    threads: int = 0
    devices: list[str] = field(default_factory=list)
    cache: bool = True

    def argv(self, program: Path) -> list[str]:
        """The worker's command line."""
        argv = [str(program), "-H", self.host, "-p", str(self.port)]
        if self.threads:
            argv += ["-t", str(self.threads)]
        if self.devices:
            argv += ["-d", ",".join(self.devices)]
        if self.cache:
            argv.append("-c")
        return argv


@dataclass
class RpcDevice:
    """One device the worker exposes, in the worker's order (``RPC<k>`` numbering on the master).

    ``name``/``description`` come from the banner and may be empty when it was not seen yet.
    """

    index: int
    total_bytes: int
    free_bytes: int
    name: str = ""
    description: str = ""


async def probe_rpc(host: str, port: int, timeout: float = 2.0) -> tuple[str, list[RpcDevice]]:
    """HELLO, DEVICE_COUNT and GET_DEVICE_MEMORY against a worker.

    Returns ``(protocol version, devices)``. Raises :class:`OSError` when nothing listens,
    :class:`asyncio.TimeoutError` when the worker is busy with another client, and
    :class:`RpcProbeError` on a malformed answer.
    """
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        try:
            proto = await rpc_protocol.hello_async(reader, writer, timeout)
            memory = await rpc_protocol.device_memory_async(reader, writer, timeout)
        except asyncio.IncompleteReadError as exc:
            raise RpcProbeError("worker closed the connection during the probe") from exc
        return proto, [RpcDevice(index=i, total_bytes=total, free_bytes=free)
                       for i, (free, total) in enumerate(memory)]
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass


class RpcSupervisor:
    """Runs one ``ggml-rpc-server`` and keeps it running until told to stop.

    Attributes:
        state: one of :data:`agent.protocol.STATES`.
        error: why the worker is ``crashed`` (None otherwise).
        conflict: True when the last failure was a port already in use.
        options: the options of the current (or last) run.
        pid: the worker's process id while it runs.
        restarts: crashes recovered from since the last explicit start.
        devices: what the worker exposes (from the probe, names from the banner when seen).
        proto: RPC protocol version the worker answered with.
        client: address of the master connected through the relay, if any.
        lines: the last output lines.
        last_crash: the last crash since the last explicit start — ``{"error", "lines" (the
            last ones it printed), "uptime_s"}`` — kept after the restart, so that a master
            whose llama-server lost the worker can say why; None when there was none.
    """

    def __init__(self, program: Callable[[], Path], *, log_lines: int = 500,
                 on_change: Callable[[], None] | None = None, env: dict | None = None,
                 port_for_restart: Callable[[RpcOptions], int] | None = None) -> None:
        self._program = program
        self._on_change = on_change or (lambda: None)
        #: the worker's environment at its next start (the agent sets its master's cache folder)
        self.env = env
        self._port_for_restart = port_for_restart
        self.state = P.STATE_STOPPED
        self.error: str | None = None
        self.conflict = False
        self.options: RpcOptions | None = None
        self.pid: int | None = None
        self.restarts = 0
        self.devices: list[RpcDevice] = []
        self.proto = ""
        self.client: str | None = None
        self.lines: collections.deque[str] = collections.deque(maxlen=log_lines)
        self.last_crash: dict | None = None
        self._banner_devices: dict[int, tuple[str, str]] = {}
        self._started_at: float | None = None
        self._probed_at = 0.0
        self._proc: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task | None = None
        self._stopping = asyncio.Event()
        self._state_changed = asyncio.Condition()
        self._tasks: set[asyncio.Task] = set()

    # --- public -------------------------------------------------------------------------------

    async def start(self, options: RpcOptions) -> None:
        """(Re)start the worker with ``options``; returns once it was launched, not when ready."""
        await self.stop()
        self.options = options
        self.restarts = 0
        self.last_crash = None
        self.error = None
        self.conflict = False
        self._stopping = asyncio.Event()
        self._set_state(P.STATE_STARTING)
        self._task = asyncio.create_task(self._supervise(), name="rpc-supervisor")

    async def stop(self) -> None:
        """Stop the worker (SIGTERM, then kill after a grace period); no restart follows.

        Afterwards the state is ``stopped`` and any earlier error is cleared.
        """
        self._stopping.set()
        task, self._task = self._task, None
        proc = self._proc
        if proc is not None and proc.returncode is None:
            _terminate(proc)
        if task is not None:
            done, _ = await asyncio.wait([task], timeout=STOP_GRACE)
            if not done:
                proc = self._proc
                if proc is not None and proc.returncode is None:
                    proc.kill()
                await asyncio.wait([task])
            if not task.cancelled() and task.exception() is not None:
                log.error("RPC supervisor failed: %s", task.exception())
        self.error = None
        self.conflict = False
        self._set_state(P.STATE_STOPPED)

    def fail(self, message: str, *, conflict: bool = False) -> None:
        """Record a failure that happened outside the worker (e.g. the relay could not bind)."""
        self.error = message
        self.conflict = conflict
        self._set_state(P.STATE_CRASHED)

    def set_client(self, address: str | None) -> None:
        """The relay reports who holds the worker; ``ready`` ⇄ ``busy`` follows."""
        self.client = address
        if address and self.state == P.STATE_READY:
            self._set_state(P.STATE_BUSY)
        elif not address and self.state == P.STATE_BUSY:
            self._set_state(P.STATE_READY)

    async def refresh_devices(self, max_age: float = 10.0) -> None:
        """Re-read the devices' free memory if the last probe is older than ``max_age`` s.

        Only while ``ready``: with a master connected the worker would not answer (one client
        at a time), and the master would wait behind the probe.
        """
        opts = self.options
        if self.state != P.STATE_READY or opts is None or time.monotonic() - self._probed_at < max_age:
            return
        try:
            _proto, devices = await probe_rpc(opts.host, opts.port, timeout=0.5)
        except (OSError, asyncio.TimeoutError, RpcProbeError):
            return
        if self.state == P.STATE_READY:
            self.devices = devices
            self._name_devices()
            self._probed_at = time.monotonic()

    @property
    def uptime(self) -> float | None:
        """Seconds the current worker process has been running."""
        return None if self._started_at is None else time.monotonic() - self._started_at

    async def wait_for(self, states: tuple[str, ...], timeout: float) -> str:
        """Wait until the state is one of ``states``; returns it, or raises TimeoutError."""
        async def _wait() -> str:
            async with self._state_changed:
                await self._state_changed.wait_for(lambda: self.state in states)
                return self.state
        return await asyncio.wait_for(_wait(), timeout)

    def snapshot(self) -> dict:
        """The worker's part of ``/status`` (JSON-ready)."""
        opts = self.options
        return {
            "state": self.state,
            "error": self.error,
            "conflict": self.conflict,
            "pid": self.pid,
            "uptime_s": round(self.uptime, 3) if self.uptime is not None else None,
            "restarts": self.restarts,
            "last_crash": self.last_crash,
            "proto": self.proto,
            "devices": [asdict(d) for d in self.devices],
            "client": self.client,
            "threads": opts.threads if opts else None,
            "cache": opts.cache if opts else None,
            "requested_devices": list(opts.devices) if opts else [],
        }

    # --- supervision --------------------------------------------------------------------------

    def _set_state(self, state: str) -> None:
        if state == self.state:
            return
        log.info("RPC worker: %s -> %s%s", self.state, state, f" ({self.error})" if self.error else "")
        self.state = state
        self._on_change()
        task = asyncio.get_running_loop().create_task(self._notify())
        self._tasks.add(task)  # keep a reference until it ran (asyncio holds only weak ones)
        task.add_done_callback(self._tasks.discard)

    async def _notify(self) -> None:
        async with self._state_changed:
            self._state_changed.notify_all()

    async def _supervise(self) -> None:
        attempt = 0
        opts = self.options
        assert opts is not None
        try:
            while not self._stopping.is_set():
                self._set_state(P.STATE_STARTING)
                try:
                    proc, reader_task = await self._spawn(opts)
                except Exception as exc:  # engine missing, not executable, …
                    self.fail(f"cannot start ggml-rpc-server: {exc}")
                    return
                started = time.monotonic()
                ready = await self._wait_ready(proc, opts)
                if ready:
                    self.error = None
                    self._set_state(P.STATE_BUSY if self.client else P.STATE_READY)
                rc = await proc.wait()
                await asyncio.wait([reader_task], timeout=1.0)
                self.pid = None
                self._started_at = None
                self._proc = None
                self.devices = []
                if self._stopping.is_set():
                    break
                if not ready and any(BIND_FAILED_LINE in ln for ln in list(self.lines)[-20:]):
                    self.fail(f"port conflict: {opts.host}:{opts.port} is already in use "
                              "(ggml-rpc-server could not bind it)", conflict=True)
                    return
                how = f"was killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
                self.fail(f"ggml-rpc-server {how}" + ("" if ready else " before it became ready"))
                self.last_crash = {"error": self.error, "lines": [ln for ln in self.lines if ln][-5:],
                                   "uptime_s": round(time.monotonic() - started, 3)}
                if time.monotonic() - started > STABLE_AFTER:
                    attempt = 0
                delay = BACKOFF[min(attempt, len(BACKOFF) - 1)]
                attempt += 1
                self.restarts += 1
                log.warning("RPC worker crashed (%s); restart %d in %.1f s", self.error, self.restarts, delay)
                try:
                    await asyncio.wait_for(self._stopping.wait(), delay)
                    break
                except asyncio.TimeoutError:
                    pass
                if self._port_for_restart is not None:
                    opts.port = self._port_for_restart(opts)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("RPC supervisor failed")
            self.fail(f"supervisor error: {exc}")
            return
        finally:
            proc = self._proc
            if proc is not None and proc.returncode is None:
                _terminate(proc)
                await _reap(proc)
            self._proc = None
            self.pid = None
        self._set_state(P.STATE_STOPPED)

    async def _spawn(self, opts: RpcOptions):
        argv = opts.argv(self._program())
        self.lines.append(f"$ {' '.join(argv)}")
        self._banner_devices = {}
        kw: dict = {"stdin": subprocess.DEVNULL, "env": self.env}
        master = None
        if os.name == "posix":
            import pty  # noqa: PLC0415 - POSIX only
            master, slave = pty.openpty()
            kw.update(stdout=slave, stderr=slave, start_new_session=True)
            if sys.platform.startswith("linux"):
                kw["preexec_fn"] = _die_with_parent
        else:
            kw.update(stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                      creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0))
        try:
            proc = await asyncio.create_subprocess_exec(*argv, **kw)
        finally:
            if master is not None:
                os.close(slave)
        self._proc = proc
        self.pid = proc.pid
        self._started_at = time.monotonic()
        if master is not None:
            reader = asyncio.StreamReader(limit=1 << 16)
            loop = asyncio.get_running_loop()
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                         os.fdopen(master, "rb", buffering=0))
        else:
            reader = proc.stdout
        return proc, asyncio.create_task(self._read_output(reader), name="rpc-output")

    async def _read_output(self, reader: asyncio.StreamReader) -> None:
        in_devices = False
        while True:
            try:
                raw = await reader.readline()
            except OSError:
                return  # EIO on the pty once the worker has exited: its output is over
            except (ValueError, asyncio.LimitOverrunError):
                continue  # an over-long line was discarded by the reader; keep reading
            if not raw:
                return
            line = _ANSI_RE.sub("", raw.decode("utf-8", "replace")).rstrip("\r\n")[:MAX_LINE]
            self.lines.append(line)
            if m := _VERSION_RE.search(line):
                self.proto = m.group(1)
            if line.startswith("Devices:"):
                in_devices = True
                continue
            if in_devices:
                m = _DEVICE_RE.match(line)
                if m:
                    idx = len(self._banner_devices)
                    self._banner_devices[idx] = (m.group("name"), m.group("desc"))
                    self._name_devices()
                    self._on_change()
                else:
                    in_devices = False

    def _name_devices(self) -> None:
        for d in self.devices:
            if d.index in self._banner_devices:
                d.name, d.description = self._banner_devices[d.index]

    async def _wait_ready(self, proc, opts: RpcOptions) -> bool:
        """Probe until the worker answers; False if it exited or hung first."""
        deadline = time.monotonic() + READY_TIMEOUT
        delay = 0.02
        while time.monotonic() < deadline and not self._stopping.is_set():
            if proc.returncode is not None:
                return False
            # Race the probe against the worker's exit: when the port is taken, the probe may
            # reach whatever holds it while our worker is already gone.
            probe = asyncio.ensure_future(probe_rpc(opts.host, opts.port, timeout=2.0))
            exited = asyncio.ensure_future(proc.wait())
            await asyncio.wait({probe, exited}, return_when=asyncio.FIRST_COMPLETED)
            if exited.done():
                probe.cancel()
                await asyncio.wait({probe})
                return False
            exited.cancel()
            try:
                self.proto, self.devices = probe.result()
                self._name_devices()
                self._probed_at = time.monotonic()
                return True
            except (OSError, asyncio.TimeoutError, RpcProbeError):
                pass
            try:
                await asyncio.wait_for(proc.wait(), delay)
                return False
            except asyncio.TimeoutError:
                pass
            delay = min(delay * 1.5, 0.25)
        if proc.returncode is None and not self._stopping.is_set():
            self.lines.append(f"[herd-agent] no answer to the RPC handshake within {READY_TIMEOUT:.0f} s; killing it")
            _terminate(proc)
        return False


def _die_with_parent() -> None:
    """In the forked child (Linux): get SIGTERM if the agent dies, even by SIGKILL, so the
    worker is never left orphaned holding its port."""
    import ctypes  # noqa: PLC0415 - only in the child

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _terminate(proc) -> None:
    try:
        proc.terminate()
    except ProcessLookupError:
        pass


async def _reap(proc) -> None:
    try:
        await asyncio.wait_for(proc.wait(), STOP_GRACE)
    except asyncio.TimeoutError:
        try:
            proc.kill()
        except ProcessLookupError:
            pass
        await proc.wait()
