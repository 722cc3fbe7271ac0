"""The dashboard plots telemetry samples on one time axis, pauses, and reads values on hover."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QPointF

from gui.cluster.nodes.telemetry import Sample
from gui.widgets.dashboard import Dashboard


def _feed(d, t0, n=10):
    for i in range(n):
        t = t0 + i
        d.add_sample(Sample(t, "metrics", "http://x", {"decode_tps": 100.0 + i, "prompt_tps": None}))
        d.add_sample(Sample(t, "link", "node-a", {"rtt_median_ms": 0.5 + i / 10, "probes": 5, "lost": 0}))
        d.add_sample(Sample(t, "node", "node-a", {"net_rx_bps": 2e6, "net_tx_bps": 1e6}))
        d.add_sample(Sample(t, "link", "node-b", {"error": "no echo answered"}))


def test_samples_become_curves_on_shared_axis(qtbot):
    d = Dashboard(window_s=300)
    qtbot.addWidget(d)
    d.set_node_names({"node-a": "alpha"})
    t0 = time.time()
    _feed(d, t0)
    qtbot.waitUntil(lambda: d.curve_data("tps", "decode")[1][-1:] == [109.0], timeout=3000)
    x, y = d.curve_data("rtt", "alpha")
    assert len(x) == 10 and abs(y[3] - 0.8) < 1e-9
    assert d.curve_data("net", "alpha")[1][0] == 3.0
    # a sample that only carries an error draws nothing
    assert ("rtt", "node-b") not in d.series
    # one x axis for all three: panning one pans the others
    d.plots["tps"].setXRange(5, 7, padding=0)
    # (a linked range passes through pixel coordinates, so it may differ in the last bit)
    assert d.plots["rtt"].viewRange()[0] == pytest.approx(d.plots["tps"].viewRange()[0], abs=1e-6)
    assert d.plots["net"].viewRange()[0] == pytest.approx(d.plots["tps"].viewRange()[0], abs=1e-6)


def test_pause_freezes_view_and_resume_catches_up(qtbot):
    d = Dashboard()
    qtbot.addWidget(d)
    t0 = time.time()
    _feed(d, t0, 3)
    qtbot.waitUntil(lambda: len(d.curve_data("tps", "decode")[0]) == 3, timeout=3000)
    d.pause_box.click()
    assert d.paused()
    _feed(d, t0 + 3, 3)
    qtbot.wait(600)
    assert len(d.curve_data("tps", "decode")[0]) == 3
    d.pause_box.click()
    qtbot.waitUntil(lambda: len(d.curve_data("tps", "decode")[0]) == 6, timeout=3000)


def test_old_samples_leave_the_window(qtbot):
    d = Dashboard(window_s=5)
    qtbot.addWidget(d)
    t0 = time.time()
    _feed(d, t0, 10)
    assert list(d.series[("tps", "decode")].t) == [t0 + i for i in range(4, 10)]


def test_hover_shows_values_at_that_time(qtbot):
    d = Dashboard()
    qtbot.addWidget(d)
    d.resize(800, 600)
    d.show()
    qtbot.waitExposed(d)
    d.set_node_names({"node-a": "alpha"})
    t0 = d._t0
    _feed(d, t0)
    qtbot.waitUntil(lambda: len(d.curve_data("tps", "decode")[0]) == 10, timeout=3000)
    p = d.plots["rtt"]
    scene_pos = p.vb.mapViewToScene(QPointF(4.2, 0.9))
    d._on_mouse((scene_pos,))
    text = d.hover_label.text()
    assert "decode: 104.00" in text and "alpha: 0.90" in text and "alpha: 3.00" in text
