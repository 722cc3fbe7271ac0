"""The failover banner in the window: a worker's RPC process is killed (-9) while the cluster
runs; the banner names the node within 5 s and counts down, Cancel keeps the server down and
offers Relaunch now, which brings it back on the same URL and the chat carries on. With
auto-recover switched off in the Cluster menu no countdown starts. A node whose agent freezes
(SIGSTOP, like a PC gone to sleep) is lost, and when it thaws the banner offers to use it again.
The buttons for the no-fit choices (wait, more layers here) are checked with the supervisor's
own events."""

from __future__ import annotations

import os
import re
import signal
import time

import httpx
import pytest
from PySide6.QtCore import Qt

from gui.app import MainWindow
from gui.bridge import AsyncBridge
from gui.cluster.failover import events as E
from gui.cluster.failover import supervisor as F
from gui.cluster.nodes.health import Loss, LossCause
from gui.session import ClusterSession
from gui.settings import Settings
from gui.translations import load_translator
from gui.widgets.failover_banner import FailoverBanner


def test_banner_offers_what_the_supervisor_offers(qtbot):
    banner = FailoverBanner()
    qtbot.addWidget(banner)
    chosen = []
    banner.optionChosen.connect(chosen.append)
    assert banner.isHidden()

    banner.show_event(F.FailoverEvent(E.EventKind.LOST, node="b", host="10.0.0.2",
                                      loss=Loss(None, LossCause.AGENT_SILENT, "ConnectError: refused")))
    assert not banner.isHidden() and banner.title.text() == "b was lost"
    assert banner.detail.text() == ("b (10.0.0.2) was lost: its agent does not answer: connection refused "
                                    "(herd-agent is not running there any more)"), banner.detail.text()
    banner.show_event(F.FailoverEvent(E.EventKind.NO_FIT, misfits=("a: needs 3.1 GiB, has 2.0 GiB",), lost=("b",),
                                      options=(E.OPT_WAIT, E.OPT_HOST)))
    assert "does not fit on what is left (a: needs 3.1 GiB, has 2.0 GiB)" in banner.detail.text()
    assert "wait for b to come back" in banner.detail.text()
    assert banner.wait_button.isVisibleTo(banner) and banner.wait_button.text() == "Wait for b"
    assert banner.host_button.isVisibleTo(banner)
    assert not banner.recover_button.isVisibleTo(banner) and not banner.cancel_button.isVisibleTo(banner)
    qtbot.mouseClick(banner.host_button, Qt.MouseButton.LeftButton)
    assert chosen == [E.OPT_HOST]
    assert not banner.host_button.isVisibleTo(banner)  # one click, one intention

    # waiting for the node; it comes back and is offered alongside
    banner.show_event(F.FailoverEvent(E.EventKind.WAITING, wait=F.WaitReason.FOR_NODES, lost=("b",),
                                      options=(E.OPT_WAIT, E.OPT_HOST)))
    assert banner.countdown.text() == "Waiting: waiting for b to come back"
    banner.show_event(F.FailoverEvent(E.EventKind.RETURNED, node="b", back=("b",), options=(E.OPT_REJOIN,)))
    assert banner.detail.text() == "b is back; re-plan with it to use it again"
    assert banner.rejoin_button.isVisibleTo(banner) and banner.rejoin_button.text() == "Use b again"
    assert banner.wait_button.isVisibleTo(banner)
    qtbot.mouseClick(banner.rejoin_button, Qt.MouseButton.LeftButton)
    assert chosen == [E.OPT_HOST, E.OPT_REJOIN]

    banner.choice_failed()  # refused (the supervisor moved on meanwhile): offered again
    assert banner.rejoin_button.isVisibleTo(banner) and banner.wait_button.isVisibleTo(banner)

    banner.show_event(F.FailoverEvent(E.EventKind.RECOVERED, url="http://127.0.0.1:8080", nodes=("a",), seconds=3.04))
    assert banner.title.text().startswith("Serving again")
    assert banner.detail.text() == "serving again at http://127.0.0.1:8080 on a, 3.0 s after the loss"
    assert not any(b.isVisibleTo(banner) for b in (banner.rejoin_button, banner.wait_button, banner.host_button))
    banner.clear()
    assert banner.isHidden()


