"""The failover banner does not contradict itself (#17).

When a worker's RPC process dies, its agent restarts it: the node is lost for llama-server (its
connection is gone) but answers again at once, and the new plan may use it. The banner then
must not say only "demo-b was lost" above "new plan on demo-a, demo-b": it says the node is back,
keeps the reason it dropped out, and the countdown names the nodes the relaunch really uses.
"""

from __future__ import annotations

import os
import signal

import pytest

from gui.cluster.failover import events as E
from gui.cluster.failover import supervisor as F
from gui.cluster.failover.text import describe_event
from gui.cluster.nodes.health import Loss, LossCause
from gui.widgets.failover_banner import FailoverBanner


def test_a_lost_node_in_the_new_plan_is_said_to_be_back(qtbot):
    banner = FailoverBanner()
    qtbot.addWidget(banner)
    banner.show_event(F.FailoverEvent(E.EventKind.LOST, node="demo-b", host="127.0.0.1",
                                      loss=Loss(None, LossCause.WORKER_REPLACED)))
    banner.show_event(F.FailoverEvent(E.EventKind.REPLANNED, nodes=("demo-a", "demo-b")))
    assert banner.title.text() == "demo-b dropped out and answers again; relaunching with it"
    assert "its RPC worker crashed" in banner.detail.text() and "new plan on demo-a, demo-b" in banner.detail.text()
    # the survivors the session knows leave the lost node out; the plan does not
    banner.show_event(F.FailoverEvent(E.EventKind.COUNTDOWN_TICK, seconds=4.2, options=(E.OPT_RECOVER,)), ["demo-a"])
    assert banner.countdown.text() == "Relaunching on demo-a, demo-b in 5 s…"


def test_a_lost_node_left_out_stays_lost(qtbot):
    banner = FailoverBanner()
    qtbot.addWidget(banner)
    banner.show_event(F.FailoverEvent(E.EventKind.LOST, node="demo-b", host="127.0.0.1",
                                      loss=Loss(None, LossCause.AGENT_SILENT, "ReadTimeout")))
    banner.show_event(F.FailoverEvent(E.EventKind.REPLANNED, nodes=("demo-a",)))
    assert banner.title.text() == "demo-b was lost"
    assert "does not answer" in banner.detail.text() and "new plan on demo-a" in banner.detail.text()


@pytest.fixture
def window(make_window):
    return make_window(browse=False, **{"failover/countdown": 30})


@pytest.mark.engine
def test_killed_worker_restarted_by_its_agent(qtbot, window, agents, demo_model, launch_on_both):
    win = window
    banner = win.failover_banner
    events = []
    win.session.failover.connect(events.append)
    ids = launch_on_both(win, agents, demo_model)
    call = win.session.node_status(ids["demo-b"])
    with qtbot.waitSignal(call.done, timeout=10000):
        pass
    os.kill(call.future.result()["rpc"]["pid"], signal.SIGKILL)
    qtbot.waitUntil(lambda: any(e.kind == E.EventKind.REPLANNED for e in events), timeout=20000)
    replanned = next(e for e in events if e.kind == E.EventKind.REPLANNED)
    qtbot.waitUntil(lambda: "in " in banner.countdown.text(), timeout=10000)
    assert "RPC worker" in banner.detail.text(), banner.detail.text()
    assert describe_event(replanned) in banner.detail.text()
    if "demo-b" in replanned.nodes:
        assert "answers again" in banner.title.text(), banner.title.text()
        assert "demo-a, demo-b" in banner.countdown.text(), banner.countdown.text()
    else:
        assert banner.title.text() == "demo-b was lost"
        assert "demo-b" not in banner.countdown.text(), banner.countdown.text()
    assert banner.cancel_button.isVisible() and banner.recover_button.isVisible()
    win.launch_flow.stop()
    qtbot.waitUntil(lambda: win.session.supervisor is None and win.launch.state == "stopped", timeout=30000)
