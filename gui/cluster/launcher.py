"""Running the master's ``llama-server`` against the workers, and checking what it did.

Three layers, each usable on its own:

* :class:`ServerSpec` — the exact ``llama-server`` command line for a split: ``--rpc`` in the
  plan's device order, ``--fit off -ngl N -ts c0,c1,…`` as whole numbers (the exact inverse of
  llama.cpp's layer map), ``--metrics`` for telemetry and ``-lv 4`` so the log reports the device
  order, the offload summary and each device's weights (``-lv 5`` adds a line per layer, but
  also ~20 debug lines per generated token, which slows decoding: only on request).
* :class:`ServerProcess` — starts that command and supervises it through
  ``starting → loading → ready → stopped`` (or ``failed``), keeps its log, explains a failure in
  words (:func:`explain_failure`) and stops it without leaving an orphan.
* :meth:`ServerProcess.placement` reads back from the log where the layers went
  (:mod:`gui.cluster.placement` compares that with the plan).

:class:`ClusterLauncher` ties them to the agents: it asks each planned node's agent to start its
RPC worker, runs the server, verifies placement, and on stop undoes exactly what it started.
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
from dataclasses import dataclass, replace
from pathlib import Path

import httpx

from agent.client import ReadyWorker, WorkerUnavailable
from agent.i18n import QT_TRANSLATE_NOOP, translate
from agent.protocol import AgentStatus, WorkerState
from gui.cluster import transfer, tunnel
from gui.cluster.placement import HOST_LOADED, HOST_MAPPED, Placement, PlacementCheck, check_placement, parse_placement
from gui.cluster.server_command import NO_REPACK_FLAG, ServerOptions, ServerSpec

__all__ = ["ServerSpec", "ServerOptions", "ServerProcess", "ClusterLauncher", "LaunchError", "NO_REPACK_FLAG"]

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


def last_lines(lines: list[str], n: int = 3) -> str:
    """The last ``n`` non-empty lines, without llama.cpp's timestamps, joined by `` | ``."""
    kept = [re.sub(r"^[\d.]+ [A-Z] ", "", ln).strip() for ln in lines if ln.strip()][-n:]
    return " | ".join(kept) or translate("Launcher", "(no output)")


def explain_failure(lines: list[str], returncode: int | None, was_ready: bool = True) -> str:
    """One sentence saying why llama-server stopped, from its log and exit status.

    ``was_ready`` tells whether the server had come up: a worker connection dropped before that
    is usually the agent's relay refusing an address it does not know, not a crash mid-run. A
    crash names the step it happened in and the last lines llama-server printed.
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
        return translate("Launcher", "llama-server crashed ({signal}) while {step}; it last printed: "
                                     "{lines}").format(signal=name, step=step, lines=last_lines(lines))
    if name is not None:
        return translate("Launcher", "llama-server was killed by signal {signal}").format(signal=name)
    errors = [ln for ln in lines if " E " in ln[:20] or "error" in ln.lower()]
    last = (errors or lines or ["(no output)"])[-1].strip()
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
        # Let the reader drain what the process printed last: the reason is usually there.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._tasks[0]), 5.0)
        self.returncode = proc.returncode
        if self._stop_requested:
            self._set(STOPPED)
        else:
            self._set(FAILED, explain_failure(list(self.log), proc.returncode, self._was_ready))

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


# --- a whole cluster: agents' workers + llama-server ------------------------------------------

def repack_crash(server: ServerProcess) -> list[str] | None:
    """The repacked host buffers (``["AMX"]``, ``["CPU_REPACK"]``) of a llama-server that
    crashed before it was ready while repacking was on; None when that is not what happened.

    Seen on Intel CPUs with AMX: Q8_0 and Q4_0 models with layers on the host die with SIGSEGV
    while warming up, and serve with ``--no-repack`` (``../shared/handbook/llama-cpp.md``).
    """
    if server.state != FAILED or server._was_ready or NO_REPACK_FLAG in server.spec.args():
        return None
    if signal_name(server.returncode) not in CRASH_SIGNALS:
        return None
    extras = [k for k in server.placement().host_buffers() if k not in (HOST_MAPPED, HOST_LOADED)]
    return extras or None


def spec_from_plan(plan, model: str | os.PathLike, *, ctx: int, host: str = "127.0.0.1",
                   port: int = 8080, extra_args: list[str] | None = None, alias: str | None = None,
                   verify_layers: bool = False) -> ServerSpec:
    """:meth:`ServerSpec.for_plan` with the server options as keywords."""
    return ServerSpec.for_plan(plan, model, ServerOptions(ctx=ctx, host=host, port=port, alias=alias,
                                                          extra_args=tuple(extra_args or ())),
                               verify_layers=verify_layers)


def devices_from_status(node, status: AgentStatus | dict):
    """The plan :class:`~gui.cluster.plan.Device` list of a node from its agent's ``status``
    (an :class:`~agent.protocol.AgentStatus`, or the decoded document).

    A node whose engine offers more than its CPU (a GPU build that finds a GPU) has a device per
    GPU and one for its CPU, in the order its worker is then started with (``-d Vulkan0,CPU``),
    with the worker's live free memory when it already runs with exactly those. Otherwise, while
    the worker runs, the devices it exposes; when it does not run yet, one CPU device with the
    RAM free — what ``ggml-rpc-server`` exposes on a machine without a GPU.
    """
    from gui.cluster.plan import Device  # the planner is optional for ServerProcess users

    status = AgentStatus.of(status)
    found = status.rpc.devices
    if status.offers_gpu:
        offered = status.engine_devices
        if [d.name for d in found] == [d.name for d in offered]:
            free = [f.free_bytes for f in found]  # the running worker's own view, live
        else:
            free = [d.free_bytes for d in offered]
        return [Device(node_id=node.id, node_name=node.name, endpoint=node.rpc_endpoint, index=i,
                       name=d.name, free_bytes=f, total_bytes=d.total_bytes)
                for i, (d, f) in enumerate(zip(offered, free))]
    if found:
        return [Device(node_id=node.id, node_name=node.name, endpoint=node.rpc_endpoint, index=d.index,
                       name=d.name, free_bytes=d.free_bytes, total_bytes=d.total_bytes) for d in found]
    return [Device(node_id=node.id, node_name=node.name, endpoint=node.rpc_endpoint, index=0,
                   name="CPU", free_bytes=status.ram_free_bytes, total_bytes=status.ram_total_bytes)]


def offers_gpu(status: AgentStatus | dict) -> bool:
    """Whether a node's engine offers a GPU (its agent's ``status``)."""
    return AgentStatus.of(status).offers_gpu


def worker_devices(plan, endpoint: str, gpu_node: bool) -> list[str] | None:
    """The ``-d`` list a node's worker must run with for ``plan``: the names of the plan's
    devices at ``endpoint`` in their index order. None on a node without a GPU (``gpu_node``
    false): its worker's default is its CPU, which is what it exposes anyway."""
    mine = sorted((d for d in plan.devices() if d.kind == "rpc" and d.endpoint == endpoint), key=lambda d: d.index)
    names = [d.name for d in mine]
    return names if gpu_node and names else None


