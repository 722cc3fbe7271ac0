"""Starting a launch request on the cluster: the agents' workers, then llama-server, then the check.

:class:`ClusterLauncher` asks each planned node's agent to have its RPC worker ready, routes
``--rpc`` through the local TLS forwarders (:mod:`gui.cluster.nodes.tunnel`), starts llama-server the
one way herd starts it (:class:`~gui.cluster.llama.server_start.ServerStart`), verifies the placement,
and on stop undoes exactly what it started.

Running one llama-server and reading its log is :mod:`gui.cluster.llama.server_process`; its command
line is :mod:`gui.cluster.llama.server_command`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from agent.client import ReadyWorker, WorkerUnavailable
from agent.i18n import translate
from agent.protocol import WorkerState
from gui.cluster.launching import transfer
from gui.cluster.launching.placement import PlacementCheck, check_placement
from gui.cluster.launching.request import LaunchRequest, nodes_for_plan
from gui.cluster.llama.server_command import ServerSpec
from gui.cluster.llama.server_process import LaunchError, ServerProcess, last_lines, startup_step
from gui.cluster.llama.server_start import ServerStart
from gui.cluster.nodes import tunnel

log = logging.getLogger(__name__)


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
        request: the :class:`~gui.cluster.launching.request.LaunchRequest` (plan, model, server options,
            worker threads, verify flag).
        nodes: {node id: :class:`~gui.cluster.nodes.records.Node`} holding every node the plan uses.
        client_for: ``client_for(node)`` → a paired :class:`agent.client.AgentClient`.
        worker_timeout: seconds a worker may take to become ready.

    Attributes:
        request: the :class:`~gui.cluster.launching.request.LaunchRequest` it starts; never
            changed (a relaunch is a new launcher with a new request).
        spec: the :class:`~gui.cluster.llama.server_command.ServerSpec` llama-server runs with:
            the request's, then (once started) what ran, with ``--rpc`` through the forwarders
            and what this machine needs added.
        forwarders: {worker endpoint: :class:`~gui.cluster.nodes.tunnel.Forwarder`} this launch
            opened (closed by :meth:`stop`).
        server: the :class:`~gui.cluster.llama.server_process.ServerProcess` once started.
        server_start: the :class:`~gui.cluster.llama.server_start.ServerStart` that started it
            (what it had to add, how often llama-server crashed on the way).
        check: the :class:`~gui.cluster.launching.placement.PlacementCheck` after :meth:`start`.
        notes: what the launch had to do differently, for the user (translated): e.g. that
            llama-server crashed in llama.cpp's weight repacking and was started again with
            ``--no-repack`` (:class:`~gui.cluster.llama.server_start.ServerStart`).
        on_transfer: ``on_transfer(event)``: each worker's weights by the byte while llama-server
            loads (a :class:`~gui.cluster.launching.transfer.TransferEvent` per poll).
    """

    def __init__(self, llama_server, request: LaunchRequest, nodes: dict, client_for: Callable, *,
                 worker_timeout: float = 30.0) -> None:
        self.llama_server = llama_server
        self.request = request
        self.nodes = nodes
        self.client_for = client_for
        self.spec: ServerSpec = request.spec()
        self.worker_timeout = worker_timeout
        self.workers: list[WorkerHandle] = []
        self.forwarders: dict[str, tunnel.Forwarder] = {}
        self.server_start: ServerStart | None = None
        self.check: PlacementCheck | None = None
        self.notes: list[str] = []
        self.on_transfer: Callable | None = None

    @property
    def plan(self):
        """The request's :class:`~gui.cluster.planning.plan.Plan`."""
        return self.request.plan

    def planned_nodes(self) -> list:
        """The nodes whose workers the plan uses, in ``--rpc`` order."""
        return nodes_for_plan(self.plan, self.nodes.values())

    async def start_workers(self) -> None:
        """Have each planned node's RPC worker ready (started through its agent if needed)."""
        for node in self.planned_nodes():
            client = self.client_for(node)
            handle = WorkerHandle(node, client)
            self.workers.append(handle)
            # (a worker that runs with other devices is restarted with the plan's: device
            # numbers in the plan are positions in its -d list)
            # A worker whose CPU device is to hold another device's experts starts afresh: a
            # Vulkan ggml-rpc-server that served whole layers before dies of heap corruption
            # when the next llama-server puts experts there (seen at build 11434 on lavapipe).
            homes = {h.experts for h in self.plan.expert_homes}
            fresh = any(d.key in homes for d in self.plan.devices() if d.endpoint == node.rpc_endpoint)
            handle.worker = ReadyWorker(client, threads=self.request.threads, timeout=self.worker_timeout,
                                        devices=lambda st, ep=node.rpc_endpoint: worker_devices(self.plan, ep,
                                                                                                st.offers_gpu),
                                        fresh=fresh)
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
        watch = transfer.watch_launch(self.plan, self.request.model, self.nodes.values(), self.workers,
                                      lambda: self.server is not None, self.on_transfer)
        try:
            await self.start_workers()
            # --rpc through the local TLS forwarders (#13)
            self.forwarders = await tunnel.open_forwarders((h.node, h.client) for h in self.workers)
            self.server_start = ServerStart(self.llama_server, tunnel.route(self.spec, self.forwarders))
            try:
                await self.server_start.run(timeout)
            except LaunchError:
                await self._name_dead_worker()
                raise
            finally:
                self.spec = self.server_start.spec  # what ran: with what this machine needs
                self.notes.extend(n for n in self.server_start.notes if n not in self.notes)
            self.check = check_placement(self.plan, tunnel.unmap(self.server.placement(), self.forwarders),
                                         self.request.model)
            await transfer.stop_watch(watch, final=True)
            return self.check
        except BaseException:
            await transfer.stop_watch(watch)
            await self.stop()
            raise

    @property
    def server(self) -> ServerProcess | None:
        """The llama-server of this launch (None before it started)."""
        return self.server_start.server if self.server_start is not None else None

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
        if self.server_start is not None:
            await self.server_start.stop()
        await tunnel.close_forwarders(self.forwarders)
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
