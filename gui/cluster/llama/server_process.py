"""Running one ``llama-server`` and reading what it says.

* :class:`ServerProcess` starts a :class:`~gui.cluster.llama.server_command.ServerSpec` and supervises
  it through ``starting → loading → ready → stopped`` (or ``failed``), keeps its log, explains a
  failure in words (:func:`explain_failure`) and stops it without leaving an orphan;
* :meth:`ServerProcess.placement` reads back from the log where the layers went
  (:mod:`gui.cluster.launching.placement` compares that with the plan).

Nothing here decides *how* llama-server should be started on this machine: that is
:mod:`gui.cluster.llama.server_start`, the one way herd starts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import httpx

from agent.i18n import QT_TRANSLATE_NOOP, translate
from gui.cluster.llama.placement_log import Placement, parse_placement
from gui.cluster.llama.server_command import ServerSpec

log = logging.getLogger(__name__)

# Server states, in the order a healthy launch goes through them.
STARTING = "starting"   # process spawned, HTTP not answering yet
LOADING = "loading"     # HTTP answers 503 while the model is sent to the devices
READY = "ready"         # /health says ok
STOPPING = "stopping"
STOPPED = "stopped"     # stopped on request
FAILED = "failed"       # exited or never came up; ``error`` says why


class LaunchError(RuntimeError):
    """A launch could not go ahead or did not come up. The message is for the user (in their
    language, see :mod:`agent.i18n`), so code that must tell causes apart reads ``code``.

    Attributes:
        code: a stable short name of the cause when one is known (``worker-busy``), else None.
    """

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


# --- reading llama-server's log ---------------------------------------------------------------

_LISTEN_RE = re.compile(r"listening on (http://\S+)")
# "0.00.014.005 D load_tensors: …": llama.cpp's timestamp, then the level letter.
_DEBUG_RE = re.compile(r"^[\d.]+ D ")


# What a failed llama-server said, and what that means for the user. First match wins.
_FAILURES: list[tuple[re.Pattern, str]] = [
    (re.compile(r"Failed to connect to (\S+)"),
     QT_TRANSLATE_NOOP("Launcher", "the RPC worker at {0} is unreachable (is its agent running and "
                                   "the worker started?)")),
    (re.compile(r"RPC server version mismatch|RPC handshake failed"),
     QT_TRANSLATE_NOOP("Launcher", "an RPC worker runs a different llama.cpp RPC protocol version "
                                   "than this llama-server; install the same llama.cpp build on "
                                   "every node")),
    (re.compile(r"Remote RPC server crashed|returned malformed response"),
     QT_TRANSLATE_NOOP("Launcher", "an RPC worker crashed or dropped the connection during the run")),
    (re.compile(r"couldn't bind HTTP server socket.*port: (\d+)|Address already in use"),
     QT_TRANSLATE_NOOP("Launcher", "the port {0} is already in use on this machine; choose another "
                                   "with --port")),
    (re.compile(r"out of memory|failed to allocate|unable to allocate|cudaMalloc failed|"
                r"ggml_backend_\w+_buffer_type_alloc_buffer: allocating .* failed", re.I),
     QT_TRANSLATE_NOOP("Launcher", "a device ran out of memory while loading the model; give it "
                                   "fewer layers or use a smaller context")),
    (re.compile(r"failed to load model '?([^']*)'?|error loading model"),
     QT_TRANSLATE_NOOP("Launcher", "llama-server could not load the model {0} (not a valid GGUF for "
                                   "this build?)")),
]


_DROPPED_AT_START = QT_TRANSLATE_NOOP(
    "Launcher",
    "an RPC worker closed the connection as soon as llama-server connected: its agent lets "
    "only a paired master's key through, over herd's encrypted link (start the cluster with herd "
    "on a paired machine), or the worker crashed")


#: How far llama-server's start-up got, read off its log (``-lv 4``): the last step whose
#: line it printed. The order is the order of a healthy start.
_STEPS: list[tuple[re.Pattern, str]] = [
    (re.compile(r"llama_model_loader:|load_tensors:|llama_model_load"),
     QT_TRANSLATE_NOOP("Launcher", "loading the model's weights")),
    (re.compile(r"llama_context:|llama_kv_cache"),
     QT_TRANSLATE_NOOP("Launcher", "setting up the context and KV cache")),
    (re.compile(r"warming up the model"),
     QT_TRANSLATE_NOOP("Launcher", "warming up the model")),
    (re.compile(r"model loaded|all slots are idle"),
     QT_TRANSLATE_NOOP("Launcher", "serving")),
]
_STARTING_STEP = QT_TRANSLATE_NOOP("Launcher", "starting")
#: Signals that mean the program crashed (rather than being stopped).
CRASH_SIGNALS = frozenset({"SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT"})


def startup_step(lines: list[str], was_ready: bool = False) -> str:
    """The step llama-server had reached, in words (translated): ``warming up the model`` …"""
    if was_ready:
        return translate("Launcher", "serving")
    reached = -1
    for line in lines:
        for i in range(len(_STEPS) - 1, reached, -1):
            if _STEPS[i][0].search(line):
                reached = i
                break
    return translate("Launcher", _STEPS[reached][1] if reached >= 0 else _STARTING_STEP)


def signal_name(returncode: int | None) -> str | None:
    """``SIGSEGV`` for a process killed by that signal, None for a normal exit."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return str(-returncode)


