"""Failover with real processes: a worker is hurt while a chat reply streams; the supervisor
must name the node within 5 s, serve again on the survivors within 30 s on the same endpoint,
and keep the transcript (the cut reply marked interrupted). Two of the four faults run here, each
on a fresh cluster; ``bench/faults.py`` runs all four and prints the table. Then the choices:
a cancelled countdown, recovery on request, a restarted agent rejoining, and a llama-server that
keeps dying left alone after three tries."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

import pytest
from cluster.agents import start_agent
from conftest import free_port
from lan import Lan
from resilience.faults import LINK_DOWN, RPC_KILL, run_fault

from agent.protocol import AgentStatus
from gui.cluster.failover import events as E
from gui.cluster.failover import supervisor as F
from gui.cluster.failover.policy import MAX_QUICK_FAILURES
from gui.cluster.failover.text import describe_event
from gui.cluster.launching.request import LaunchRequest
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.nodes.discovery import Discovery
from gui.cluster.nodes.records import TokenStore
from gui.cluster.planning import plan as P
from gui.cluster.planning.devices import node_devices

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def check(result) -> None:
    report = "\n".join(f"{t:7.2f}s {kind:<16} {msg}" for t, kind, msg in result.events)
    assert result.detect_s is not None and result.detect_s <= 5.0, report
    assert result.recover_s is not None and result.recover_s <= 30.0, report
    assert result.transcript_ok, report


async def test_rpc_worker_killed_mid_reply(engine, demo_model, tmp_path):
    result = await run_fault(RPC_KILL, engine, demo_model, tmp_path)
    check(result)
    assert "b (127.0.0.1) was lost: its RPC worker" in result.lost_message


@pytest.mark.netns
async def test_link_down_mid_reply_then_the_node_returns(engine, demo_model, tmp_path):
    with Lan(["a", "b"]) as lan:
        result = await run_fault(LINK_DOWN, engine, demo_model, tmp_path, lan, rejoin=True)
    check(result)
    assert "its agent does not answer" in result.lost_message
    assert result.returned_s is not None and result.returned_s <= 10.0



@contextlib.asynccontextmanager
async def supervised(engine, demo_model, procs, tmp_path, policy):
    """Two real agents on loopback (a, b), paired; a started supervisor with split a=4, b=5,
    planned as on two other PCs (:class:`ShrunkStatus`). Yields (supervisor, {name: RunningAgent})."""
    agents = {n: start_agent(procs.popen, tmp_path, n, mdns=False) for n in ("a", "b")}
    disc = Discovery(browse=False, tokens=TokenStore(tmp_path / "tokens.json"))
    sup = None
    try:
        nodes, devices = {}, []
        for agent in agents.values():
            node = await disc.add_address(agent.api_url)
            await disc.pair(node, agent.pin())
            nodes[node.id] = node = disc.nodes[node.id]
            async with disc.client(node) as c:
                devices.extend(node_devices(node, await ShrunkStatus(c, None).status()))
        info = inspect_model(demo_model)
        request = LaunchRequest(P.plan_from_split(info, devices, {"a": 4, "b": 5}), info,
                                ServerOptions(ctx=512, port=free_port(), extra_args=("--threads", "1")), threads=1)
        sup = F.ClusterSupervisor(engine.llama_server, request, nodes, disc.client,
                                  policy=policy, probe_client_for=lambda n: disc.client(n, timeout=1.0))
        await sup.start(120)
        yield sup, agents
    finally:
        if sup is not None:
            await sup.stop()
        await disc.stop()


async def until(sup, pred, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("timed out; events:\n" + "\n".join(describe_event(e) for e in sup.events))
        await asyncio.sleep(0.05)


async def test_cancel_choose_and_the_restarted_agent_rejoins(engine, demo_model, procs, tmp_path):
    """Countdown cancelled → waiting with the options; the user chooses to recover; the lost
    agent is restarted (same id, same pairing) and the supervisor offers, then does, the rejoin."""
    async with supervised(engine, demo_model, procs, tmp_path,
                          F.FailoverPolicy(countdown=30, busy_wait=2)) as (sup, agents):
        b = agents["b"]
        b.proc.kill()
        b.proc.wait(timeout=10)
        await until(sup, lambda: sup.state == F.COUNTDOWN)
        assert any(e.kind == E.EventKind.COUNTDOWN_TICK and "relaunching on a in" in describe_event(e) for e in sup.events)
        sup.cancel()
        await until(sup, lambda: sup.state == F.WAITING)
        assert E.OPT_RECOVER in sup.options and any(e.kind == E.EventKind.CANCELLED for e in sup.events)
        with pytest.raises(ValueError, match="not possible now"):
            await sup.choose(E.OPT_REJOIN)
        await sup.choose(E.OPT_RECOVER)
        assert sup.state == F.SERVING and [n.name for n in sup.launcher.planned_nodes()] == ["a"]

        # The agent comes back (its service manager restarts it): same ports, same state folder.
        port_of = lambda url: int(url.rsplit(":", 1)[1])  # noqa: E731
        again = start_agent(procs.popen, tmp_path, "b", mdns=False, api_port=port_of(b.api_url),
                            rpc_port=b.rpc_port, echo_port=b.echo_port)
        assert again.node_id == b.node_id  # same identity and pairing: no new PIN needed
        await until(sup, lambda: any(e.kind == E.EventKind.RETURNED for e in sup.events))
        assert E.OPT_REJOIN in sup.options
        await sup.rejoin()
        assert sup.state == F.SERVING
        assert sorted(n.name for n in sup.launcher.planned_nodes()) == ["a", "b"]
        assert sup.launcher.plan is sup.request.plan  # everyone back: the user's own split again


async def test_a_server_that_keeps_dying_is_relaunched_then_left_alone(engine, demo_model, procs, tmp_path):
    """llama-server killed with no worker at fault: relaunched on the same nodes; killed again
    right after each relaunch, the supervisor stops after three and waits for the user."""
    async with supervised(engine, demo_model, procs, tmp_path, F.FailoverPolicy(countdown=0)) as (sup, _):
        for round_ in range(MAX_QUICK_FAILURES):
            await until(sup, lambda: sup.state == F.SERVING)
            os.kill(sup.server.pid, signal.SIGKILL)
            await until(sup, lambda: sup.state != F.SERVING)
        await until(sup, lambda: sup.state == F.WAITING)
        exits = [e for e in sup.events if e.kind == E.EventKind.SERVER_EXITED]
        assert len(exits) == MAX_QUICK_FAILURES and "killed by signal SIGKILL" in describe_event(exits[0])
        assert sum(e.kind == E.EventKind.RECOVERED for e in sup.events) == MAX_QUICK_FAILURES - 1
        assert "not relaunching again" in describe_event(sup.events[-1]) and sup.options == (E.OPT_RECOVER,)
        assert not any(e.kind == E.EventKind.LOST for e in sup.events)  # no node was blamed
        await sup.recover_now()
        assert sup.state == F.SERVING


class ShrunkStatus:
    """An agent client whose status reports a device with ``free`` bytes free.

    A PC with too little memory for the model cannot be made on this machine (its RAM is what
    it is), nor another PC on loopback: so these two figures of the real agent's real status are
    replaced (its devices' free memory, and the computer it says it runs on); everything else —
    the calls, the worker, the failures — is the real agent's.
    """

    def __init__(self, client, free: int | None) -> None:
        self._client, self._free = client, free  # free None: as the agent says

    async def status(self) -> AgentStatus:
        st = await self._client.status_json()
        for d in (st.get("rpc") or {}).get("devices") or [] if self._free is not None else []:
            d["free_bytes"] = self._free
        st.setdefault("hardware", {})["machine"] = f"another-pc-{st.get('name')}"
        return AgentStatus.from_json(st)

    def __getattr__(self, name):
        return getattr(self._client, name)


async def test_no_fit_on_the_survivor_offers_waiting_or_more_host_layers(
        engine, demo_model, procs, tmp_path, caplog):
    info = inspect_model(demo_model)
    policy = F.FailoverPolicy(countdown=0, busy_wait=2)
    async with supervised(engine, demo_model, procs, tmp_path, policy) as (sup, agents):
        a_dev = next(d for d, _ in sup.request.plan.assignments if d.node_name == "a")
        # a has room for 4 slots only and this computer for the embeddings only, sized for a plan
        # on a alone (no pipeline then: the first plan's two workers made one, whose input
        # copies cost every device more).
        with_host = P.estimate(P.Plan(info.n_layer, info.n_layer - 3, [(a_dev, 4)]), info, 512)
        alone = P.estimate(P.Plan(info.n_layer, 0, [(a_dev, info.n_layer + 1)]), info, 512)
        a_room = [with_host[0].need_bytes + 4096]
        make_probe = sup.health.client_for
        sup.health.client_for = lambda n: ShrunkStatus(make_probe(n), a_room[0] if n.name == "a" else None)
        sup.health.reset_clients()
        sup.host_free_bytes = lambda: alone[-1].need_bytes + 4096
        b = agents["b"]
        b.proc.kill()
        b.proc.wait(timeout=10)
        await until(sup, lambda: sup.state == F.WAITING)
        no_fit = next(e for e in sup.events if e.kind == E.EventKind.NO_FIT)
        assert "does not fit" in describe_event(no_fit) and "wait for b" in describe_event(no_fit)
        assert no_fit.options == (E.OPT_WAIT, E.OPT_HOST) and E.OPT_HOST in sup.options
        assert not any(e.kind == E.EventKind.RELAUNCHING for e in sup.events)
        await sup.choose(E.OPT_WAIT)
        assert sup.state == F.WAITING and sup.options == (E.OPT_WAIT, E.OPT_HOST)
        # The user would rather run now, slowly: more layers on this computer.
        await sup.choose(E.OPT_HOST)
        assert sup.state == F.SERVING, describe_event(sup.events[-1])
        assert sup.launcher.plan.host_layers > 0
        assert [n.name for n in sup.launcher.planned_nodes()] == ["a"]
        assert "more layers on this computer" in describe_event(next(e for e in sup.events if e.kind == E.EventKind.RELAUNCHING))

        port_of = lambda url: int(url.rsplit(":", 1)[1])  # noqa: E731
        # When b is back, a and this computer have the room the first plan takes again (as a
        # pipeline of two workers, which keeps more input copies on every device).
        first = P.estimate(sup.request.plan, info, 512)
        a_room[0] = next(f for f in first if f.device is not None and f.device.node_name == "a").need_bytes + 4096
        sup.health.reset_clients()
        sup.host_free_bytes = lambda: first[-1].need_bytes + 4096
        start_agent(procs.popen, tmp_path, "b", mdns=False, api_port=port_of(b.api_url),
                    rpc_port=b.rpc_port, echo_port=b.echo_port)
        await until(sup, lambda: E.OPT_REJOIN in sup.options)
        await sup.rejoin()
        assert sup.state == F.SERVING and sup.launcher.plan is sup.request.plan
    # every state the supervisor went through was a move its state machine allows (F.MOVES)
    assert not [r.getMessage() for r in caplog.records if "unexpected move" in r.getMessage()]


async def test_auto_recover_off_waits_and_offers_the_returned_node(engine, demo_model, procs, tmp_path):
    """With auto-recover off the supervisor relaunches nothing by itself: it says what happened,
    waits, and offers the returned node; the user's choice relaunches."""
    policy = F.FailoverPolicy(auto_recover=False, busy_wait=2)
    async with supervised(engine, demo_model, procs, tmp_path, policy) as (sup, agents):
        b = agents["b"]
        b.proc.terminate()  # a clean stop
        b.proc.wait(timeout=10)
        await until(sup, lambda: sup.state == F.WAITING)
        assert sup.options == (E.OPT_RECOVER,) and "auto-recover is off" in describe_event(sup.events[-1])
        port_of = lambda url: int(url.rsplit(":", 1)[1])  # noqa: E731
        start_agent(procs.popen, tmp_path, "b", mdns=False, api_port=port_of(b.api_url),
                    rpc_port=b.rpc_port, echo_port=b.echo_port)
        await until(sup, lambda: E.OPT_REJOIN in sup.options)
        assert sup.state == F.WAITING and sup.options == (E.OPT_RECOVER, E.OPT_REJOIN)
        assert not any(e.kind == E.EventKind.RELAUNCHING for e in sup.events)
        await sup.choose(E.OPT_REJOIN)
        assert sup.state == F.SERVING and sup.launcher.plan is sup.request.plan
