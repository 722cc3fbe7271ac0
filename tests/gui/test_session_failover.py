"""The app's session runs launches under the failover supervisor: when a worker's agent is killed
while the cluster serves, the session's ``failover`` signal says which node was lost and, on the
GUI thread, that the cluster serves again on the survivor at the same endpoint."""

from __future__ import annotations

import pytest
from cluster.agents import start_agent
from conftest import free_port

from gui.cluster.failover.events import EventKind
from gui.cluster.failover.supervisor import FailoverPolicy
from gui.cluster.failover.text import describe_event
from gui.cluster.launching.request import LaunchRequest
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.nodes.records import TokenStore
from gui.cluster.planning import plan as P
from gui.session import ClusterSession

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def result(qtbot, call, timeout=30000):
    with qtbot.waitSignal(call.done, timeout=timeout):
        pass
    return call.future.result()


def test_session_reports_a_lost_worker_and_serves_again(qtbot, bridge, procs, tmp_path, engine, demo_model):
    a = start_agent(procs.popen, tmp_path, "a", mdns=False)
    b = start_agent(procs.popen, tmp_path, "b", mdns=False)
    session = ClusterSession(bridge, browse=False, tokens=TokenStore(tmp_path / "tokens.json"))
    session.failover_policy = FailoverPolicy(countdown=0.5)
    events = []
    session.failover.connect(events.append)
    try:
        result(qtbot, session.start([a.api_url, b.api_url]))
        for agent in (a, b):
            result(qtbot, session.pair(agent.node_id, agent.pin()))
        devices = result(qtbot, session.devices([a.node_id, b.node_id]))
        plan = P.plan_from_split(inspect_model(demo_model), devices, {"a": 4, "b": 5})
        port = free_port()
        request = LaunchRequest(plan, inspect_model(demo_model),
                                ServerOptions(ctx=512, port=port, extra_args=("--threads", "1")))
        result(qtbot, session.launch(engine.llama_server, request), timeout=120000)
        url = session.server_url
        b.proc.kill()
        qtbot.waitUntil(lambda: any(e.kind == EventKind.RECOVERED for e in events), timeout=60000)
        lost = next(e for e in events if e.kind == EventKind.LOST)
        assert lost.node == "b" and "does not answer" in describe_event(lost)
        assert session.server_url == url == f"http://127.0.0.1:{port}"
        assert [n.name for n in session.supervisor.launcher.planned_nodes()] == ["a"]
    finally:
        with qtbot.waitSignal(session.stop_launch().done, timeout=30000):
            pass
        session.close()
