"""The app's live connection to the cluster core, run on the bridge's asyncio loop.

Widgets send intentions ("pair that node", "start", "chat this"); :class:`ClusterSession` turns
each into a coroutine of the Qt-free core (``gui.cluster``) submitted through the one
:class:`gui.bridge.AsyncBridge`, and hands back the :class:`gui.bridge.Call` whose signals carry
the outcome. What the core reports by callback on the loop thread (discovery events, telemetry
samples, llama-server state) is relayed to the GUI thread through a queued connection and
re-emitted as this object's signals.

It owns the loop-side objects that must be shared: one ``httpx.AsyncClient``, the
:class:`~gui.cluster.nodes.discovery.Discovery`, the :class:`~gui.cluster.nodes.telemetry.Telemetry` hub and
the running launch (the core's :class:`~gui.cluster.cluster_launch.ClusterLaunch`, the one launch
path ``herd up`` uses too, whose state it relays to the GUI thread as ``serverState``, #33).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import httpx
from PySide6.QtCore import QObject, Qt, Signal

from agent.client import AgentError, measure_echo_rtt
from gui.bridge import AsyncBridge, Call
from gui.cluster.chat.client import stream_chat
from gui.cluster.chat.continuation import continuation_params
from gui.cluster.chat.conversation import check_context
from gui.cluster.failover.supervisor import ClusterSupervisor, FailoverPolicy
from gui.cluster.cluster_launch import ClusterLaunch
from gui.cluster.launching.state import STOPPED, LaunchState
from gui.cluster.llama.server_process import LaunchError, LogFollower
from gui.cluster.nodes.discovery import Discovery, NodeEvent
from gui.cluster.nodes.wake import wake_node, wake_paired
from gui.cluster.nodes.network_errors import explain
from gui.cluster.nodes.telemetry import (
    LinkSampler,
    MetricsSampler,
    NodeStatusSampler,
    Sample,
    ServerSampler,
    Telemetry,
    recording_replies,
)
from gui.cluster.planning.devices import host_free_bytes, node_devices
from gui.cluster.serving.front_door import FrontDoorError
from gui.cluster.serving.sharing import LanShare
from gui.cluster.serving.usage import UsageSampler

log = logging.getLogger(__name__)
T = TypeVar("T")


class ClusterSession(QObject):
    """Everything the window asks of the cluster, as bridge calls; what the cluster says, as signals.

    Signals:
        nodeEvent(str, object): ``added``/``updated``/``removed`` and the :class:`Node`.
        sample(object): a telemetry :class:`Sample` (link RTT, node status, server metrics).
        serverState(str, str): llama-server's state and, when it failed, why.
        serverLog(list): new lines of llama-server's log, in order.
        failover(object): a :class:`~gui.cluster.failover.events.FailoverEvent` — a worker was lost,
            the countdown to the relaunch on the survivors, serving again, a node came back.
            :meth:`cancel_failover` and :meth:`choose_failover` answer it.
        replyInterrupted(str): a worker was lost while a chat reply streamed: the reply is
            interrupted, for this reason (the chat pane marks it so in its transcript).

    Attributes:
        bridge: the app's :class:`AsyncBridge`.
        server_url: the running llama-server's base URL, or None (on loopback: what the chat and
            the dashboard use, also when the endpoint is shared through the front door).
        sharing: the :class:`~gui.cluster.serving.sharing.LanShare`: the front door holding the
            endpoint while it is shared on the LAN (#34), and the keys that open it.
        failover_nodes: names of the launch's nodes not lost right now (what a relaunch can use),
            as of the last ``failover`` event.
        discovery: the :class:`Discovery` (loop-side; only touch it from coroutines).
    """

    nodeEvent = Signal(str, object)
    sample = Signal(object)
    serverState = Signal(str, str)
    serverLog = Signal(list)
    failover = Signal(object)
    #: a worker was lost: the chat's reply in flight is interrupted, for this reason
    replyInterrupted = Signal(str)
    #: per-worker start-up progress by the byte (a gui.cluster.launching.transfer.TransferEvent, #16)
    transferProgress = Signal(object)
    wakeProgress = Signal(str, float)
    _relay = Signal(str, object)

    def __init__(self, bridge: AsyncBridge, parent: QObject | None = None, *,
                 interfaces: list[str] | None = None, browse: bool = True, tokens=None,
                 link_interval: float = 1.0, status_interval: float = 2.0) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.sharing = LanShare()
        self.interfaces = interfaces
        self.browse = browse
        self.tokens = tokens
        self.link_interval = link_interval
        self.status_interval = status_interval
        self.discovery: Discovery | None = None
        self.telemetry: Telemetry | None = None
        #: the one launch path and its state (#33), on the loop; its changes are relayed here
        self.cluster_launch = ClusterLaunch()
        #: the launch's state as last relayed to the GUI thread (what the views show)
        self.launch_state: LaunchState = STOPPED
        self.cluster_launch.subscribe(lambda state, error: self._relay.emit("state", (state, error)))
        self.cluster_launch.subscribe_failover(self._on_failover)
        #: How a lost worker is handled (auto-recover, countdown…); the settings dialog sets it.
        self.failover_policy = FailoverPolicy()
        self.failover_nodes: list[str] = []
        #: what Fastest optimises ("chat" or "documents", #16) and its last result
        self.fastest_for = "chat"
        self.last_fastest = None
        self._node_samplers: dict[str, list] = {}
        self._server_samplers: list = []
        self._log_task: asyncio.Task | None = None
        self._http: httpx.AsyncClient | None = None
        self._relay.connect(self._dispatch, Qt.ConnectionType.QueuedConnection)

    # ------------------------------------------------------------ relay

    def _dispatch(self, kind: str, payload: object) -> None:
        # GUI thread.
        if kind == "node":
            self.nodeEvent.emit(*payload)
        elif kind == "sample":
            self.sample.emit(payload)
        elif kind == "state":
            self.launch_state = LaunchState(payload[0])
            self.serverState.emit(*payload)
        elif kind == "log":
            self.serverLog.emit(payload)
        elif kind == "failover":
            self.failover.emit(payload)
        elif kind == "interrupt":
            self.replyInterrupted.emit(payload)
        elif kind == "transfer":
            self.transferProgress.emit(payload)
        elif kind == "wake":  # Start wakes a sleeping node: its name, seconds waited (#36)
            self.wakeProgress.emit(*payload)

    # ------------------------------------------------------------ lifecycle

    async def http(self) -> httpx.AsyncClient:
        """The shared HTTP client (created on the loop thread, where it is used)."""
        if self._http is None:
            # Streaming replies can pause for long; connect fast, read patiently.
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=5.0))
        return self._http

    def start(self, addresses: list[str] = ()) -> Call:
        """Start discovery and telemetry; add remembered ``addresses`` (failures are skipped)."""
        return self.bridge.submit(self._start(list(addresses)), "start discovery")

    async def _start(self, addresses: list[str]) -> list[str]:
        self.telemetry = Telemetry()
        self.telemetry.subscribe(lambda s: self._relay.emit("sample", s))
        self.telemetry.start()
        self.discovery = Discovery(self.interfaces, browse=self.browse, tokens=self.tokens)
        self.discovery.subscribe(self._on_node_event)
        await self.discovery.start()
        results = await asyncio.gather(*(self.discovery.add_address(a, timeout=3.0) for a in addresses),
                                       return_exceptions=True)
        # in words a person understands, not the HTTP library's (#17)
        return [f"{a}: {explain(r)}" for a, r in zip(addresses, results) if isinstance(r, Exception)]

    def _on_node_event(self, ev: NodeEvent) -> None:
        # Loop thread. Keep per-node samplers in step with the node list.
        self._relay.emit("node", (ev.kind, ev.node))
        nid = ev.node.id
        wanted = ev.kind != "removed" and ev.node.reachable
        have = nid in self._node_samplers
        paired_now = ev.node.paired
        if have and (not wanted or self._node_samplers[nid][0] != paired_now):
            samplers = self._node_samplers.pop(nid)[1]
            for s in samplers:
                asyncio.get_running_loop().create_task(self.telemetry.remove(s))
            have = False
        if wanted and not have:
            node = ev.node
            samplers = []
            if node.echo_port:
                samplers.append(LinkSampler(nid, lambda n, h=node.host, p=node.echo_port: measure_echo_rtt(h, p, n, 0.5),
                                            interval=self.link_interval, probes=5))
            if node.paired:
                samplers.append(NodeStatusSampler(nid, lambda nid=nid: self._status(nid), interval=self.status_interval))
            for s in samplers:
                self.telemetry.add(s)
            self.telemetry.start()  # starts the new samplers (add() alone waits for a running one)
            self._node_samplers[nid] = (paired_now, samplers)

    async def _status(self, node_id: str) -> dict:
        node = self.discovery.nodes.get(node_id)
        if node is None:
            raise AgentError(self.tr("the node is gone"))
        async with self.discovery.client(node) as c:
            return await c.status()

    def close(self) -> None:
        """Stop everything this session started (llama-server, workers, discovery) and wait."""
        if not self.bridge.is_running():
            return
        call = self.bridge.submit(self._close(), "close session")
        try:
            call.future.result(timeout=60)
        except Exception as exc:  # noqa: BLE001 - closing on exit; log and go on
            log.warning("closing the session: %s", exc)

    async def _close(self) -> None:
        # Processes first, and patiently: nothing may be left running. The rest gets a short
        # bound each, so closing the window never hangs on a sampler stuck on a vanished node
        # (the loop's own shutdown cancels whatever is left).
        steps = [("stop the cluster", self._stop_launch, 30.0)]
        if self.telemetry is not None:
            steps.append(("stop telemetry", self.telemetry.stop, 3.0))
        if self.discovery is not None:
            steps.append(("stop discovery", self.discovery.stop, 5.0))
        if self._http is not None:
            steps.append(("close http", self._http.aclose, 3.0))
            self._http = None
        for what, step, limit in steps:
            try:
                await asyncio.wait_for(step(), limit)
            except asyncio.TimeoutError:
                log.warning("%s took longer than %.0f s; going on", what, limit)
            except Exception as exc:  # noqa: BLE001 - closing: report and carry on
                log.warning("%s failed: %s", what, exc)

    # ------------------------------------------------------------ nodes

    def add_address(self, address: str) -> Call:
        """Add a node by ``host[:port]`` (result: the :class:`Node`)."""
        return self.bridge.submit(self._with_discovery(lambda d: d.add_address(address)), f"add {address}", timeout=15)

    async def _with_discovery(self, call: Callable[[Discovery], Awaitable[T]]) -> T:
        """``await call(discovery)`` once :meth:`start` has made it; :class:`AgentError`, in words, if it never does."""
        for _ in range(100):
            if self.discovery is not None:
                return await call(self.discovery)
            await asyncio.sleep(0.05)
        raise AgentError(self.tr("Looking for nodes has not started yet; try again in a moment."))

    def pair(self, node_id: str, pin: str) -> Call:
        """Pair with a node using the PIN it shows."""
        return self.bridge.submit(self._with_discovery(lambda d: d.pair(node_id, pin)), "pair", timeout=15)

    def node_status(self, node_id: str) -> Call:
        """The agent's status of one node (result: dict)."""
        return self.bridge.submit(self._status(node_id), "node status", timeout=10)

    def set_worker(self, node_id: str, running: bool) -> Call:
        """Start or stop a node's RPC worker. A GPU node's worker starts with every device the
        node offers (``-d Vulkan0,CPU``), as a launch over them would: the launch then uses it
        as it is."""
        async def go():
            node = self.discovery.nodes[node_id]
            async with self.discovery.client(node) as c:
                if not running:
                    return await c.rpc_stop()
                status = await c.status()
                devices = [d.name for d in node_devices(node, status)] if status.offers_gpu else None
                return await c.rpc_start(devices=devices)
        return self.bridge.submit(go(), "start worker" if running else "stop worker", timeout=30)

    def wake(self, node_id: str) -> Call:
        """Send a sleeping paired node its Wake-on-LAN packet (#36); result: the WakeTarget."""
        return self.bridge.submit(asyncio.to_thread(wake_node, self.discovery.tokens, node_id), "wake node",
                                  timeout=10)

    def wake_and_wait(self, node_ids: list[str], timeout: float) -> Call:
        """:func:`~gui.cluster.nodes.wake.wake_paired` ``node_ids``, progress as ``wakeProgress`` (#36)."""
        progress = lambda name, waited: self._relay.emit("wake", (name, waited))  # noqa: E731
        return self.bridge.submit(wake_paired(self.discovery.tokens, node_ids, timeout, identity=self.discovery.identity,
                                              progress=progress),
                                  "wake nodes", timeout=timeout + 30)

    def devices(self, node_ids: list[str]) -> Call:
        """Plan devices of these nodes from their agents (result: list of Device)."""
        async def go():
            out = []
            for nid in node_ids:
                node = self.discovery.nodes[nid]
                out += node_devices(node, await self._status(nid))
            return out
        return self.bridge.submit(go(), "devices", timeout=15)

    # ------------------------------------------------------------ launch

    @property
    def server_url(self) -> str | None:
        """The running llama-server's base URL once it served (on loopback behind a front door),
        or None; known before the launch's ``ready`` is relayed, so the views can use it then."""
        launch = self.cluster_launch
        return launch.supervisor.spec.url if launch.supervisor is not None and launch.placement is not None else None

    @property
    def supervisor(self) -> ClusterSupervisor | None:
        """The running launch's failover supervisor, or None (:attr:`cluster_launch` holds it)."""
        return self.cluster_launch.supervisor

    def preflight(self, request, engine) -> Call:
        """What stands in the way of launching ``request`` (a
        :class:`~gui.cluster.launching.request.LaunchRequest`): its fit, its nodes and the doctor's findings
        (result: a :class:`~gui.cluster.launching.preflight_reading.PreflightReading`)."""
        async def go():
            return await self.cluster_launch.preflight(request, self.discovery.nodes.values(), self.discovery.client,
                                                       engine, host_free_bytes=host_free_bytes())
        return self.bridge.submit(go(), "doctor", timeout=60)

    def launch(self, llama_server, request, *, timeout: float = 300.0, share: bool = False,
               share_https: bool = False) -> Call:
        """Start workers and llama-server for ``request`` (result: the placement check). With
        ``share``, the endpoint is shared on the LAN through the front door (#34), over HTTPS
        with herd's own certificate when ``share_https``."""
        return self.bridge.submit(self._launch(llama_server, request, timeout, share, share_https), "launch")

    @property
    def endpoint_url(self) -> str | None:
        """The endpoint's base URL as other programs reach it: the front door's first address
        when shared (#34: the shown endpoint is where it really listens), else llama-server's."""
        return (self.sharing.url or self.server_url) if self.server_url else None

    def share_info(self):
        """What a phone app needs (a :class:`~gui.cluster.serving.sharing.ShareInfo`) while the
        running cluster is shared on the LAN, or None."""
        sup = self.supervisor
        return self.sharing.info(sup.spec.options.alias or "") if sup is not None and self.server_url else None

    async def _launch(self, llama_server, request, timeout, share=False, share_https=False):
        if self.cluster_launch.is_running:
            raise LaunchError(self.tr("a cluster is already running; stop it first"))
        if share:  # the front door takes the endpoint's port; llama-server moves to loopback (#34)
            try:
                request = replace(request, options=await self.sharing.open(request.options, https=share_https))
            except FrontDoorError as exc:
                raise LaunchError(str(exc)) from None
        policy = self.failover_policy
        self._log_task = asyncio.get_running_loop().create_task(self._pump_log())
        try:
            # A supervised launch: a lost worker is detected, explained and the model relaunched
            # on the survivors at the same endpoint (see gui.cluster.failover.supervisor).
            check = await self.cluster_launch.start(
                request, self.discovery.nodes.values(), self.discovery.client, llama_server, policy=policy,
                timeout=timeout, host_free_bytes=host_free_bytes,
                probe_client_for=lambda n: self.discovery.client(n, timeout=policy.poll_timeout),
                conversation=_ReplyInterrupter(self._relay),
                on_transfer=lambda ev: self._relay.emit("transfer", ev))
        except BaseException:
            await self._end_log_pump()
            await self.sharing.close()
            raise
        client = await self.http()
        self._server_samplers = [MetricsSampler(client, self.server_url, interval=1.0),
                                 ServerSampler(client, self.server_url, interval=0.5)]
        if self.sharing.door is not None:  # who uses the shared endpoint, for the dashboard (#34)
            self._server_samplers.append(UsageSampler(self.sharing.door.usage))
        for s in self._server_samplers:
            self.telemetry.add(s)
        self.telemetry.start()
        return check

    def _on_failover(self, ev) -> None:
        # Loop thread, before the state the event leads to (ClusterLaunch.subscribe_failover).
        sup = self.supervisor
        if sup is not None:
            # (one assignment of a new list: the GUI thread reads a whole list, old or new)
            self.failover_nodes = sorted(n.name for nid, n in sup.nodes.items() if nid not in sup.lost)
        self._relay.emit("failover", ev)

    def set_failover_policy(self, *, auto_recover: bool, countdown: float, rejoin: str) -> None:
        """How a lost worker is handled from now on, also by the launch running now (it holds
        the same :class:`FailoverPolicy`)."""
        if rejoin not in ("ask", "auto"):
            raise ValueError(f"rejoin must be 'ask' or 'auto', not {rejoin!r}")
        if countdown < 0:
            raise ValueError(f"the countdown must be 0 s or more, not {countdown!r}")
        policy = self.failover_policy
        policy.auto_recover, policy.countdown, policy.rejoin = bool(auto_recover), float(countdown), rejoin

    def cancel_failover(self) -> Call:
        """Stop the countdown to an automatic relaunch (the cluster then waits for a choice)."""
        async def go():
            if self.cluster_launch.is_running:
                self.supervisor.cancel()
        return self.bridge.submit(go(), "cancel relaunch", timeout=10)

    def choose_failover(self, option: str) -> Call:
        """Take one of the options the last ``failover`` event offered: ``recover`` (relaunch
        now), ``wait``, ``host`` (more layers on this computer) or ``rejoin`` (use a returned
        node again). The call finishes once the relaunch it starts is done."""
        async def go():
            if not self.cluster_launch.is_running:
                raise LaunchError(self.tr("No cluster is running."))
            await self.supervisor.choose(option)
        return self.bridge.submit(go(), "relaunch", timeout=self.failover_policy.load_timeout + 60)

    async def _pump_log(self) -> None:
        # The server's log is a deque filled on this loop; forward new lines a few times a second.
        follower = LogFollower()
        supervisor = None
        while True:
            # (the last supervisor is kept: Stop lets go of it, and its log's end is still sent)
            supervisor = self.supervisor or supervisor
            lines = follower.new_lines(supervisor.server if supervisor is not None else None)
            if lines:
                self._relay.emit("log", lines)
            await asyncio.sleep(0.25)

    async def _end_log_pump(self) -> None:
        if self._log_task is not None:
            self._log_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._log_task
            self._log_task = None

    def stop_launch(self) -> Call:
        """Stop llama-server and the workers the launch started."""
        return self.bridge.submit(self._stop_launch(), "stop")

    async def _stop_launch(self) -> None:
        for s in self._server_samplers:
            await self.telemetry.remove(s)
        self._server_samplers = []

        async def flush_log() -> None:  # (only when a cluster ran: "stopped" comes after its end)
            await asyncio.sleep(0.3)  # one last flush of the log so the end of it is visible
            await self._end_log_pump()
            await self.sharing.close()
        await self.cluster_launch.stop(before_stopped=flush_log)
        await self._end_log_pump()  # (and when none ran: both are no-ops once done)
        await self.sharing.close()

    # ------------------------------------------------------------ fastest

    def fastest(self, engine, model, devices: list, ctx: int, host_free_bytes: int | None) -> Call:
        """Measure each node (cached per model) and the host, then the fastest plan (result: Plan).

        Workers that are not running are started for the measurement and stopped again.
        """
        return self.bridge.submit(self._fastest(engine, model, devices, ctx, host_free_bytes), "fastest plan")

    async def _fastest(self, engine, model, devices, ctx, host_free_bytes):
        from gui.cluster.planning import measure as M
        nodes = [self.discovery.nodes[nid] for nid in dict.fromkeys(d.node_id for d in devices)]
        # the measurements and the search of `herd plan --fastest` (measured once per node and
        # model, then cached); the result keeps both predicted figures (#16)
        self.last_fastest = await M.measured_fastest(
            engine, model.path, model, nodes, devices, self.discovery.client, ctx,
            host_free_bytes=host_free_bytes, cache=M.MeasurementCache(), objective=self.fastest_for)
        return self.last_fastest.plan

    # ------------------------------------------------------------ chat

    def chat(self, messages: list[dict], params: dict, url: str | None = None) -> Call:
        """Stream a chat reply from ``url`` (default: the running server)."""
        base = url or self.server_url
        if not base:
            raise RuntimeError(self.tr("No llama-server is running."))

        async def events():
            client = await self.http()
            # a continuation of a cut reply gets what is left of its length, not all of it again
            stream = stream_chat(client, base, messages, **await continuation_params(client, base, messages, params))
            if self.telemetry is not None:  # (a session not started has no dashboard to tell)
                # each finished reply marks its time to first token on the dashboard (#16)
                stream = recording_replies(stream, self.telemetry, base)
            if self.sharing.door is not None and base == self.server_url:  # one of the people at once (#34)
                stream = self.sharing.door.app_reply(stream)
            async for ev in stream:
                yield ev

        # a few milliseconds of batching: far below a frame, far fewer hand-overs to the GUI
        return self.bridge.stream(events, "chat", batch_ms=4.0)

    def chat_fit(self, messages: list[dict], max_tokens: int, url: str | None = None) -> Call:
        """Whether ``messages`` fit the context of the server at ``url`` (default: the running
        one), counted by that server (result: a
        :class:`~gui.cluster.chat.conversation.ContextFit`)."""
        base = url or self.server_url
        if not base:
            raise RuntimeError(self.tr("No llama-server is running."))

        async def check():
            return await check_context(await self.http(), base, messages, max_tokens)

        return self.bridge.submit(check(), "chat context check", timeout=60.0)

    def chat_sender(self, url: str | None = None) -> ChatSender:
        """What :class:`gui.widgets.chat_pane.ChatPane` is given to talk to the server at
        ``url`` (default: the running one)."""
        return ChatSender(self, url)


class ChatSender:
    """The chat pane's line to one llama-server: call it as ``send(messages, params)`` to
    stream a reply (a :class:`~gui.bridge.Call` of chat events); :meth:`fit` checks first
    whether the conversation fits the server's context."""

    def __init__(self, session: ClusterSession, url: str | None) -> None:
        self._session = session
        self._url = url

    def __call__(self, messages: list[dict], params: dict) -> Call:
        return self._session.chat(messages, params, self._url)

    @property
    def model(self) -> str:
        """The file name of the model the running launch serves ("" when none): what the chat
        history notes beside each chat (#36)."""
        running = self._session.cluster_launch.request
        return Path(running.model.path).name if running is not None else ""

    def fit(self, messages: list[dict], max_tokens: int) -> Call:
        """A :class:`~gui.bridge.Call` whose result is the request's ``ContextFit``."""
        return self._session.chat_fit(messages, max_tokens, self._url)


class _ReplyInterrupter:
    """What the failover supervisor is given as the chat's transcript. The transcript (the chat
    pane's :class:`~gui.cluster.chat.conversation.Conversation`) belongs to the GUI thread, and the
    supervisor runs on the loop's: marking the reply a loss cut is relayed there."""

    def __init__(self, relay) -> None:
        self._relay = relay

    def mark_cut(self, reason: str) -> None:
        """Relay :meth:`~gui.cluster.chat.conversation.Conversation.mark_cut` to the GUI thread."""
        self._relay.emit("interrupt", reason)


__all__ = ["ChatSender", "ClusterSession", "Sample"]