def test_banner_speaks_chinese(qtbot, qapp, tmp_path):
    t = load_translator("zh_CN", cache=tmp_path)
    qapp.installTranslator(t)
    try:
        banner = FailoverBanner()
        qtbot.addWidget(banner)
        banner.show_event(F.FailoverEvent(E.EventKind.LOST, node="b", host="10.0.0.2",
                                          loss=Loss(None, LossCause.WORKER_STOPPED)))
        banner.show_event(F.FailoverEvent(E.EventKind.COUNTDOWN_TICK, nodes=("a",), seconds=3.2,
                                          options=(E.OPT_RECOVER,)), ["a"])
        assert banner.title.text() == "b 已失联"
        assert banner.countdown.text() == "4 秒后在 a 上重新启动…"
        assert banner.recover_button.text() == "立即重新启动" and banner.cancel_button.text() == "取消"
    finally:
        qapp.removeTranslator(t)


def test_failover_settings_reach_the_policy_and_bad_values_fall_back(qtbot, tmp_path):
    settings = Settings(str(tmp_path / "herd.ini"))
    settings.qs.setValue("failover/countdown", "soon")
    settings.qs.setValue("failover/rejoin", "sometimes")
    settings.qs.setValue("failover/auto_recover", "false")
    bridge = AsyncBridge()
    win = MainWindow(settings, bridge=bridge, session=ClusterSession(bridge, browse=False))
    qtbot.addWidget(win)
    try:
        policy = win.session.failover_policy
        assert (policy.auto_recover, policy.countdown, policy.rejoin) == (False, 5.0, "ask")
        assert not win.menus.auto_recover_action.isChecked() and win.menus.countdown_actions[5].isChecked()
        assert win.menus.rejoin_actions["ask"].isChecked()
        win.menus.auto_recover_action.setChecked(True)
        win.menus.countdown_actions[10].trigger()
        win.menus.rejoin_actions["auto"].trigger()
        assert (policy.auto_recover, policy.countdown, policy.rejoin) == (True, 10.0, "auto")
        assert Settings(str(tmp_path / "herd.ini")).get("failover/countdown") == 10
        with pytest.raises(ValueError, match="rejoin must be"):
            win.session.set_failover_policy(auto_recover=True, countdown=1, rejoin="never")
    finally:
        win.close()
        bridge.close()


# ---------------------------------------------------------------- the window, real processes


@pytest.fixture
def window(make_window):
    # a countdown long enough to watch it tick and cancel it; nodes are added by address
    return make_window(browse=False, **{"failover/countdown": 30})


def _kill_rpc_worker(qtbot, win, node_id: str) -> None:
    call = win.session.node_status(node_id)
    with qtbot.waitSignal(call.done, timeout=10000):
        pass
    os.kill(call.future.result()["rpc"]["pid"], signal.SIGKILL)


def _seconds_left(win) -> int | None:
    m = re.search(r"in (\d+) s", win.failover_banner.countdown.text())
    return int(m.group(1)) if m else None


def _health(url: str) -> int | None:
    try:
        return httpx.get(url + "/health", timeout=2).status_code
    except httpx.HTTPError:
        return None