#: llama.cpp warnings that are not about the failure and read like a verdict on the user's model
#: (a vocabulary's control tokens: "this is probably a bug in the model"): never quoted as a reason.
_NOT_THE_REASON = re.compile(r"control-looking token|probably a bug in the model")


def last_lines(lines: list[str], n: int = 3) -> str:
    """The last ``n`` non-empty lines, without llama.cpp's timestamps and without warnings that
    are not about the failure (:data:`_NOT_THE_REASON`), joined by `` | ``."""
    kept = [re.sub(r"^[\d.]+ [A-Z] ", "", ln).strip() for ln in lines
            if ln.strip() and not _NOT_THE_REASON.search(ln)][-n:]
    return " | ".join(kept) or translate("Launcher", "(no output)")


def explain_failure(lines: list[str], returncode: int | None, was_ready: bool = True, *,
                    quote: bool = True) -> str:
    """One sentence saying why llama-server stopped, from its log and exit status.

    ``was_ready`` tells whether the server had come up: a worker connection dropped before that
    is usually the agent's relay refusing an address it does not know, not a crash mid-run. A
    crash names the step it happened in; with ``quote`` also the last lines llama-server printed
    (the launch log shows them), without it only words (a measurement's error for the user).
    """
    step = startup_step(lines, was_ready)
    for pattern, message in _FAILURES:
        if not was_ready and "Remote RPC server crashed" in pattern.pattern:
            message = _DROPPED_AT_START
        for line in lines:
            m = pattern.search(line)
            if m:
                groups = [g for g in m.groups() if g] or [""]
                said = translate("Launcher", message).format(*groups).replace("  ", " ")
                if message is _DROPPED_AT_START:
                    # which step lost the worker tells a refused address (at once) from a crash
                    return translate("Launcher", "{reason} (while {step})").format(reason=said, step=step)
                return said
    name = signal_name(returncode)
    if name in CRASH_SIGNALS:
        if not quote:
            return translate("Launcher", "llama-server crashed ({signal}) while {step}").format(signal=name, step=step)
        return translate("Launcher", "llama-server crashed ({signal}) while {step}; it last printed: "
                                     "{lines}").format(signal=name, step=step, lines=last_lines(lines))
    if name is not None:
        return translate("Launcher", "llama-server was killed by signal {signal}").format(signal=name)
    if not quote:
        return translate("Launcher", "llama-server stopped with status {status} while {step}").format(
            status=returncode, step=step)
    errors = [ln for ln in lines if (" E " in ln[:20] or "error" in ln.lower()) and not _NOT_THE_REASON.search(ln)]
    last = (errors or [ln for ln in lines if not _NOT_THE_REASON.search(ln)] or ["(no output)"])[-1].strip()
    return translate("Launcher", "llama-server exited with status {status}: {line}").format(
        status=returncode, line=last)


# --- supervising llama-server -----------------------------------------------------------------

