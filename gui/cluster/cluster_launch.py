"""The one launch path of the app's Start and of ``herd up``: request → checks → preflight →
supervision, with one :class:`~gui.cluster.launching.state.LaunchState` (#33).

::

    launch = ClusterLaunch()
    launch.subscribe(lambda state, error: print(state, error))
    reading = launch.check(request, nodes, engine, host_free_bytes=free)        # no network
    reading = await launch.preflight(request, nodes, client_for, engine, host_free_bytes=free)
    if reading.may_start:
        check = await launch.start(request, nodes, client_for, engine.llama_server)
    launch.state, launch.is_running, launch.is_serving
    await launch.stop()

It owns the :class:`~gui.cluster.failover.supervisor.ClusterSupervisor` while a cluster runs, and
follows llama-server's own states and the supervisor's relaunches. Qt-free and used on one
asyncio loop; listeners are plain callbacks called on that loop (the app relays them to its
GUI thread, :class:`gui.session.ClusterSession`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable

from agent.i18n import translate
from gui.cluster.failover.events import EventKind, FailoverEvent
from gui.cluster.failover.supervisor import ClusterSupervisor, FailoverPolicy, supervise
from gui.cluster.launching.preflight_reading import PreflightReading, Refusal, read_findings
from gui.cluster.launching.request import LaunchRequest, check_request, preflight
from gui.cluster.launching.state import (
    FAILED,
    MOVES,
    READY,
    RELAUNCHING,
    STARTING,
    STOPPED,
    STOPPING,
    LaunchState,
)
from gui.cluster.llama.server_process import LaunchError

log = logging.getLogger(__name__)

#: llama-server's states that the server process's own reports move the launch to as they are
_SERVER_REPORTS = frozenset({"starting", "loading", "failed"})


class LaunchRefused(LaunchError):
    """A launch that may not go ahead, and why (:class:`Refusal`); its message says it in words.

    Attributes:
        refusal: the :class:`~gui.cluster.launching.preflight_reading.Refusal`.
        reading: the checks' :class:`PreflightReading`, when checks refused it (else None).
    """

    def __init__(self, refusal: Refusal, message: str, reading: PreflightReading | None = None) -> None:
        super().__init__(message, code=str(refusal))
        self.refusal = refusal
        self.reading = reading


class ClusterLaunch:
    """The cluster this process launches: its state, its supervisor, and the steps to start it.

    Attributes:
        state: the :class:`LaunchState` now.
        error: why it failed (with ``state`` FAILED), else "".
        supervisor: the running :class:`ClusterSupervisor`, or None (nothing runs or recovers).
        placement: the placement check of the last start or relaunch that served, or None.
    """

    def __init__(self) -> None:
        self.state = STOPPED
        self.error = ""
        self.supervisor: ClusterSupervisor | None = None
        self.placement = None
        self._listeners: list[Callable[[LaunchState, str], None]] = []
        self._failover_listeners: list[Callable[[FailoverEvent], None]] = []
        self._follower: asyncio.Task | None = None

    # --- what listeners and questions read -------------------------------------------------------

    def subscribe(self, callback: Callable[[LaunchState, str], None]) -> Callable[[], None]:
        """Call ``callback(state, error)`` on every change of state; returns the unsubscribe function."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    def subscribe_failover(self, callback: Callable[[FailoverEvent], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for each failover event of the running cluster, before the
        state it leads to is announced; returns the unsubscribe function."""
        self._failover_listeners.append(callback)
        return lambda: self._failover_listeners.remove(callback) if callback in self._failover_listeners else None

    @property
    def is_running(self) -> bool:
        """True while a cluster started here runs or recovers (Stop is the way out)."""
        return self.supervisor is not None

    @property
    def is_serving(self) -> bool:
        """True while the cluster serves (ready, and not being stopped)."""
        return self.supervisor is not None and self.state == READY

    @property
    def request(self) -> LaunchRequest | None:
        """The request that runs now (after a failover: with the survivors' plan), or None."""
        sup = self.supervisor
        return sup.launcher.request if sup is not None else None

    @property
    def plan(self):
        """The plan the cluster runs now (after a failover: the survivors' plan), or None."""
        sup = self.supervisor
        return sup.launcher.plan if sup is not None else None

    def _move(self, state: LaunchState, error: str = "") -> None:
        if state == self.state and error == self.error:
            return
        if state != self.state and state not in MOVES[self.state]:
            log.warning("launch state %s → %s is not a move a launch makes; ignored", self.state, state)
            return
        self.state, self.error = state, error
        for callback in list(self._listeners):
            try:
                callback(state, error)
            except Exception:  # a listener's fault must not stop the launch
                log.exception("a launch state listener failed")

    # --- the steps ---------------------------------------------------------------------------------

    def check(self, request: LaunchRequest, nodes: Iterable, engine, *,
              host_free_bytes: int | None = None) -> PreflightReading:
        """The checks that need no network (engine, memory fit, the plan's nodes), read."""
        return read_findings(check_request(request, nodes, engine, host_free_bytes=host_free_bytes))

    async def preflight(self, request: LaunchRequest, nodes: Iterable, client_for: Callable, engine, *,
                        host_free_bytes: int | None = None, doctor: bool = True) -> PreflightReading:
        """The checks, then (``doctor``) the doctor's checks of the plan's nodes that answer, read."""
        return read_findings(await preflight(request, nodes, client_for, engine,
                                             host_free_bytes=host_free_bytes, doctor=doctor))

    async def start(self, request: LaunchRequest, nodes: Iterable, client_for: Callable, llama_server, *,
                    policy: FailoverPolicy | None = None, timeout: float = 300.0,
                    host_free_bytes: Callable[[], int | None] | None = None,
                    probe_client_for: Callable | None = None, conversation=None,
                    on_transfer: Callable | None = None):
        """Start the workers and llama-server for ``request`` under a failover supervisor and
        wait until the model is loaded; returns the placement check. Raises
        :class:`LaunchRefused` while a cluster runs, and what the launcher raises (the launch
        then is ``failed``, or ``stopped`` when cancelled)."""
        if self.supervisor is not None:
            raise LaunchRefused(Refusal.ALREADY_RUNNING,
                                translate("Launcher", "a cluster is already running; stop it first"))
        supervisor = self.supervisor = supervise(
            request, nodes, client_for, llama_server, policy=policy, host_free_bytes=host_free_bytes,
            probe_client_for=probe_client_for, conversation=conversation)
        supervisor.on_transfer = on_transfer
        self.placement = None
        self._move(STARTING)
        self._follower = asyncio.get_running_loop().create_task(self._follow_servers(supervisor),
                                                                 name="launch-follows-llama-server")
        try:
            check = await supervisor.start(timeout)
        except BaseException as exc:
            if self.supervisor is supervisor:
                self.supervisor = None
                await self._stop_following()
            with contextlib.suppress(Exception):  # (what a half-made start left: no orphans)
                await supervisor.stop()
            if self.state not in (STOPPING, STOPPED):  # (not the user's Stop while it started)
                cancelled = isinstance(exc, asyncio.CancelledError)
                self._move(STOPPED if cancelled else FAILED, "" if cancelled else str(exc))
            raise
        self.placement = check
        supervisor.subscribe(self._on_failover)
        self._move(READY)
        return check

    async def _follow_servers(self, supervisor: ClusterSupervisor) -> None:
        """Follow each llama-server process the supervisor runs (the first, one restarted in
        the start after a crash in weight repacking, each relaunch's): they are made inside its
        start, so they are looked for a few times a second, then followed by their callbacks."""
        followed = None
        while True:
            server = supervisor.server
            if server is not None and server is not followed:
                followed = server
                self._server_reported(supervisor, server, server.state, server.error)  # (said before this)
                server.on_state(lambda state, error, s=server: self._server_reported(supervisor, s, state, error))
            await asyncio.sleep(0.05)

    async def _stop_following(self) -> None:
        task, self._follower = self._follower, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _server_reported(self, supervisor: ClusterSupervisor, server, state: str, error: str | None) -> None:
        """What a llama-server process says of itself (``starting``, ``loading``, ``failed``,
        ``stopped``), taken when it is the running supervisor's current one. ``ready`` is the
        launch's to say, once the placement is checked; a server that stops while the cluster
        serves was stopped by the failover supervisor to relaunch."""
        if self.supervisor is not supervisor or supervisor.server is not server or self.state == STOPPING:
            return  # (an earlier process reaped late; the user's Stop announces its own end)
        if state in _SERVER_REPORTS:
            self._move(LaunchState(state), error or "")
        elif state == "stopped" and self.state == READY:
            self._move(RELAUNCHING)

    def _on_failover(self, ev: FailoverEvent) -> None:
        for callback in list(self._failover_listeners):
            try:
                callback(ev)
            except Exception:
                log.exception("a failover listener failed")
        sup = self.supervisor
        if sup is None:
            return
        if ev.kind == EventKind.RELAUNCHING:
            self._move(RELAUNCHING)
        elif ev.kind == EventKind.RECOVERED:
            self.placement = sup.check
            self._move(READY)

    async def stop(self, *, before_stopped: Callable[[], Awaitable[None]] | None = None) -> None:
        """Stop llama-server and the workers the launch started (nothing when none runs).
        ``before_stopped`` is awaited once they are stopped, before ``stopped`` is announced
        (the app forwards the end of llama-server's log there)."""
        supervisor, self.supervisor = self.supervisor, None
        if supervisor is None:
            return
        self._move(STOPPING)
        await self._stop_following()
        try:
            await supervisor.stop()
            if before_stopped is not None:
                await before_stopped()
        finally:
            self._move(STOPPED)