@pytest.mark.engine
def test_lost_worker_banner_countdown_cancel_and_relaunch(qtbot, window, agents, demo_model, launch_on_both):
    win = window
    banner = win.failover_banner
    events = []
    win.session.failover.connect(events.append)
    ids = launch_on_both(win, agents, demo_model)
    url = win.session.server_url
    endpoint = win.launch.endpoint.text()
    assert banner.isHidden() and win.session.failover_policy.countdown == 30

    # kill -9 demo-b's RPC worker: named within 5 s, and the countdown ticks
    _kill_rpc_worker(qtbot, win, ids["demo-b"])
    killed = time.monotonic()
    qtbot.waitUntil(lambda: banner.isVisible() and "demo-b" in banner.title.text(), timeout=5000)
    assert time.monotonic() - killed <= 5.0
    assert "RPC worker" in banner.detail.text(), banner.detail.text()
    qtbot.waitUntil(lambda: _seconds_left(win) is not None, timeout=15000)
    first = _seconds_left(win)
    assert "demo-a" in banner.countdown.text() and banner.cancel_button.isVisible()
    assert banner.recover_button.isVisible()
    qtbot.waitUntil(lambda: (_seconds_left(win) or first) < first, timeout=3000)
    assert not win.chat.send_button.isEnabled() and "recovering" in win.chat.status.text()

    # Cancel: the relaunch does not happen; the server stays down; Relaunch now is offered
    qtbot.mouseClick(banner.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: any(e.kind == E.EventKind.CANCELLED for e in events), timeout=5000)
    qtbot.waitUntil(lambda: win.session.supervisor.state == F.WAITING, timeout=5000)
    assert not banner.cancel_button.isVisible() and banner.recover_button.isVisible()
    assert "cancelled" in banner.countdown.text()
    assert _health(url) is None
    assert not win.chat.send_button.isEnabled()

    # Relaunch now: back on the same URL, and the chat carries on
    qtbot.mouseClick(banner.recover_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: any(e.kind == E.EventKind.RECOVERED for e in events), timeout=60000)
    qtbot.waitUntil(lambda: win.launch.state == "ready", timeout=10000)
    assert win.session.server_url == url and win.launch.endpoint.text() == endpoint
    assert _health(url) == 200
    assert banner.title.text().startswith("Serving again")
    win.chat.max_tokens.setValue(4)
    with qtbot.waitSignal(win.chat.replyFinished, timeout=60000) as sig:
        assert win.chat.send_text("still there?")
    assert sig.args[0].pieces == 4, win.chat.status.text()

    # auto-recover off (Cluster menu): a loss waits for the user, no countdown
    win.menus.auto_recover_action.setChecked(False)
    assert win.settings.get("failover/auto_recover") is False
    assert win.session.failover_policy.auto_recover is False
    seen = len(events)
    _kill_rpc_worker(qtbot, win, ids["demo-b"])
    qtbot.waitUntil(lambda: any(e.kind == E.EventKind.WAITING for e in events[seen:]), timeout=15000)
    assert any(e.kind == E.EventKind.LOST and e.node == "demo-b" for e in events[seen:])
    assert not any(e.kind == E.EventKind.COUNTDOWN_TICK for e in events[seen:])
    assert banner.isVisible() and "demo-b" in banner.title.text()
    assert not banner.cancel_button.isVisible() and banner.recover_button.isVisible()
    assert _seconds_left(win) is None and "auto-recover is off" in banner.countdown.text()
    qtbot.mouseClick(banner.recover_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: any(e.kind == E.EventKind.RECOVERED for e in events[seen:]), timeout=60000)
    assert _health(url) == 200

    win.launch_flow.stop()
    qtbot.waitUntil(lambda: win.session.supervisor is None and win.launch.state == "stopped", timeout=30000)
    assert banner.isHidden()


@pytest.mark.engine
def test_a_node_that_returns_is_offered_and_used_again(qtbot, window, agents, demo_model, launch_on_both):
    win = window
    banner = win.failover_banner
    events = []
    win.session.failover.connect(events.append)
    launch_on_both(win, agents, demo_model)
    url = win.session.server_url
    win.menus.countdown_actions[0].trigger()  # relaunch at once (Cluster menu, applied to this launch)
    assert win.session.failover_policy.countdown == 0 and win.settings.get("failover/countdown") == 0
    b = next(a for a in agents.agents if a.name == "demo-b")
    os.kill(b.proc.pid, signal.SIGSTOP)  # its agent stops answering, as on a PC gone to sleep
    try:
        qtbot.waitUntil(lambda: banner.isVisible() and "demo-b" in banner.title.text(), timeout=5000)
        assert "does not answer" in banner.detail.text(), banner.detail.text()
        qtbot.waitUntil(lambda: any(e.kind == E.EventKind.RECOVERED for e in events), timeout=60000)
        assert not any(e.kind == E.EventKind.COUNTDOWN_TICK for e in events)
        assert [n.name for n in win.session.supervisor.launcher.planned_nodes()] == ["demo-a"]
        assert _health(url) == 200
    finally:
        os.kill(b.proc.pid, signal.SIGCONT)
    qtbot.waitUntil(lambda: banner.rejoin_button.isVisible(), timeout=15000)
    assert banner.rejoin_button.text() == "Use demo-b again" and "demo-b" in banner.title.text()
    qtbot.mouseClick(banner.rejoin_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: sum(e.kind == E.EventKind.RECOVERED for e in events) == 2, timeout=60000)
    assert sorted(n.name for n in win.session.supervisor.launcher.planned_nodes()) == ["demo-a", "demo-b"]
    assert win.session.server_url == url and _health(url) == 200
    win.launch_flow.stop()
    qtbot.waitUntil(lambda: win.session.supervisor is None and win.launch.state == "stopped", timeout=30000)
