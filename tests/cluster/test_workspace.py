"""The app's Qt-free state (gui.cluster.workspace): what it holds, the events it sends, and the
questions it answers from the launch that runs rather than from the split being edited."""

from __future__ import annotations

import dataclasses

import pytest

from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.nodes.records import Node
from gui.cluster.planning.plan import Device, Plan
from gui.cluster.workspace import MODEL, NODES, OPTIONS, RUNNING, STATUS, Workspace

GiB = 1 << 30


def _node(name: str, port: int, **kw) -> Node:
    return Node(id=f"id-{name}", name=name, host="127.0.0.1", api_port=port - 2, rpc_port=port, paired=True, **kw)


def _status(free: int = GiB) -> dict:
    return {"rpc": {"state": "stopped"}, "hardware": {"ram_total_bytes": 2 * GiB}, "load": {"ram_free_bytes": free}}


def _plan_on(*nodes: Node) -> Plan:
    devs = [Device(n.id, n.name, n.rpc_endpoint, 0, "CPU", GiB, 2 * GiB) for n in nodes]
    return Plan(8, 9 - 4 * len(devs) - (1 if len(devs) == 2 else 0),
                [(d, 4 + (1 if i == 1 else 0)) for i, d in enumerate(devs)])


@pytest.fixture
def ws():
    w = Workspace(ServerOptions(ctx=8192))
    w.events = []
    w.subscribe(w.events.append)
    return w


def test_nodes_and_their_status_make_the_devices_to_plan_with(ws):
    a, b = _node("alpha", 50052), _node("beta", 50054)
    ws.node_event("added", a)
    ws.node_event("added", dataclasses.replace(b, paired=False))
    ws.set_status(a.id, _status())
    ws.set_status(b.id, _status())
    assert [d.node_name for d in ws.planned_devices()] == ["alpha"]  # beta is not paired
    ws.node_event("updated", b)
    assert [d.node_name for d in ws.planned_devices()] == ["alpha", "beta"]
    assert ws.planned_devices()[0].free_bytes == GiB
    assert ws.node_event("updated", dataclasses.replace(a, reachable=False)) is True  # went quiet
    assert ws.node_event("updated", dataclasses.replace(a, reachable=False)) is False  # already quiet
    ws.node_event("removed", b)
    assert b.id not in ws.nodes and b.id not in ws.statuses
    assert ws.events == [NODES, NODES, STATUS, STATUS, NODES, NODES, NODES, NODES]


def test_the_context_lives_in_the_workspace_and_follows_the_model(ws, demo_model):
    info = inspect_model(demo_model)
    assert info.context_length and info.context_length < 8192
    ws.open_model(info)
    assert ws.options.ctx == info.context_length  # lowered to what the model was trained for
    assert ws.events == [OPTIONS, MODEL]
    ws.set_options(ctx=512, port=9000)
    assert (ws.options.ctx, ws.options.port) == (512, 9000) and ws.events[-1] == OPTIONS
    n = len(ws.events)
    ws.set_options(ctx=512)
    assert len(ws.events) == n  # no change, no event
    with pytest.raises(ValueError, match="port"):
        ws.set_options(port=0)
    assert ws.options.port == 9000


def test_a_request_is_made_from_what_the_workspace_holds_at_that_moment(ws, demo_model):
    a = _node("alpha", 50052)
    plan = _plan_on(a)
    assert ws.launch_request(plan) is None  # no model yet
    ws.open_model(inspect_model(demo_model))
    ws.set_options(ctx=1024)
    req = ws.launch_request(plan, threads=2)
    ws.set_options(ctx=2048)  # an edit after Start does not reach the request being launched
    assert (req.plan, req.options.ctx, req.threads) == (plan, 1024, 2)


def test_does_the_running_model_use_a_node_is_asked_of_what_runs(ws, demo_model):
    a, b = _node("alpha", 50052), _node("beta", 50054)
    for n in (a, b):
        ws.node_event("added", n)
    ws.open_model(inspect_model(demo_model))
    assert not ws.running_uses(a)
    ws.set_running(ws.launch_request(_plan_on(a)))  # after a failover: only alpha serves
    assert ws.events[-1] == RUNNING
    assert ws.running_uses(a) and not ws.running_uses(b)
    ws.set_running(None)
    assert not ws.running_uses(a)


def test_a_broken_view_does_not_stop_the_others(ws):
    seen = []

    def broken(_event):
        raise RuntimeError("a view failed")
    ws.subscribe(broken)
    ws.subscribe(seen.append)
    ws.set_options(ctx=1024)
    assert seen == [OPTIONS]
