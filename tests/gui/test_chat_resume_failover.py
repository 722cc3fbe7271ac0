"""A real failover resumes the chat pane's cut reply (#34 item 5): two real agents serve SmolLM2
split between them, one is killed while a reply streams, the failover relaunches llama-server on
the survivor, and the pane continues the reply where it stopped. The pane is wired to the session
as the launch flow wires it (interrupted on a lost worker, resumed when the cluster serves again)."""

from __future__ import annotations

import httpx
import pytest
from cluster.agents import start_agent
from conftest import free_port

from gui.cluster.failover.events import EventKind
from gui.cluster.failover.supervisor import FailoverPolicy
from gui.cluster.launching.request import LaunchRequest
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.nodes.records import TokenStore
from gui.cluster.planning import plan as P
from gui.session import ClusterSession
from gui.widgets.chat_pane import ChatPane

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def result(qtbot, call, timeout=30000):
    with qtbot.waitSignal(call.done, timeout=timeout):
        pass
    return call.future.result()


def test_a_reply_cut_by_a_lost_worker_goes_on_after_the_failover(qtbot, bridge, procs, tmp_path, engine, smollm2):
    a = start_agent(procs.popen, tmp_path, "a", mdns=False)
    b = start_agent(procs.popen, tmp_path, "b", mdns=False)
    session = ClusterSession(bridge, browse=False, tokens=TokenStore(tmp_path / "tokens.json"))
    session.failover_policy = FailoverPolicy(countdown=0.5)
    events = []
    session.failover.connect(events.append)
    pane = ChatPane()
    qtbot.addWidget(pane)
    pane.show()
    session.replyInterrupted.connect(pane.interrupt_reply)

    def on_failover(ev) -> None:  # what gui/launch_flow.py does on these events
        if ev.kind == EventKind.RECOVERED:
            pane.set_send(session.chat_sender())
            pane.resume_reply()

    session.failover.connect(on_failover)
    try:
        result(qtbot, session.start([a.api_url, b.api_url]))
        for agent in (a, b):
            result(qtbot, session.pair(agent.node_id, agent.pin()))
        devices = result(qtbot, session.devices([a.node_id, b.node_id]))
        model = inspect_model(smollm2)
        half = (model.n_layer + 1) // 2
        plan = P.plan_from_split(model, devices, {"a": half, "b": model.n_layer + 1 - half})
        request = LaunchRequest(plan, model, ServerOptions(ctx=1024, port=free_port(), extra_args=("--threads", "1")))
        result(qtbot, session.launch(engine.llama_server, request), timeout=120000)
        pane.set_send(session.chat_sender())
        pane.temperature.setValue(0)
        pane.max_tokens.setValue(60)  # fewer than counting to 50 takes: the reply runs to its length
        assert pane.send_text("Count from 1 to 50, separated by commas.")
        qtbot.waitUntil(lambda: pane.reply_stats is not None and pane.reply_stats.pieces >= 8, timeout=60000)
        b.proc.kill()  # the worker is lost mid-reply
        qtbot.waitUntil(lambda: pane.conversation.messages[-1].interrupted, timeout=30000)
        partial = pane.conversation.messages[-1].content
        qtbot.waitUntil(lambda: any(e.kind == EventKind.RECOVERED for e in events), timeout=120000)
        qtbot.waitUntil(lambda: pane.conversation.messages[-1].state == "complete", timeout=60000)
        whole_tokens = len(httpx.post(session.server_url + "/tokenize", timeout=30,
                                      json={"content": pane.conversation.messages[-1].content}).json()["tokens"])
    finally:
        with qtbot.waitSignal(session.stop_launch().done, timeout=30000):
            pass
        session.close()

    reply = pane.conversation.messages[-1]
    assert [m.role for m in pane.conversation.messages] == ["user", "assistant"]
    assert reply.resumed and partial and reply.content.startswith(partial) and len(reply.content) > len(partial)
    assert not reply.content[len(partial):].lstrip().startswith(partial.strip()[:6])
    # one reply of the length asked, in all: the continuation got what the cut part left of it
    assert reply.finish_reason == "length" and whole_tokens <= 60 + 2, whole_tokens
