"""Keeping a cluster serving when a worker is lost: detect, explain, re-plan, relaunch.

llama.cpp does not survive a lost RPC worker: ``llama-server`` aborts with ``Remote RPC server
crashed or returned malformed response`` when a worker dies mid-request, and when a worker's PC
merely goes quiet (sleep, Wi-Fi, a closed laptop) it keeps a dead connection and hangs on the
next request. :class:`ClusterSupervisor` wraps :class:`~gui.cluster.launching.launcher.ClusterLauncher`
and takes care of that:

1. **Detect** (within a few seconds, :class:`FailoverPolicy`): every ``poll_interval`` it asks
   each node's agent for its status. A node is lost when its agent stops answering
   (``misses`` polls in a row: crashed, stopped, link down) or its RPC worker is no longer the
   process llama-server connected to (killed and restarted by the agent, stopped, crashed).
   llama-server exiting on its own is noticed at once, and the node to blame is looked up.
2. **Explain**: a :class:`FailoverEvent` says which node and why, as facts; the words are made
   at the edge (:mod:`gui.cluster.failover.text`), where the banner, the log and ``herd up`` read
   them.
3. **Re-plan** over the nodes that still answer (by free memory). When the model no longer
   fits, it says so and offers the options: wait for the node to come back (the default), or run
   with more layers on this computer (:meth:`ClusterSupervisor.choose`).
4. **Relaunch** llama-server on the **same host:port**, so other apps pointed at the endpoint
   keep working — after a visible countdown that :meth:`ClusterSupervisor.cancel` stops. With
   ``auto_recover`` off it waits for :meth:`ClusterSupervisor.recover_now` instead.
5. **Notice the node's return** and offer to re-plan with it (:meth:`ClusterSupervisor.rejoin`,
   automatic with ``rejoin="auto"`` or when the cluster was waiting for exactly that).

A chat in flight is not lost: pass the :class:`~gui.cluster.chat.conversation.Conversation` and the
reply the loss cut is marked on it with the reason (``Conversation.mark_cut``); after the relaunch
the conversation is resent by the next request, or the cut reply continued where it stopped (see
:mod:`gui.cluster.chat.conversation`).

Everything runs on one asyncio loop and is Qt-free; the app and ``herd up`` subscribe to events.
The states and their moves are here; the relaunch policy (the settings, the re-plan, when to stop
relaunching) is :mod:`gui.cluster.failover.policy` (#33).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from enum import Enum

from agent.client import AgentError
from agent.i18n import translate
from agent.protocol import WorkerState
from gui.cluster.failover.events import (
    OPT_HOST,
    OPT_RECOVER,
    OPT_REJOIN,
    OPT_WAIT,
    EventKind,
    FailoverEvent,
    WaitReason,
)
from gui.cluster.failover.policy import QUICK_FAILURE_S, FailoverPolicy, QuickFailures, replan
from gui.cluster.failover.text import describe_event, interruption_note
from gui.cluster.launching.launcher import ClusterLauncher
from gui.cluster.launching.request import LaunchRequest, nodes_for_plan
from gui.cluster.llama.server_process import FAILED, LaunchError
from gui.cluster.nodes.health import NodeHealth

log = logging.getLogger(__name__)

class FailoverState(str, Enum):
    """Where the supervisor is. The moves it makes (:data:`MOVES`)::

        starting → serving → recovering → countdown → relaunching → serving
                                        ↘ waiting ↗ (a node back, or the user's choice)
        any → stopped (stop())
    """

    STARTING = "starting"
    SERVING = "serving"
    RECOVERING = "recovering"    # a loss was detected; stopping the server, re-planning
    COUNTDOWN = "countdown"      # about to relaunch; cancel() stops it
    RELAUNCHING = "relaunching"
    WAITING = "waiting"          # needs a node to come back or the user to choose
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value


STARTING, SERVING, RECOVERING, COUNTDOWN, RELAUNCHING, WAITING, STOPPED = FailoverState

#: The moves the supervisor may make; any other is a bug (:meth:`ClusterSupervisor._enter` says so).
MOVES: dict[FailoverState, frozenset[FailoverState]] = {
    STARTING: frozenset({SERVING}),
    SERVING: frozenset({RECOVERING}),
    RECOVERING: frozenset({RECOVERING, COUNTDOWN, RELAUNCHING, WAITING}),
    COUNTDOWN: frozenset({RELAUNCHING, WAITING, RECOVERING}),
    RELAUNCHING: frozenset({SERVING, WAITING}),
    WAITING: frozenset({RECOVERING, RELAUNCHING, WAITING}),
}

class ClusterSupervisor:
    """A :class:`ClusterLauncher` that survives a lost worker (see the module docstring).

    Args:
        llama_server: path of the master's ``llama-server``.
        request: the :class:`~gui.cluster.launching.request.LaunchRequest` of the first launch; relaunches
            use it with another plan (:meth:`~gui.cluster.launching.request.LaunchRequest.with_plan`).
        nodes: {node id: node} for every node that may be used, at least those of the plan.
        client_for: ``client_for(node)`` → a paired :class:`agent.client.AgentClient`.
        policy: a :class:`FailoverPolicy`.
        probe_client_for: ``probe_client_for(node)`` → an agent client with a short timeout for
            the status polls (default: ``client_for``).
        host_free_bytes: ``host_free_bytes()`` → RAM free on this computer (None: unknown).
        conversation: a chat transcript whose reply in flight is marked interrupted on a loss.

    Attributes:
        state: ``starting``, ``serving``, ``recovering``, ``countdown``, ``relaunching``,
            ``waiting`` or ``stopped``.
        request: the user's request; a relaunch starts it with another plan (what this machine
            must add to llama-server, such as ``--no-repack``, each start adds again).
        launcher: the current :class:`ClusterLauncher`.
        notes: what the launches had to do differently, for the user (:attr:`ClusterLauncher.notes`).
        lost: {node id: node} lost and not back yet.
        options: what :meth:`choose` accepts now.
        events: every :class:`~gui.cluster.failover.events.FailoverEvent` so far (facts; their
            words are :func:`~gui.cluster.failover.text.describe_event`).

    ``subscribe(callback)`` registers ``callback(event)`` for every :class:`FailoverEvent`.
    """

    #: ``on_transfer(event)``: what each launch's :attr:`ClusterLauncher.on_transfer` gets (#16)
    on_transfer: Callable | None = None

    def __init__(self, llama_server, request, nodes: dict, client_for: Callable, *,
                 policy: FailoverPolicy | None = None, probe_client_for: Callable | None = None,
                 host_free_bytes: Callable[[], int | None] | None = None,
                 conversation=None) -> None:
        self.llama_server = llama_server
        self.request = request
        self.nodes = dict(nodes)
        self.client_for = client_for
        self.probe_client_for = probe_client_for or client_for
        self.notes: list[str] = []
        self.policy = policy or FailoverPolicy()
        self.host_free_bytes = host_free_bytes or (lambda: None)
        self.conversation = conversation
        self.launcher = self._make_launcher(request.plan)
        self.state = STARTING
        self.lost: dict[str, object] = {}
        self.options: tuple[str, ...] = ()
        self.events: list[FailoverEvent] = []
        self._subs: list[Callable[[FailoverEvent], None]] = []
        self._started_ids: set[str] = set()   # nodes whose worker herd started: stopped at the end
        #: the nodes' health, polled with short-timeout clients (gui.cluster.nodes.health)
        self.health = NodeHealth(self.probe_client_for, misses=self.policy.misses, timeout=self.policy.poll_timeout)
        self._pending_plan = None
        self._lost_at: float | None = None
        self._wake = asyncio.Event()
        self._cancel = asyncio.Event()
        self._monitor: asyncio.Task | None = None
        self._recovery: asyncio.Task | None = None
        self._stopping = False
        self._serving_since: float | None = None
        self._quick_failures = QuickFailures()
        self._back: tuple[str, ...] = ()   # names of the nodes that came back, for the rejoin's re-plan

    # --- events -------------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[FailoverEvent], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event; returns the unsubscribe function."""
        self._subs.append(callback)
        return lambda: self._subs.remove(callback) if callback in self._subs else None

    def _emit(self, kind: EventKind, **facts) -> FailoverEvent:
        ev = FailoverEvent(kind, **facts)
        self.events.append(ev)
        log.info("failover: %s", describe_event(ev))
        for cb in list(self._subs):
            try:
                cb(ev)
            except Exception:
                log.exception("failover subscriber failed")
        return ev

    def _enter(self, state: FailoverState) -> None:
        """Move to ``state``; a move :data:`MOVES` does not allow is logged as the bug it is (the
        move is made: stopping the watch over a wrong arrow would strand the user's cluster)."""
        if state not in MOVES.get(self.state, frozenset()):
            log.error("failover: unexpected move %s → %s", self.state, state)
        self.state = state

    @property
    def url(self) -> str:
        """The endpoint; the same before and after every relaunch."""
        return self.launcher.spec.url

    @property
    def spec(self):
        """The current launch's :class:`~gui.cluster.launching.launcher.ServerSpec` (same host:port always)."""
        return self.launcher.spec

    @property
    def server(self):
        """The current :class:`~gui.cluster.launching.launcher.ServerProcess` (a new one after a relaunch)."""
        return self.launcher.server

    @property
    def check(self):
        """The current launch's :class:`~gui.cluster.launching.placement.PlacementCheck` (None until it serves)."""
        return self.launcher.check

    # --- lifecycle ----------------------------------------------------------------------------

    def _make_launcher(self, plan) -> ClusterLauncher:
        nodes = {n.id: n for n in nodes_for_plan(plan, self.nodes.values())}
        launcher = ClusterLauncher(self.llama_server, self.request.with_plan(plan), nodes, self.client_for,
                               worker_timeout=20.0)
        launcher.on_transfer = lambda ev: self.on_transfer and self.on_transfer(ev)
        return launcher

    async def start(self, timeout: float = 300.0):
        """Launch the first plan (like :meth:`ClusterLauncher.start`), then watch it.
        Returns the placement check; raises what the launcher raises."""
        check = await self.launcher.start(timeout)
        await self._adopt(self.launcher)
        self._enter(SERVING)
        self._monitor = asyncio.get_running_loop().create_task(self._watch(), name="failover-watch")
        return check

    async def stop(self) -> None:
        """Stop watching, stop llama-server and every worker herd started (also on lost nodes
        that came back); close the clients."""
        self._stopping = True
        self._cancel.set()
        self._wake.set()
        for task in (self._monitor, self._recovery):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self._stop_server(self.launcher)
        stopped = {id(h.node) for h in self.launcher.workers}
        await self.launcher.stop()
        # Workers herd started on nodes the current plan does not use (lost, then back).
        for nid in sorted(self._started_ids):
            node = self.nodes.get(nid)
            if node is None or id(node) in stopped:
                continue
            client = self.probe_client_for(node)
            try:
                await client.rpc_stop()
            except Exception as exc:
                log.info("could not stop the RPC worker of %s: %s", node.name, exc)
            finally:
                with contextlib.suppress(Exception):
                    await client.aclose()
        await self.health.close()
        self.state = STOPPED  # (from any state: stop() always ends it)

    async def wait_until(self, states: set[str], timeout: float) -> str:
        """Wait (polling) until the state is one of ``states``; returns it. TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        while self.state not in states:
            if time.monotonic() > deadline:
                raise asyncio.TimeoutError(f"state is still {self.state}")
            await asyncio.sleep(0.05)
        return self.state

    # --- user choices -------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the countdown to an automatic relaunch (the cluster then waits)."""
        self._cancel.set()

    async def recover_now(self) -> None:
        """Relaunch on the survivors now (skips or replaces the countdown)."""
        await self.choose(OPT_RECOVER)

    async def choose(self, option: str) -> None:
        """Take one of :attr:`options`: ``wait``, ``host``, ``recover`` or ``rejoin``."""
        if option not in self.options:
            raise ValueError(f"{option!r} is not possible now (possible: {', '.join(self.options) or 'none'})")
        if option == OPT_WAIT:
            self._wait_for_lost((OPT_WAIT, OPT_HOST) if self._pending_plan is not None else (OPT_WAIT,))
            return
        if option == OPT_REJOIN:
            await self.rejoin()
            return
        self._cancel.set()
        await self._join_recovery()
        self._run_recovery(self._relaunch(self._pending_plan, forced=option == OPT_HOST))
        await self._join_recovery()

    async def rejoin(self) -> None:
        """Re-plan with the nodes that came back and relaunch (the first plan if every one of
        its nodes is back)."""
        self._cancel.set()
        await self._join_recovery()
        self._run_recovery(self._replan_and_relaunch(back=self._back, stop_first=True, immediate=True))
        await self._join_recovery()

    # --- watching -----------------------------------------------------------------------------

    def _cache_shape(self):
        """How llama-server sizes its caches for the request (its context and server arguments)."""
        try:
            return self.request.options.cache_shape()
        except ValueError:  # the launch itself started with these arguments; size by the context
            return self.request.options.ctx

    async def _adopt(self, launcher: ClusterLauncher) -> None:
        """A launch succeeded: remember what it started and what each worker looks like now."""
        self.launcher = launcher
        self.notes.extend(n for n in launcher.notes if n not in self.notes)
        for h in launcher.workers:
            if h.started:
                self._started_ids.add(h.node.id)
            # Whoever started a worker first, herd stops it at the end if herd started it ever.
            h.started = h.node.id in self._started_ids
        await self.health.remember([h.node for h in launcher.workers])
        server = launcher.server
        self._serving_since = time.monotonic()
        if server is not None:
            server.on_state(lambda state, error, s=server: self._on_server(s, state, error))

    def _on_server(self, server, state: str, error: str | None) -> None:
        if state == FAILED and server is self.launcher.server and self.state == SERVING:
            self._wake.set()

    async def _watch(self) -> None:
        while not self._stopping:
            started = time.monotonic()
            try:
                if self.state == SERVING:
                    await self._check_serving()
                if self.lost and self.state in (SERVING, WAITING):
                    await self._check_returned()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("failover watch round failed")
            self._wake.clear()
            left = self.policy.poll_interval - (time.monotonic() - started)
            if left > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), left)

    async def _check_serving(self) -> None:
        server = self.launcher.server
        failed = server is not None and server.state == FAILED
        nodes = [h.node for h in self.launcher.workers]
        if failed:
            # The server is gone: find the node to blame now, without waiting for more misses.
            for attempt in range(3):
                lost = await self.health.check_all(nodes)
                if lost or attempt == 2:
                    break
                await asyncio.sleep(0.3)
            self._loss(lost, server_error=server.error)
            return
        lost = await self.health.check_all(nodes)
        if lost and self.state == SERVING:
            self._loss(lost, server_error=None)

    async def _check_returned(self) -> None:
        back = []
        for nid, node in list(self.lost.items()):
            try:
                status = await self.health.status(node)
            except AgentError:
                continue
            if status.rpc.state == WorkerState.CRASHED and nid not in self._started_ids:
                continue
            back.append(node)
        for node in back:
            self.lost.pop(node.id, None)
            self.health.forget(node)
        if not back:
            return
        names = tuple(n.name for n in back)
        facts = dict(node=back[0].name, host=back[0].host, back=names)
        if self.state == WAITING and (self._pending_plan is None or self.policy.auto_recover):
            # The cluster was waiting for exactly this (or auto-recover is on): go.
            self._emit(EventKind.RETURNED, **facts)
            self._run_recovery(self._replan_and_relaunch(back=names, stop_first=True, immediate=True))
        elif self.policy.rejoin == "auto":
            self._emit(EventKind.RETURNED, **facts)
            self._run_recovery(self._replan_and_relaunch(back=names, stop_first=True, immediate=False))
        else:
            self.options = tuple(dict.fromkeys(self.options + (OPT_REJOIN,)))
            self._back = tuple(dict.fromkeys(self._back + names))
            self._emit(EventKind.RETURNED, options=(OPT_REJOIN,), **facts)

    # --- recovering ---------------------------------------------------------------------------

    def _run_recovery(self, coro) -> None:
        self._recovery = asyncio.get_running_loop().create_task(coro, name="failover-recovery")

    async def _join_recovery(self) -> None:
        task = self._recovery
        if task is not None and task is not asyncio.current_task():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _loss(self, lost: list, server_error: str | None) -> None:
        self._enter(RECOVERING)
        self._lost_at = time.monotonic()
        self.options = ()
        for loss in lost:
            node = loss.node
            self.lost[node.id] = node
            self._emit(EventKind.LOST, node=node.name, host=node.host, loss=loss)
        if not lost:
            self._emit(EventKind.SERVER_EXITED, error=server_error)
        if self.conversation is not None:
            self.conversation.mark_cut(interruption_note(lost, server_error))  # on the model (#33)
        if self._quick_failures.note(blamed=bool(lost), serving_since=self._serving_since):
            self._pending_plan = self.launcher.plan
            self._run_recovery(self._give_up(server_error))
            return
        self._run_recovery(self._replan_and_relaunch(back=(), stop_first=True, immediate=False))

    async def _give_up(self, server_error: str | None) -> None:
        await self._release(self.launcher)
        self._set_waiting(WaitReason.QUICK_FAILURES, (OPT_RECOVER,), count=self._quick_failures.count,
                          seconds=QUICK_FAILURE_S, error=server_error)

    async def _stop_server(self, launcher: ClusterLauncher) -> None:
        server = launcher.server
        if server is not None:
            await server.stop(grace=self.policy.server_grace)

    async def _release(self, launcher: ClusterLauncher) -> None:
        """Let go of an old launch without stopping its workers (the next launch reuses them)."""
        await self._stop_server(launcher)
        for h in launcher.workers:
            with contextlib.suppress(Exception):
                await h.client.aclose()
        launcher.workers.clear()

    async def _survivors(self) -> list[tuple]:
        """(node, status) of every known node whose agent answers now, by name.

        A node lost only because its worker was restarted (its agent kept answering) survives:
        the agent has a fresh worker ready for the relaunch.
        """
        found = await self.health.answering(self.nodes.values())
        for node, _ in found:
            self.lost.pop(node.id, None)
        return found

    async def _replan_and_relaunch(self, *, back: tuple[str, ...], stop_first: bool, immediate: bool) -> None:
        """Re-plan over the nodes that answer and relaunch; ``back``: the names of the nodes whose
        return is the reason (none: a loss is)."""
        try:
            if stop_first:
                self._enter(RECOVERING)
                await self._release(self.launcher)
            survivors = []
            for node, status in await self._survivors():
                try:
                    survivors.append((node, await self.health.settle(node, status, threads=self.request.threads,
                                                                     wait=self.policy.busy_wait)))
                except AgentError:
                    self.lost[node.id] = node
            again = replan(self.request, survivors, self._cache_shape(), self.host_free_bytes)
            plan, bad, used = again.plan, again.misfits, again.used
            self._pending_plan = plan
            self._back = ()
            if bad:
                self._emit(EventKind.NO_FIT, misfits=tuple(bad), lost=self._lost_names(),
                           options=(OPT_WAIT, OPT_HOST), lines=tuple(plan.describe()))
                self._wait_for_lost((OPT_WAIT, OPT_HOST))
                return
            self._emit(EventKind.REPLANNED, back=back, lines=tuple(plan.describe()), nodes=used)
            if not immediate and not self.policy.auto_recover:
                self._set_waiting(WaitReason.FOR_CHOICE, (OPT_RECOVER,), nodes=used)
                return
            if not immediate and self.policy.countdown > 0:
                if not await self._countdown(used):
                    return
            await self._relaunch(plan)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("recovery failed")
            self._emit(EventKind.RECOVERY_FAILED, error=str(exc))
            self._set_waiting(WaitReason.FOR_NODES, (OPT_RECOVER,) if self._pending_plan else ())

    async def _countdown(self, where: tuple[str, ...]) -> bool:
        self._enter(COUNTDOWN)
        self.options = (OPT_RECOVER,)
        self._cancel.clear()
        end = time.monotonic() + self.policy.countdown
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return True
            self._emit(EventKind.COUNTDOWN_TICK, nodes=where, seconds=left, options=(OPT_RECOVER,))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._cancel.wait(), min(1.0, left))
            if self._cancel.is_set():
                if self._stopping:
                    return False
                self._emit(EventKind.CANCELLED)
                self._set_waiting(WaitReason.CANCELLED, (OPT_RECOVER,), nodes=where)
                return False

    def _lost_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.lost.values())

    def _wait_for_lost(self, options: tuple[str, ...]) -> None:
        self._set_waiting(WaitReason.FOR_NODES, options, lost=self._lost_names())

    def _set_waiting(self, why: WaitReason, options: tuple[str, ...], **facts) -> None:
        self._enter(WAITING)
        self.options = options + ((OPT_REJOIN,) if OPT_REJOIN in self.options else ())
        self._emit(EventKind.WAITING, wait=why, options=self.options, **facts)

    async def _relaunch(self, plan, forced: bool = False) -> None:
        if plan is None:
            raise LaunchError(translate("Failover", "there is no plan to relaunch"))
        self._enter(RELAUNCHING)
        self.options = ()
        self._emit(EventKind.RELAUNCHING, url=self.url, forced=forced)
        for attempt in (1, 2):
            launcher = self._make_launcher(plan)
            try:
                check = await launcher.start(self.policy.load_timeout)
                break
            except (LaunchError, AgentError) as exc:
                busy = attempt == 1 and getattr(exc, "code", None) == "worker-busy"
                if busy and await self.health.restart_held(launcher.planned_nodes(), threads=self.request.threads,
                                                           wait=self.policy.busy_wait):
                    continue
                self._emit(EventKind.RECOVERY_FAILED, error=str(exc), relaunched=True)
                self._set_waiting(WaitReason.FOR_NODES, (OPT_RECOVER,))
                return
        await self._adopt(launcher)
        self._pending_plan = None
        self._enter(SERVING)
        took = time.monotonic() - self._lost_at if self._lost_at else None
        self._lost_at = None  # a later re-plan (a node's return) is not a recovery from this loss
        self._emit(EventKind.RECOVERED, url=self.url, nodes=tuple(n.name for n in launcher.planned_nodes()), seconds=took,
                   problems=() if check.ok else tuple(check.problems))


def supervise(request: LaunchRequest, nodes: Iterable, client_for: Callable, llama_server, *,
              policy: FailoverPolicy | None = None, probe_client_for: Callable | None = None,
              host_free_bytes: Callable[[], int | None] | None = None,
              conversation=None) -> ClusterSupervisor:
    """The :class:`~gui.cluster.failover.supervisor.ClusterSupervisor` for ``request``, not started yet
    (callers follow its log and may cancel while it loads; :meth:`ClusterSupervisor.start` starts it).

    ``nodes`` may hold more nodes than the plan uses; the supervisor keeps those the plan uses
    (a relaunch after a loss re-plans over them). An unknown endpoint fails here, before
    anything starts.
    """
    used = nodes_for_plan(request.plan, nodes)
    return ClusterSupervisor(llama_server, request, {n.id: n for n in used}, client_for, policy=policy,
                             probe_client_for=probe_client_for, host_free_bytes=host_free_bytes,
                             conversation=conversation)
