"""The window stays on the screen: hovering over the dashboard's graphs never widens it (#17).

Three real agents on loopback are added through *Add by address…* and paired through their
cards' *Pair…* dialogs, so the dashboard draws one RTT and one throughput curve per node (real
telemetry). The mouse then really moves over each graph; the readout line must fit the
dashboard instead of pushing the window past the screen.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from gui.cli.demo import DemoCluster
from person import add_node_by_address, click, pair_by_card

pytestmark = pytest.mark.engine


@pytest.fixture
def three_agents():
    cluster = DemoCluster(3)
    cluster.start()
    yield cluster
    cluster.stop()


def _settle() -> None:
    """Run the layout passes the label change posted (that is when a window would grow)."""
    QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
    QApplication.processEvents()


def _ours(win, cluster):
    addrs = {a.address: a for a in cluster.agents}
    return {n.id: addrs[f"{n.host}:{n.api_port}"] for n in win.node_map.values()
            if f"{n.host}:{n.api_port}" in addrs}


def test_hovering_the_graphs_keeps_the_window_within_the_screen(qtbot, make_window, three_agents):
    win = make_window(browse=False)
    screen = win.screen().availableGeometry()
    # as wide as the screen: any growth would put part of the window off it
    win.resize(screen.width(), screen.height() - 40)
    qtbot.waitExposed(win)
    width = win.width()
    assert width <= screen.width(), f"the window needs {win.minimumSizeHint().width()} px"

    for a in three_agents.agents:
        add_node_by_address(qtbot, win, a.address)
    qtbot.waitUntil(lambda: len(_ours(win, three_agents)) == 3, timeout=20000)
    for nid, agent in _ours(win, three_agents).items():
        pair_by_card(qtbot, win, nid, agent.pin)
    qtbot.waitUntil(lambda: all(win.node_map[i].paired for i in _ours(win, three_agents)), timeout=15000)

    bar = win.tabs.tabBar()
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(2).center())
    assert win.tabs.currentIndex() == 2
    d = win.dashboard
    names = sorted(a.name for a in three_agents.agents)
    qtbot.waitUntil(lambda: all(("rtt", n) in d.series and ("net", n) in d.series for n in names), timeout=20000)
    qtbot.waitUntil(lambda: all(len(d.curve_data("rtt", n)[0]) >= 3 for n in names), timeout=20000)

    view = d.graphs.viewport()
    for key in ("tps", "rtt", "net"):
        p = d.plots[key]
        xs = d.curve_data("rtt", names[0])[0]
        scene = p.vb.mapViewToScene(QPointF(xs[len(xs) // 2], 0))
        scene.setY(p.vb.sceneBoundingRect().center().y())
        pos = d.graphs.mapFromScene(scene)
        QTest.mouseMove(view, QPoint(pos.x() - 3, pos.y()))
        QTest.mouseMove(view, pos)
        # the readout names every node's link
        qtbot.waitUntil(lambda: all(f"{n} RTT:" in d.hover_label.text() for n in names), timeout=3000)
        _settle()
        assert win.width() == width <= screen.width(), (key, win.width(), d.hover_label.minimumSizeHint())
        assert win.minimumSizeHint().width() <= screen.width()
    # and after the mouse has left the graphs
    click(qtbot, win.dashboard.pause_box)
    click(qtbot, win.dashboard.pause_box)
    assert win.width() == width
