"""The dashboard in the real window, for a cluster that lives for days (#36): its history
outlives a new Start, and its graphs keep a readable height while the failover banner shows."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QApplication

from gui.cluster.failover import events as E
from gui.cluster.failover import supervisor as F
from gui.cluster.nodes.health import Loss, LossCause
from gui.cluster.nodes.telemetry import Sample
from gui.widgets.dashboard import MIN_PLOT_HEIGHT


def _settle():
    for _ in range(5):
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
    QApplication.processEvents()


def test_history_survives_a_new_start(qtbot, make_window, demo_model):
    win = make_window(browse=False)
    d = win.dashboard
    t0 = d._t0 - 120  # two minutes of an earlier run
    for i in range(30):
        win.on_sample(Sample(t0 + i, "metrics", "http://127.0.0.1:1", {"decode_tps": 40.0 + i}))
    assert win.open_model(str(demo_model))
    qtbot.waitUntil(lambda: win.editor.plan() is not None, timeout=10000)
    win.editor.ctx.setValue(512)
    qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.launch.state in ("ready", "failed"), timeout=120000)
    assert win.launch.state == "ready", win.launch.status.text()
    try:
        kept = [v for t, v in zip(d.series[("tps", "decode")].t, d.series[("tps", "decode")].v) if t < t0 + 30]
        assert kept[:30] == [40.0 + i for i in range(30)]
    finally:
        win.launch_flow.stop()
        qtbot.waitUntil(lambda: win.session.supervisor is None and win.launch.state == "stopped", timeout=30000)


def test_graphs_keep_their_height_while_the_banner_shows(qtbot, make_window):
    win = make_window(browse=False)
    win.tabs.setCurrentIndex(2)
    d = win.dashboard
    for i in range(10):
        win.on_sample(Sample(d._t0 + i, "metrics", "http://127.0.0.1:1", {"decode_tps": 40.0, "prompt_tps": 300.0}))
    win.failover_banner.show_event(F.FailoverEvent(E.EventKind.LOST, node="b", host="10.0.0.2",
                                                   loss=Loss(None, LossCause.AGENT_SILENT, "ConnectError: refused")))
    assert win.failover_banner.isVisible()
    for width, height in ((1366, 768), (1024, 600)):
        win.resize(width, height)
        _settle()
        heights = {key: p.vb.sceneBoundingRect().height() for key, p in d.plots.items()}
        assert all(h >= MIN_PLOT_HEIGHT for h in heights.values()), (width, height, heights)
        # what does not fit scrolls, inside the dashboard
        assert d.scroll.widget() is d.graphs
