"""Fault injection on a real cluster: two real herd-agents (on a simulated LAN, or on loopback),
a :class:`~gui.cluster.failover.supervisor.ClusterSupervisor` in this process running the real
llama-server, a chat reply streaming — then one worker is hurt and the clock runs.

Shared by ``tests/resilience/test_failover.py`` (a few faults, asserted) and
``bench/faults.py`` (every fault, printed as a table).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from cluster.agents import RunningAgent, start_agent
from conftest import free_port

from gui.cluster.chat.conversation import COMPLETE, INTERRUPTED, Conversation, ReplyInterrupted, retry, send
from gui.cluster.failover.events import EventKind
from gui.cluster.failover.supervisor import ClusterSupervisor, FailoverPolicy
from gui.cluster.failover.text import describe_event
from gui.cluster.launching.request import LaunchRequest
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.nodes.discovery import Discovery
from gui.cluster.nodes.records import TokenStore
from gui.cluster.planning import plan as P
from gui.cluster.planning.devices import node_devices

RPC_KILL = "kill -9 RPC worker"
AGENT_KILL = "kill -9 agent"
LINK_DOWN = "link down"
CLEAN_STOP = "clean stop"
FAULTS = (RPC_KILL, AGENT_KILL, LINK_DOWN, CLEAN_STOP)

LAN_PORTS = (50050, 50052, 50053)  # each namespace has its own ports: the defaults are free


@dataclass
class FaultResult:
    """What one fault did to the cluster.

    Attributes:
        fault: which fault.
        detect_s: from the fault to the supervisor's ``lost`` event naming the node.
        recover_s: from the fault until a chat completes on the relaunched server.
        transcript_ok: the earlier exchange is intact, the cut reply is marked interrupted with
            its text kept, and the conversation continued after the relaunch.
        lost_message: what the supervisor said about the lost node.
        returned_s: from the node's return (link up) to the ``returned`` event (link fault only).
        events: every supervisor event, as (seconds since the fault, kind, message).
    """

    fault: str
    detect_s: float | None = None
    recover_s: float | None = None
    transcript_ok: bool = False
    lost_message: str = ""
    returned_s: float | None = None
    events: list[tuple[float, str, str]] = field(default_factory=list)


async def _wait(predicate, timeout: float, what: str, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(step)


async def run_fault(fault: str, engine, model: Path, tmp: Path, lan=None, *, rejoin: bool = False,
                    policy: FailoverPolicy | None = None) -> FaultResult:
    """Run one fault scenario start to end and clean up; returns what was measured.

    ``lan`` is a :class:`lan.Lan` with hosts ``a`` and ``b`` (``b`` is hurt), or None for two
    agents on loopback (the link fault needs the LAN). With ``rejoin`` the link comes back
    afterwards and the supervisor must notice the node's return and re-plan with it.
    """
    if fault == LINK_DOWN and lan is None:
        raise ValueError("the link fault needs the simulated LAN")
    env = dict(os.environ, LLAMA_CACHE=str(tmp / "llama-cache"))
    agents: dict[str, RunningAgent] = {}
    started: list = []

    def popen_for(name):
        if lan is not None:
            return lambda argv, **kw: lan[name].popen(argv, env=env, **kw)

        def local(argv, **kw):
            import subprocess
            p = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL, env=env, **kw)
            started.append(p)
            return p
        return local

    for name in ("a", "b"):
        if lan is not None:
            api, rpc, echo = LAN_PORTS
            agents[name] = start_agent(popen_for(name), tmp, name, bind=lan[name].ip, mdns=False,
                                       api_port=api, rpc_port=rpc, echo_port=echo)
        else:
            agents[name] = start_agent(popen_for(name), tmp, name, mdns=False)
    result = FaultResult(fault)
    disc = Discovery(browse=False, tokens=TokenStore(tmp / "tokens.json"))
    sup: ClusterSupervisor | None = None
    try:
        nodes = {}
        for name, agent in agents.items():
            node = await disc.add_address(agent.api_url)
            wrap = lan[name].cmd if lan is not None else None
            await disc.pair(node, await asyncio.to_thread(agent.pin, wrap))
            nodes[node.id] = disc.nodes[node.id]
        devices = []
        for node in nodes.values():
            async with disc.client(node) as c:
                devices.extend(node_devices(node, await c.status()))
        info = inspect_model(model)
        plan = P.plan_from_split(info, devices, {"a": 4, "b": 5})
        conv = Conversation()
        request = LaunchRequest(plan, info, ServerOptions(ctx=2048, port=free_port(),
                                                          extra_args=("-np", "1", "--threads", "1")), threads=1)
        sup = ClusterSupervisor(
            engine.llama_server, request, nodes, disc.client,
            policy=policy or FailoverPolicy(countdown=1.0, busy_wait=3.0),
            probe_client_for=lambda n: disc.client(n, timeout=1.0), conversation=conv)
        await sup.start(120)
        async with httpx.AsyncClient() as http:
            first = await send(conv, http, sup.url, "Hello, cluster.", max_tokens=8)
            assert first.state == COMPLETE
            long = asyncio.ensure_future(send(conv, http, sup.url, "Tell me a long story.", max_tokens=1800))
            await _wait(lambda: len(conv.messages) == 4 and len(conv.messages[3].content) > 10 or long.done(),
                        60, "the long reply to start streaming")
            assert not long.done(), "the long reply ended before the fault"

            b = agents["b"]
            t0 = time.monotonic()
            if fault == RPC_KILL:
                async with disc.client(disc.find(b.node_id)) as c:
                    pid = (await c.status())["rpc"]["pid"]
                os.kill(pid, signal.SIGKILL)
            elif fault == AGENT_KILL:
                b.proc.kill()
            elif fault == LINK_DOWN:
                lan["b"].link(False)
            elif fault == CLEAN_STOP:
                b.proc.terminate()
            else:
                raise ValueError(f"unknown fault {fault!r}")

            lost = await _wait(lambda: next((e for e in sup.events if e.kind == EventKind.LOST and e.node == "b"), None),
                               30, "the supervisor to report b lost")
            result.detect_s = lost.at - t0
            result.lost_message = describe_event(lost)
            try:
                await asyncio.wait_for(long, 30)
            except ReplyInterrupted:
                pass
            await _wait(lambda: any(e.kind == EventKind.RECOVERED for e in sup.events), 60, "the cluster to serve again")
            again = await retry(conv, http, sup.url, max_tokens=8)
            result.recover_s = time.monotonic() - t0
            msgs = conv.messages
            result.transcript_ok = (
                [m.role for m in msgs] == ["user", "assistant", "user", "assistant", "assistant"]
                and msgs[0].content == "Hello, cluster." and msgs[1] is first and first.state == COMPLETE
                and msgs[3].state == INTERRUPTED and len(msgs[3].content) > 10 and bool(msgs[3].note)
                and again.state == COMPLETE and bool(again.content))

            if rejoin:
                assert fault == LINK_DOWN
                t_up = time.monotonic()
                lan["b"].link(True)
                back = await _wait(lambda: next((e for e in sup.events if e.kind == EventKind.RETURNED), None),
                                   30, "the supervisor to notice b is back")
                result.returned_s = back.at - t_up
                n_recovered = sum(e.kind == EventKind.RECOVERED for e in sup.events)
                await sup.rejoin()
                await _wait(lambda: sum(e.kind == EventKind.RECOVERED for e in sup.events) > n_recovered, 60,
                            "the cluster to serve again with b:\n" + "\n".join(describe_event(e) for e in sup.events))
                assert {n.name for n in sup.launcher.planned_nodes()} == {"a", "b"}
                done = await send(conv, http, sup.url, "Welcome back.", max_tokens=8)
                assert done.state == COMPLETE
        result.events = [(round(e.at - t0, 2), e.kind, describe_event(e)) for e in sup.events]
        return result
    finally:
        if sup is not None:
            await sup.stop()
        await disc.stop()
        if lan is not None:
            lan["b"].link(True)
        for p in started:
            if p.poll() is None:
                p.terminate()
        for p in started:
            try:
                p.wait(timeout=10)
            except Exception:
                p.kill()
                p.wait(timeout=5)

