"""Node health for a running launch: is each node and its RPC worker still the one llama-server
connected to?

:class:`NodeHealth` asks each node's agent for its status (with a short timeout, one client per
node kept open) and answers in :class:`Loss` records — which node, what happened
(:class:`LossCause`), the detail its agent gave — without words:
:func:`gui.cluster.failover.text.describe_loss` turns a loss into the sentence the user reads.
The failover supervisor (:mod:`gui.cluster.failover.supervisor`) decides what to do about a loss; this
module only observes.

A node is lost when its agent misses ``misses`` polls in a row (crashed, stopped, link down),
or when its worker is no longer the process llama-server connected to (another pid, a higher
restart count: the agent restarted it after a crash), or when the worker is stopped or crashed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from agent.client import AgentError
from agent.protocol import AgentStatus, WorkerState

log = logging.getLogger(__name__)


class LossCause(str, Enum):
    """What happened to a lost node."""

    AGENT_SILENT = "agent-silent"          # its agent missed several polls
    WORKER_REPLACED = "worker-replaced"    # another worker process than llama-server's
    WORKER_STOPPED = "worker-stopped"
    WORKER_CRASHED = "worker-crashed"


@dataclass(frozen=True)
class Loss:
    """A lost node: ``cause``, and ``detail`` — the agent's own words for it, or why it did
    not answer — when there is one."""

    node: object
    cause: LossCause
    detail: str | None = None
    timeout: float = 1.0


class NodeHealth:
    """Watches the nodes of a launch (see the module docstring).

    Args:
        client_for: ``client_for(node)`` → an agent client with a short timeout.
        misses: polls in a row an agent may miss before its node counts as lost.
        timeout: the clients' timeout (said in the words of a silent agent's loss).
    """

    def __init__(self, client_for: Callable, *, misses: int = 2, timeout: float = 1.0) -> None:
        self.client_for = client_for
        self.misses = misses
        self.timeout = timeout
        self._clients: dict[str, object] = {}
        self._baseline: dict[str, tuple] = {}  # node id -> (worker pid, restarts) at launch
        self._missed: dict[str, int] = {}

    def client(self, node):
        """The node's agent client (one per node, kept open until :meth:`close`)."""
        c = self._clients.get(node.id)
        if c is None:
            c = self._clients[node.id] = self.client_for(node)
        return c

    def reset_clients(self) -> None:
        """Forget the clients kept (the next poll of each node makes a new one with
        :attr:`client_for`)."""
        self._clients.clear()

    async def status(self, node) -> AgentStatus:
        """The node's status now (raises :class:`~agent.client.AgentError`)."""
        return await self.client(node).status()

    async def remember(self, nodes) -> None:
        """A launch came up on ``nodes``: remember each worker's process as llama-server found it."""
        self._baseline.clear()
        self._missed.clear()
        for node in nodes:
            try:
                rpc = (await self.status(node)).rpc
                self._baseline[node.id] = (rpc.pid, rpc.restarts)
            except AgentError as exc:
                log.info("no baseline status from %s: %s", node.name, exc)

    async def check(self, node) -> Loss | None:
        """None when ``node`` and its worker are as llama-server left them, else the loss."""
        try:
            status = await self.status(node)
        except AgentError as exc:
            self._missed[node.id] = self._missed.get(node.id, 0) + 1
            if self._missed[node.id] >= self.misses:
                return Loss(node, LossCause.AGENT_SILENT, str(exc), self.timeout)
            return None
        self._missed[node.id] = 0
        rpc = status.rpc
        base = self._baseline.get(node.id)
        if base is not None and (rpc.pid != base[0] or rpc.restarts > base[1]):
            return Loss(node, LossCause.WORKER_REPLACED, rpc.error)
        if rpc.state == WorkerState.STOPPED:
            return Loss(node, LossCause.WORKER_STOPPED, rpc.error)
        if rpc.state == WorkerState.CRASHED:
            return Loss(node, LossCause.WORKER_CRASHED, rpc.error)
        return None

    async def check_all(self, nodes) -> list[Loss]:
        """The losses among ``nodes``, checked at once."""
        found = await asyncio.gather(*(self.check(n) for n in nodes))
        return [loss for loss in found if loss is not None]

    def forget(self, node) -> None:
        """A lost node came back: its missed polls no longer count."""
        self._missed.pop(node.id, None)

    async def answering(self, nodes) -> list[tuple]:
        """(node, status) of each of ``nodes`` whose agent answers now, by name."""
        async def one(node):
            try:
                return node, await self.status(node)
            except AgentError:
                return None
        found = [f for f in await asyncio.gather(*(one(n) for n in nodes)) if f]
        return sorted(found, key=lambda f: (f[0].name, f[0].id))

    def held_by_this_computer(self, node, status: AgentStatus) -> bool:
        """Whether ``node``'s worker is busy with a connection from this computer — while herd
        runs no llama-server there, a dead connection of a server stopped meanwhile."""
        rpc = status.rpc
        return rpc.state == WorkerState.BUSY and bool(rpc.client) and rpc.client == local_address_towards(node.host)

    async def settle(self, node, status: AgentStatus, *, threads: int | None, wait: float) -> AgentStatus:
        """Wait until ``node``'s worker is free for a relaunch (at most ``wait`` s after the last
        restart).

        A worker lets go of the old server when that server exits. But a node that dropped off
        the network and came back can still hold — or receive late from this computer's
        kernel — the connection of a server stopped meanwhile, and a worker serves one client at
        a time. A worker held by such a dead connection is restarted once.
        """
        start = time.monotonic()
        deadline = start + wait
        restarted = False
        while status.rpc.state in (WorkerState.BUSY, WorkerState.STARTING, WorkerState.CRASHED):
            # (a live close reaches the node within a moment: give it one second first)
            if not restarted and time.monotonic() - start > 1.0 and self.held_by_this_computer(node, status):
                await self.client(node).rpc_start(threads=threads)
                restarted, deadline = True, time.monotonic() + wait
            elif time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
            status = await self.status(node)
        return status

    async def restart_held(self, nodes, *, threads: int | None, wait: float) -> bool:
        """Restart the workers of ``nodes`` that a dead connection from this computer holds
        again (a late packet of a stopped server), and :meth:`settle` them; True if one was."""
        restarted = False
        for node in nodes:
            try:
                status = await self.status(node)
                if self.held_by_this_computer(node, status):
                    await self.client(node).rpc_start(threads=threads)
                    await self.settle(node, await self.status(node), threads=threads, wait=wait)
                    restarted = True
            except AgentError as exc:
                log.info("could not restart the worker of %s: %s", node.name, exc)
        return restarted

    async def close(self) -> None:
        """Close the clients."""
        for c in self._clients.values():
            with contextlib.suppress(Exception):
                await c.aclose()
        self._clients.clear()


def local_address_towards(host: str) -> str | None:
    """The address of this computer that ``host`` sees connections come from (no packet is sent:
    connecting a UDP socket only picks the route)."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((host.strip("[]"), 9))
            return s.getsockname()[0]
    except OSError:
        return None