def die_with_parent() -> None:  # pragma: no cover - runs in the child
    """``preexec_fn`` of a child herd starts: on Linux, if herd itself is killed (-9), the kernel
    sends the child SIGTERM, so a crash of the master never leaves a llama-server holding the
    workers, nor the demo's agents announcing themselves."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class LogFollower:
    """Hands on the lines a :class:`ServerProcess` logged since the last call, one server after
    another (a relaunch brings a new one).

    The log is a bounded deque: once full, its length stops growing while old lines fall out, so
    where the last call stopped is found by the last line handed on (the same object), not by
    an index.
    """

    def __init__(self) -> None:
        self._server: ServerProcess | None = None
        self._last_line: str | None = None

    def new_lines(self, server: ServerProcess | None) -> list[str]:
        """The lines ``server`` logged since the last call (all of them for a new server)."""
        if server is None:
            return []
        if server is not self._server:
            self._server, self._last_line = server, None
        lines = list(server.log)
        start = 0
        if self._last_line is not None:
            for i in range(len(lines) - 1, -1, -1):
                if lines[i] is self._last_line:
                    start = i + 1
                    break
        if start < len(lines):
            self._last_line = lines[-1]
        return lines[start:]


class ServerProcess:
    """One supervised ``llama-server``.

    Attributes:
        spec: what it runs.
        state: ``starting``, ``loading``, ``ready``, ``stopping``, ``stopped`` or ``failed``.
        error: why it failed, in words (None otherwise).
        log: what it printed (stderr and stdout, interleaved), capped at ``log_lines``; after
            ready, debug lines are left out.
        startup_log: every line up to ready (the placement report is read from it).
        returncode: exit status once it exited.

    ``on_state(callback)`` registers ``callback(state, error)`` for every state change.
    """

    def __init__(self, llama_server: str | os.PathLike, spec: ServerSpec, *,
                 log_lines: int = 20000, poll_interval: float = 0.2) -> None:
        self.program = Path(llama_server)
        self.spec = spec
        self.state = STOPPED
        self.error: str | None = None
        self.log: deque[str] = deque(maxlen=log_lines)
        self.startup_log: list[str] = []
        self.startup_log_max = 200_000
        self.returncode: int | None = None
        self.poll_interval = poll_interval
        self._proc: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task] = []
        self._callbacks: list[Callable[[str, str | None], None]] = []
        self._changed = asyncio.Event()
        self._stop_requested = False
        self._was_ready = False

    def failure_words(self) -> str:
        """Why this run failed, in words only (no log lines): for a user who did not ask to
        see llama-server's output, such as a measurement's error."""
        return explain_failure(list(self.log), self.returncode, self._was_ready, quote=False)

    @property
    def was_ready(self) -> bool:
        """Whether this run came up (answered ``/health``) before it ended."""
        return self._was_ready

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def url(self) -> str:
        return self.spec.url

    def on_state(self, callback: Callable[[str, str | None], None]) -> None:
        """Call ``callback(state, error)`` on every state change."""
        self._callbacks.append(callback)

    def _set(self, state: str, error: str | None = None) -> None:
        if state == self.state and error == self.error:
            return
        self.state, self.error = state, error
        log.info("llama-server %s%s", state, f": {error}" if error else "")
        for cb in list(self._callbacks):
            try:
                cb(state, error)
            except Exception:
                log.exception("state callback failed")
        self._changed.set()

    async def start(self) -> None:
        """Spawn the process and begin supervising it (returns at once; see :meth:`wait_ready`)."""
        if self._proc is not None and self._proc.returncode is None:
            raise LaunchError(translate("Launcher", "llama-server is already running"))
        self.log.clear()
        self.startup_log = []
        self.returncode = None
        self._stop_requested = False
        self._was_ready = False
        argv = self.spec.argv(self.program)
        log.info("starting %s", " ".join(argv))
        kw: dict = {}
        if sys.platform.startswith("linux"):
            kw["preexec_fn"] = die_with_parent
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, **kw)
        except OSError as exc:
            self._set(FAILED, f"cannot run {self.program}: {exc}")
            raise LaunchError(self.error) from exc
        self._set(STARTING)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._read_output(), name="llama-server-output"),
                       loop.create_task(self._watch(), name="llama-server-watch")]

    async def _read_output(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        # Read in chunks, not lines: at -lv 5 (on request) llama-server prints ~20 debug lines
        # per token, and per-line reads would cost the master noticeable CPU while it generates.
        pending = b""
        while True:
            chunk = await self._proc.stdout.read(1 << 16)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                self._keep(raw.decode("utf-8", "replace").rstrip("\r"))
        if pending:
            self._keep(pending.decode("utf-8", "replace"))

    def _keep(self, line: str) -> None:
        if self.state in (STARTING, LOADING):
            # Everything up to ready is kept whole: the placement report is in there.
            if len(self.startup_log) < self.startup_log_max:
                self.startup_log.append(line)
            self.log.append(line)
        elif not _DEBUG_RE.match(line):
            # Afterwards only info, warnings and errors: at -lv 5 the per-token debug lines
            # would push the useful lines out of the kept log.
            self.log.append(line)

    async def _watch(self) -> None:
        assert self._proc is not None
        proc = self._proc
        try:
            await self._poll_until_exit(proc)
            # Let the reader drain what the process printed last: the reason is usually there.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._tasks[0]), 5.0)
        except asyncio.CancelledError:
            await self._end_with_the_loop(proc)
            raise
        self.returncode = proc.returncode
        if self._stop_requested:
            self._set(STOPPED)
        else:
            self._set(FAILED, explain_failure(list(self.log), proc.returncode, self._was_ready))

    async def _poll_until_exit(self, proc: asyncio.subprocess.Process) -> None:
        async with httpx.AsyncClient() as client:
            while proc.returncode is None:
                if self.state in (STARTING, LOADING):
                    try:
                        r = await client.get(self.spec.url + "/health", timeout=2.0)
                        if r.status_code == 200:
                            self._was_ready = True
                            self._set(READY)
                        elif r.status_code == 503:
                            self._set(LOADING)
                    except httpx.HTTPError:
                        pass
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(proc.wait(), self.poll_interval)

    async def _end_with_the_loop(self, proc: asyncio.subprocess.Process) -> None:
        """The loop is shutting down (the app quits, ``asyncio.run`` returns) and cancelled the
        supervision: the server ends with it, and its pipe is read to the end. Otherwise asyncio's
        transport stays open and is closed later by the collector, on a loop that is gone."""
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        reader = self._tasks[0]
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), 5.0)
            await asyncio.wait_for(asyncio.gather(reader, return_exceptions=True), 5.0)
        if reader.cancelled() and proc.stdout is not None:  # cancelled with the rest: drain here
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.stdout.read(), 5.0)
        self.returncode = proc.returncode

    async def wait_for(self, states: set[str], timeout: float) -> str:
        """Wait until the state is one of ``states`` (or the server ended); returns the state."""
        deadline = time.monotonic() + timeout
        while self.state not in states and self.state not in (FAILED, STOPPED):
            left = deadline - time.monotonic()
            if left <= 0:
                raise asyncio.TimeoutError
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)
        return self.state

    async def wait_ready(self, timeout: float = 300.0) -> None:
        """Wait until ready; raise :class:`LaunchError` with the reason if it failed or timed out."""
        try:
            state = await self.wait_for({READY}, timeout)
        except asyncio.TimeoutError:
            raise LaunchError(translate("Launcher", "llama-server was not ready after {seconds} s "
                                        "(state {state})").format(seconds=f"{timeout:.0f}",
                                                                  state=self.state)) from None
        if state != READY:
            raise LaunchError(self.error or f"llama-server {state}")

    async def wait_exit(self) -> int | None:
        """Wait until the process has exited and supervision finished."""
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        return self.returncode

    async def stop(self, grace: float = 10.0) -> None:
        """Terminate, wait up to ``grace`` seconds, then kill; returns once the process is reaped."""
        proc = self._proc
        if proc is None:
            return
        self._stop_requested = True
        if proc.returncode is None:
            self._set(STOPPING)
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except asyncio.TimeoutError:
                log.warning("llama-server did not stop within %.0f s; killing it", grace)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        await self.wait_exit()
        if self.state != FAILED:
            self._set(STOPPED)

    def placement(self) -> Placement:
        """Where the layers went, from the log up to ready."""
        return parse_placement(self.startup_log)

    @property
    def listening_url(self) -> str | None:
        """The URL llama-server says it listens on, once it has said so."""
        for line in reversed(self.log):
            m = _LISTEN_RE.search(line)
            if m:
                return m.group(1)
        return None
