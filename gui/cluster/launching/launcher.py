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
import os
from collections.abc import Callable
from dataclasses import dataclass

from agent.client import ReadyWorker, WorkerUnavailable
from agent.i18n import translate
from agent.protocol import AgentStatus, WorkerState
from gui.cluster.launching import transfer
from gui.cluster.nodes import tunnel
from gui.cluster.launching.placement import PlacementCheck, check_placement
from gui.cluster.llama.server_command import NO_REPACK_FLAG, ServerOptions, ServerSpec
from gui.cluster.llama.server_process import (
    FAILED,
    LOADING,
    READY,
    STARTING,
    STOPPED,
    STOPPING,
    LaunchError,
    ServerProcess,
    explain_failure,
    last_lines,
    startup_step,
)
from gui.cluster.llama.server_start import ServerStart

__all__ = ["ServerSpec", "ServerOptions", "ServerProcess", "ClusterLauncher", "LaunchError", "NO_REPACK_FLAG",
           "FAILED", "LOADING", "READY", "STARTING", "STOPPED", "STOPPING", "explain_failure"]

log = logging.getLogger(__name__)


# --- a whole cluster: agents' workers + llama-server ------------------------------------------

def spec_from_plan(plan, model: str | os.PathLike, *, ctx: int, host: str = "127.0.0.1",
                   port: int = 8080, extra_args: list[str] | None = None, alias: str | None = None,
                   verify_layers: bool = False) -> ServerSpec:
    """:meth:`ServerSpec.for_plan` with the server options as keywords."""
    return ServerSpec.for_plan(plan, model, ServerOptions(ctx=ctx, host=host, port=port, alias=alias,
                                                          extra_args=tuple(extra_args or ())),
                               verify_layers=verify_layers)


def devices_from_status(node, status: AgentStatus | dict):
    """The plan :class:`~gui.cluster.planning.plan.Device` list of a node from its agent's ``status``
    (an :class:`~agent.protocol.AgentStatus`, or the decoded document).

    A node whose engine offers more than its CPU (a GPU build that finds a GPU) has a device per
    GPU and one for its CPU, in the order its worker is then started with (``-d Vulkan0,CPU``),
    with the worker's live free memory when it already runs with exactly those. Otherwise, while
    the worker runs, the devices it exposes; when it does not run yet, one CPU device with the
    RAM free — what ``ggml-rpc-server`` exposes on a machine without a GPU.
    """
    from gui.cluster.planning.plan import Device  # the planner is optional for ServerProcess users

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
        request: the :class:`~gui.cluster.launching.request.LaunchRequest` (plan, model, server options,
            worker threads, verify flag).
        nodes: {node id: :class:`~gui.cluster.nodes.records.Node`} holding every node the plan uses.
        client_for: ``client_for(node)`` → a paired :class:`agent.client.AgentClient`.
        worker_timeout: seconds a worker may take to become ready.

    Attributes:
        plan, model_info: the request's plan and model.
        spec: the :class:`ServerSpec` llama-server runs with.
        server: the :class:`ServerProcess` once started.
        server_start: the :class:`~gui.cluster.llama.server_start.ServerStart` that started it (what it
            had to add, how often llama-server crashed on the way).
        check: the :class:`PlacementCheck` after :meth:`start`.
        notes: what the launch had to do differently, for the user (translated): e.g. that
            llama-server crashed in llama.cpp's weight repacking and was started again with
            ``--no-repack`` (:class:`~gui.cluster.llama.server_start.ServerStart`).
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
        self.server_start: ServerStart | None = None
        self.check: PlacementCheck | None = None
        self.notes: list[str] = []
        #: ``on_transfer(event)``: each worker's weights by the byte while llama-server loads (a
        #: :class:`~gui.cluster.launching.transfer.TransferEvent` per poll; see :func:`transfer.watch_launch`)
        self.on_transfer: Callable | None = None

    def planned_nodes(self) -> list:
        """The nodes whose workers the plan uses, in ``--rpc`` order."""
        from gui.cluster.launching.request import nodes_for_plan
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
            self.server_start = ServerStart(self.llama_server, self.spec)
            try:
                await self.server_start.run(timeout)
            except LaunchError:
                await self._name_dead_worker()
                raise
            finally:
                self.spec = self.server_start.spec  # what ran: with what this machine needs
                self.notes.extend(n for n in self.server_start.notes if n not in self.notes)
            self.check = check_placement(self.plan, tunnel.unmap(self, self.server.placement()), self.model_info)
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
