"""The dashboard plots telemetry samples on one time axis, pauses, and reads values on hover."""

from __future__ import annotations

import time

import pyqtgraph as pg
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


def test_old_samples_leave_the_view_but_stay_in_the_history(qtbot):
    d = Dashboard(window_s=5)
    qtbot.addWidget(d)
    t0 = time.time()
    _feed(d, t0, 10)
    qtbot.waitUntil(lambda: d.curve_data("tps", "decode")[1][-1:] == [109.0], timeout=3000)
    assert d.curve_data("tps", "decode")[0] == [pytest.approx(i + t0 - d._t0) for i in range(4, 10)]
    # (the history is bounded by its rings, not by the view: tests/cluster/nodes/test_history.py)
    assert len(d.series[("tps", "decode")].t) == 10


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
    assert "decode: 104.00" in text and "alpha RTT: 0.90" in text and "alpha throughput: 3.00" in text


# --- a dashboard for a cluster that lives for days (#36) ---------------------------------------

def _shown(qtbot, d, width=800, height=700):
    d.resize(width, height)
    d.show()
    qtbot.waitExposed(d)


def test_every_curve_has_its_own_colour(qtbot):
    d = Dashboard()
    qtbot.addWidget(d)
    d.set_node_names({"node-a": "alpha", "node-b": "beta"})
    t0 = d._t0
    for i in range(3):
        d.add_sample(Sample(t0 + i, "metrics", "http://x", {"decode_tps": 50.0, "prompt_tps": 300.0}))
        d.add_sample(Sample(t0 + i, "server", "http://x", {"live_decode_tps": 49.0}))
        for node in ("node-a", "node-b"):
            d.add_sample(Sample(t0 + i, "link", node, {"rtt_median_ms": 0.5}))
    qtbot.waitUntil(lambda: len(d.curve_data("rtt", "beta")[0]) == 3, timeout=3000)
    colours = {name: d.color_of(plot, name) for plot, name in
               (("tps", "decode"), ("tps", "decode (live)"), ("prompt", "prompt"), ("rtt", "alpha"), ("rtt", "beta"))}
    assert len(set(colours.values())) == len(colours), colours
    # the legend shows each in its colour
    for c in colours.values():
        assert c in d.legend.text()


@pytest.mark.parametrize("values", [[34.1], [33.8, 34.4]])
def test_value_axis_starts_at_zero_with_a_minimum_span(qtbot, values):
    from gui.widgets.dashboard import MIN_SPAN
    d = Dashboard()
    qtbot.addWidget(d)
    _shown(qtbot, d)
    d.set_node_names({"node-a": "alpha"})
    for i, v in enumerate(values):
        d.add_sample(Sample(d._t0 + i, "metrics", "http://x", {"decode_tps": v}))
        d.add_sample(Sample(d._t0 + i, "link", "node-a", {"rtt_median_ms": v / 100}))
    qtbot.waitUntil(lambda: len(d.curve_data("tps", "decode")[0]) == len(values), timeout=3000)
    for plot in ("tps", "rtt"):
        low, high = d.plots[plot].viewRange()[1]
        assert low == 0.0 and high >= max(max(values) / (100 if plot == "rtt" else 1), MIN_SPAN[plot])
    assert d.plots["tps"].viewRange()[1][1] - d.plots["tps"].viewRange()[1][0] > 34


def test_an_empty_graph_says_no_data_yet(qtbot):
    d = Dashboard()
    qtbot.addWidget(d)
    _shown(qtbot, d)
    assert all(n.isVisible() and n.textItem.toPlainText() == "no data yet" for n in d._empty_notes.values())
    d.add_sample(Sample(d._t0, "metrics", "http://x", {"decode_tps": 40.0}))
    qtbot.waitUntil(lambda: not d._empty_notes["tps"].isVisible(), timeout=3000)
    assert d._empty_notes["rtt"].isVisible() and d._empty_notes["net"].isVisible()


def test_first_token_words_are_off_the_data(qtbot):
    d = Dashboard()
    qtbot.addWidget(d)
    _shown(qtbot, d)
    t0 = d._t0
    for i in range(10):
        d.add_sample(Sample(t0 + i, "metrics", "http://x", {"decode_tps": 50.0 + i}))
    d.add_sample(Sample(t0 + 9, "reply", "http://x", {"ttft_ms": 2230.0, "predicted_ms": 4000.0}))
    qtbot.waitUntil(lambda: len(d.curve_data("tps", "decode")[0]) == 10, timeout=3000)
    assert "first token after 2.23 s" in d.legend.text()
    # nothing written inside the plot, where it once covered the curve
    data_box = d._curves[("tps", "decode")].mapRectToScene(d._curves[("tps", "decode")].boundingRect())
    lines = [item for item in d.plots["tps"].items if isinstance(item, pg.InfiniteLine)]
    assert d._ttft_lines[-1] in lines
    for line in lines:
        label = getattr(line, "label", None)
        assert label is None or not label.isVisible() or not (
            label.mapRectToScene(label.boundingRect()).intersects(data_box))
    assert d.legend.geometry().bottom() < d.scroll.geometry().top()


def test_a_silent_node_is_greyed_not_frozen(qtbot):
    from gui.widgets.dashboard import GAP_S, LOST_COLOR
    d = Dashboard()
    qtbot.addWidget(d)
    d.set_node_names({"node-a": "alpha", "node-b": "beta"})
    t0 = d._t0
    for i in range(20):
        d.add_sample(Sample(t0 + i, "link", "node-a", {"rtt_median_ms": 0.5}))
        if i < 5:  # beta answers, then falls silent (asleep, unplugged)
            d.add_sample(Sample(t0 + i, "link", "node-b", {"rtt_median_ms": 0.7}))
    qtbot.waitUntil(lambda: d.color_of("rtt", "beta") == LOST_COLOR, timeout=3000)
    assert d.lost_nodes() == {"node-b"} and d.color_of("rtt", "alpha") != LOST_COLOR
    assert "beta (lost)" in d.legend.text()
    assert 20 - 5 > GAP_S
    # it answers again: its colour comes back
    d.add_sample(Sample(t0 + 20, "link", "node-b", {"rtt_median_ms": 0.7}))
    qtbot.waitUntil(lambda: d.color_of("rtt", "beta") not in ("", LOST_COLOR), timeout=3000)
    assert "(lost)" not in d.legend.text()


def test_time_range_minutes_hours_days(qtbot):
    d = Dashboard()
    qtbot.addWidget(d)
    t0 = d._t0
    for i in range(0, 4 * 3600, 4):  # four hours, a sample every 4 s (more than the raw ring holds)
        d.add_sample(Sample(t0 + i, "metrics", "http://x", {"decode_tps": 30.0}))
    qtbot.waitUntil(lambda: len(d.curve_data("tps", "decode")[0]) > 0, timeout=3000)
    assert len(d.curve_data("tps", "decode")[0]) == 151  # ten minutes of every sample
    d.range_box.setCurrentIndex(d.range_box.findData("hours"))
    assert d.time_range() == "hours" and d.window_s == 6 * 3600
    x, _ = d.curve_data("tps", "decode")
    assert x[0] < 1.0 and x[-1] > 239  # in minutes: all four hours
    assert d.plots["net"].getAxis("bottom").labelText == "minutes"
    with pytest.raises(ValueError, match="no time range 'weeks'"):
        d.set_range("weeks")