@dataclass
class WorkerHandle:
    """A node's RPC worker as the launcher uses it.

    Attributes:
        node, client: the node and its agent's client.
        worker: the :class:`~agent.client.ReadyWorker` that started it or found it running.
        restarts: the worker's restart count once it was ready: a higher one later means it died.
    """

    node: object
    client: object
    worker: ReadyWorker | None = None
    restarts: int = 0

    @property
    def started(self) -> bool:
        """Whether herd started this worker (and so stops it at the end)."""
        return self.worker is not None and self.worker.started

    @started.setter
    def started(self, value: bool) -> None:
        if self.worker is None:
            self.worker = ReadyWorker(self.client)
        self.worker.started = bool(value)


class ClusterLauncher:
    """Start a launch request on the cluster, verify it, and undo exactly what was started.

    Args:
        llama_server: path of the master's ``llama-server``.
        request: the :class:`~gui.cluster.launch.LaunchRequest` (plan, model, server options,
            worker threads, verify flag).
        nodes: {node id: :class:`~gui.cluster.nodes.Node`} holding every node the plan uses.
        client_for: ``client_for(node)`` → a paired :class:`agent.client.AgentClient`.
        worker_timeout: seconds a worker may take to become ready.

    Attributes:
        plan, model_info: the request's plan and model.
        spec: the :class:`ServerSpec` llama-server runs with.
        server: the :class:`ServerProcess` once started.
        check: the :class:`PlacementCheck` after :meth:`start`.
        notes: what the launch had to do differently, for the user (translated): e.g. that
            llama-server crashed in llama.cpp's weight repacking and was started again with
            ``--no-repack`` (:func:`repack_crash`).
    """

    def __init__(self, llama_server, request, nodes: dict, client_for: Callable, *,
                 worker_timeout: float = 30.0) -> None:
        self.llama_server = llama_server
        self.request = request
        self.plan = request.plan
        self.model_info = request.model
        self.nodes = nodes
        self.client_for = client_for
        self.spec = request.spec()
        self.threads = request.threads
        self.worker_timeout = worker_timeout
        self.workers: list[WorkerHandle] = []
        self.server: ServerProcess | None = None
        self.check: PlacementCheck | None = None
        self.notes: list[str] = []
        #: ``on_transfer(event)``: each worker's weights by the byte while llama-server loads (a
        #: :class:`~gui.cluster.transfer.TransferEvent` per poll; see :func:`transfer.watch_launch`)
        self.on_transfer: Callable | None = None

    def planned_nodes(self) -> list:
        """The nodes whose workers the plan uses, in ``--rpc`` order."""
        from gui.cluster.launch import nodes_for_plan
        return nodes_for_plan(self.plan, self.nodes.values())

    async def start_workers(self) -> None:
        """Have each planned node's RPC worker ready (started through its agent if needed)."""
        for node in self.planned_nodes():
            client = self.client_for(node)
            handle = WorkerHandle(node, client)
            self.workers.append(handle)
            # (a worker that runs with other devices is restarted with the plan's: device
            # numbers in the plan are positions in its -d list)
            handle.worker = ReadyWorker(client, threads=self.threads, timeout=self.worker_timeout,
                                        devices=lambda st, ep=node.rpc_endpoint: worker_devices(self.plan, ep,
                                                                                                st.offers_gpu))
            try:
                status = await handle.worker.start()
            except WorkerUnavailable as exc:
                raise self._worker_error(node, exc) from None
            handle.restarts = status.rpc.restarts

    def _worker_error(self, node, exc: WorkerUnavailable) -> LaunchError:
        """The launch's words for a worker that cannot be used (naming the node)."""
        rpc = exc.agent_status.rpc
        if exc.code == "worker-busy":
            text = translate("Launcher", "{node}: its RPC worker is in use by another master ({client})").format(
                node=node.name, client=rpc.client)
        elif exc.code == "worker-crashed":
            text = translate("Launcher", "{node}: the RPC worker could not start: {why}").format(
                node=node.name, why=rpc.error or translate("Launcher", "no reason given"))
        else:
            text = translate("Launcher", "{node}: the RPC worker was not ready after {seconds} s (state {state})").format(
                node=node.name, seconds=f"{self.worker_timeout:.0f}", state=rpc.state)
        return LaunchError(text, code=exc.code)

    async def start(self, timeout: float = 300.0) -> PlacementCheck:
        """Workers, then llama-server; returns the placement check. On failure everything
        started so far is stopped again and :class:`LaunchError` says why."""
        watch = transfer.watch_launch(self)
        try:
            await self.start_workers()
            self.spec = await tunnel.route(self)  # --rpc through the local TLS forwarders (#13)
            self.server = ServerProcess(self.llama_server, self.spec)
            await self.server.start()
            try:
                await self.server.wait_ready(timeout)
            except LaunchError:
                buffers = repack_crash(self.server)
                if buffers is None:
                    await self._name_dead_worker()
                    raise
                # Once, without repacking (issue #11): slower host layers, but it serves.
                self.notes.append(translate(
                    "Launcher", "llama-server crashed ({signal}) while {step} with host weights repacked "
                                "for this CPU ({buffers}); it was started again with --no-repack, which "
                                "serves but computes the host's layers more slowly").format(
                    signal=signal_name(self.server.returncode),
                    step=startup_step(self.server.startup_log), buffers=", ".join(buffers)))
                log.warning("%s", self.notes[-1])
                self.spec = replace(self.spec, extra_args=[*self.spec.extra_args, NO_REPACK_FLAG])
                self.server = ServerProcess(self.llama_server, self.spec)
                await self.server.start()
                await self.server.wait_ready(timeout)
            self.check = check_placement(self.plan, tunnel.unmap(self, self.server.placement()), self.model_info)
            await transfer.stop_watch(watch, final=True)
            return self.check
        except BaseException:
            await transfer.stop_watch(watch)
            await self.stop()
            raise

    async def _name_dead_worker(self) -> None:
        """After llama-server failed to come up: if a worker's agent says its RPC worker died
        meanwhile, raise a :class:`LaunchError` that names the node, the step llama-server was
        at and the worker's last lines; otherwise return (the server's own reason stands)."""
        assert self.server is not None
        step = startup_step(self.server.startup_log)
        for h in self.workers:
            try:
                rpc = (await h.client.status()).rpc
            except Exception as exc:  # the node itself may be gone: say what llama-server said
                log.info("could not ask %s about its worker: %s", getattr(h.node, "name", h.node), exc)
                continue
            if rpc.restarts <= h.restarts and rpc.state != WorkerState.CRASHED:
                continue
            crash = rpc.last_crash
            why = (crash.error if crash else None) or rpc.error or translate("Launcher", "no reason given")
            raise LaunchError(translate(
                "Launcher", "{node}: its RPC worker died while llama-server was {step} ({why}); it last "
                            "printed: {lines}").format(
                node=h.node.name, step=step, why=why, lines=last_lines(list(crash.lines if crash else ()))),
                code="worker-died")

    async def stop(self) -> None:
        """Stop llama-server, then the workers this launcher started; close the clients."""
        if self.server is not None:
            await self.server.stop()
        await tunnel.close(self)
        for h in reversed(self.workers):
            try:
                if h.worker is not None:
                    await h.worker.stop()
            except Exception as exc:  # the node may be gone; stopping the rest matters more
                log.warning("could not stop the RPC worker of %s: %s", getattr(h.node, "name", h.node), exc)
            finally:
                with contextlib.suppress(Exception):
                    await h.client.aclose()
        self.workers.clear()
