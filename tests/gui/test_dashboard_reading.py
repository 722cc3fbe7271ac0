"""The dashboard can be read at a glance: one colour and one place per node in every view, lines
only where something was measured, units that say what they mean, and titles and legend that
neither cover the data nor each other.

The first test is what a person did with two real agents on loopback: add and pair them, open
a model, watch the graphs, reopen the app. The others feed samples through the window's own
path (``MainWindow.on_sample``, as the session's telemetry signal does) or the dashboard's.
"""

from __future__ import annotations

import math
import time

import pytest
from PySide6.QtCore import QEvent, QPointF, QRectF
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication

from agent import i18n
from gui.cluster.nodes.telemetry import Sample
from gui.translations import install_translator
from gui.widgets.dashboard import GAP_S, Dashboard
from person import add_node_by_address, pair_by_card

SIZES = [(1366, 768), (1600, 1000)]


def _ours(win, agents) -> dict[str, str]:
    """{node id: name} of our two agents (other agents may announce on loopback too)."""
    addrs = {a.address for a in agents.agents}
    return {n.id: n.name for n in win.node_map.values() if f"{n.host}:{n.api_port}" in addrs}


def _views(win, ids: dict[str, str]) -> dict[str, dict[str, str]]:
    """What each view draws: {node name: {view: colour}}, and checks the bar has the node."""
    seen = {}
    bar = {s.label.split()[0]: s.color for s in win.editor.bar.segments()[1:]}
    for nid, name in ids.items():
        seen[name] = {"card": win.nodes.cards[nid].color, "bar": bar.get(name),
                      "rtt": win.dashboard.color_of("rtt", name), "net": win.dashboard.color_of("net", name)}
    return seen


def _worker_order(win, ids) -> list[str]:
    return [c.name for c in win.nodes.ordered_cards() if c.node_id in ids]


def test_one_colour_and_order_per_node_everywhere_and_after_reopening(qtbot, make_window, agents, demo_model):
    def open_cluster(pair: bool):
        win = make_window(browse=False)
        if pair:
            # added last name first, so cards in the order they came would be the wrong way round
            for a in sorted(agents.agents, key=lambda a: a.name, reverse=True):
                add_node_by_address(qtbot, win, a.address)
                qtbot.waitUntil(lambda a=a: any(f"{n.host}:{n.api_port}" == a.address
                                                for n in win.node_map.values()), timeout=20000)
        # (reopened, the window adds the addresses it remembered, its pairings still pinned)
        qtbot.waitUntil(lambda: len(_ours(win, agents)) == 2, timeout=20000)
        ids = _ours(win, agents)
        if pair:
            by_addr = {a.address: a for a in agents.agents}
            for nid in ids:
                n = win.node_map[nid]
                pair_by_card(qtbot, win, nid, by_addr[f"{n.host}:{n.api_port}"].pin)
        qtbot.waitUntil(lambda: all(win.node_map[i].paired for i in ids), timeout=15000)
        if win.model is None:
            assert win.open_model(str(demo_model))
        qtbot.waitUntil(lambda: len(win.editor.plan().devices()) == 2, timeout=15000)
        # real telemetry: each node's link RTT and throughput on the dashboard
        qtbot.waitUntil(lambda: all(win.dashboard.color_of(p, n) for p in ("rtt", "net") for n in ids.values()),
                        timeout=20000)
        return win, ids

    win, ids = open_cluster(pair=True)
    views = _views(win, ids)
    for name, colours in views.items():
        assert len(set(colours.values())) == 1, (name, colours)  # the same colour in every view
    assert len({c["card"] for c in views.values()}) == 2  # and two nodes, two colours
    names = sorted(ids.values())
    assert _worker_order(win, ids) == names
    assert [n for n in win.dashboard.legend_names() if n in names] == names

    # a sample from a node without a card draws nothing (the "mdns-node-f7ddadf2" ghost)
    win.on_sample(Sample(time.time(), "link", "mdns-node-f7ddadf2", {"rtt_median_ms": 0.4, "probes": 5, "lost": 0}))
    win.on_sample(Sample(time.time(), "node", "mdns-node-f7ddadf2", {"net_rx_bytes_per_s": 1e5}))
    qtbot.wait(2 * 250)  # two redraw ticks: a ghost would be drawn by now
    assert all(s.node_id in ids for s in win.dashboard.series.values() if s.node_id is not None)
    assert "mdns-node-f7ddadf2" not in win.dashboard.legend.text()

    closed_views = views
    win.close()
    win2, ids2 = open_cluster(pair=False)
    assert ids2 == ids
    assert _worker_order(win2, ids2) == names
    assert _views(win2, ids2) == closed_views

    # a node that discovery drops loses its card, its curves and its legend entry at once
    # (the session's "removed" event, as mDNS sends it when an agent says goodbye)
    gone_id = next(nid for nid, n in ids2.items() if n == names[1])
    win2.node_actions.on_node_event("removed", win2.node_map[gone_id])
    assert gone_id not in win2.nodes.cards
    assert not any(s.node_id == gone_id for s in win2.dashboard.series.values())
    assert names[1] not in win2.dashboard.legend_names()
    assert not win2.dashboard.color_of("rtt", names[1])


def _hover(d, plot: str, x: float) -> str:
    """The readout with the mouse over ``plot`` at ``x`` seconds (half-way up the plot)."""
    vb = d.plots[plot].vb
    y = sum(vb.viewRange()[1]) / 2
    d._on_mouse((vb.mapViewToScene(QPointF(x, y)),))
    return d.hover_label.text()


def _reply(d, t, tps):
    d.add_sample(Sample(t, "metrics", "http://127.0.0.1:8080", {"decode_tps": tps, "prompt_tps": 300.0}))


def _idle(d, t):
    d.add_sample(Sample(t, "metrics", "http://127.0.0.1:8080", {"decode_tps": None, "prompt_tps": None}))


def test_idle_time_is_a_gap_and_reads_nothing(qtbot):
    d = Dashboard()
    qtbot.addWidget(d)
    d.set_node_names({"node-a": "alpha"})
    t0 = d._t0
    # a reply, then 60 s in which llama-server's counters do not move, then another reply
    _reply(d, t0 + 1, 57.0)
    for i in range(2, 62):
        _idle(d, t0 + i)
    _reply(d, t0 + 62, 40.0)
    # the link answers, then nothing for 30 s (the agent was unreachable), then again
    for i in (1, 2, 3, 33, 34):
        d.add_sample(Sample(t0 + i, "link", "node-a", {"rtt_median_ms": 0.5, "probes": 5, "lost": 0}))
    qtbot.waitUntil(lambda: d.curve_data("tps", "decode")[1][-1:] == [40.0], timeout=3000)

    x, y = d.curve_data("tps", "decode")
    finite = [(xi, yi) for xi, yi in zip(x, y) if not math.isnan(yi)]
    assert finite == [(1.0, 57.0), (62.0, 40.0)]
    # between them a break, so the line cannot slope from 57 down to 40 across the idle minute
    between = [yi for xi, yi in zip(x, y) if 1 < xi < 62]
    assert between and all(math.isnan(v) for v in between)
    assert d.plots["tps"].listDataItems()[0].opts["connect"] == "finite"
    x, y = d.curve_data("rtt", "alpha")
    assert any(math.isnan(yi) and 3 < xi < 33 for xi, yi in zip(x, y))

    # hovering in the idle minute reads no decode rate and no RTT; at a reply it reads it
    d.resize(800, 600)
    d.show()
    qtbot.waitExposed(d)
    for x_idle in (30.0, 20.0):
        text = _hover(d, "tps", x_idle)
        assert text.startswith(f"<b>{x_idle:.1f} s</b>") and "decode" not in text and "alpha" not in text, text
    assert "decode: 57.00 tok/s" in _hover(d, "tps", 1.5)
    # a value is current for GAP_S at most, even without a gap marked after it
    assert d.values_at(t0 + 34 + GAP_S / 2)["rtt"] == {"alpha": 0.5}
    assert "rtt" not in d.values_at(t0 + 34 + GAP_S * 2)


@pytest.mark.parametrize("bytes_per_s, unit, drawn", [(3_000.0, "kB/s", 3.0), (2_500_000.0, "MB/s", 2.5),
                                                       (400.0, "B/s", 400.0)])
def test_throughput_axis_says_the_unit_it_draws_in(qtbot, bytes_per_s, unit, drawn):
    d = Dashboard()
    qtbot.addWidget(d)
    d.resize(700, 600)
    d.show()
    qtbot.waitExposed(d)
    d.set_node_names({"node-a": "alpha"})
    for i in range(5):
        d.add_sample(Sample(d._t0 + i, "node", "node-a", {"net_rx_bytes_per_s": bytes_per_s * 2 / 3,
                                                          "net_tx_bytes_per_s": bytes_per_s / 3}))
    qtbot.waitUntil(lambda: len(d.curve_data("net", "alpha")[1]) == 5, timeout=3000)
    assert d.curve_data("net", "alpha")[1][-1] == pytest.approx(drawn)
    assert d.plot_title("net") == f"Link throughput ({unit})"
    assert unit in d.plots["net"].titleLabel.text
    # no scale of pyqtgraph's own on top of the unit ("(MB/s) (x0.001)" meant kB/s)
    for p in d.plots.values():
        axis = p.getAxis("left")
        assert axis.autoSIPrefixScale == 1.0 and "(x" not in axis.labelString()
    assert f"alpha throughput: {drawn:.2f} {unit}" in _hover(d, "net", 2.2)


@pytest.fixture(params=["en", "zh_CN"])
def lang(request, qapp: QApplication, tmp_path, monkeypatch):
    """The app's language, with the font a Chinese desktop uses (real text widths)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    font = qapp.font()
    installed = []
    if request.param != "en":
        installed = install_translator(qapp, request.param)
        assert installed
        qapp.setFont(QFont("WenQuanYi Micro Hei", font.pointSize()))
    yield request.param
    for t in installed:
        qapp.removeTranslator(t)
    i18n.set_translator(None)
    qapp.setFont(font)


def _scene_text_rect(label) -> QRectF:
    """Where a pyqtgraph label's text is painted, in scene coordinates."""
    return label.item.mapRectToScene(label.item.boundingRect())


def test_titles_and_legend_stay_clear_of_the_data_and_each_other(qtbot, lang, make_window):
    win = make_window(browse=False)
    win.tabs.setCurrentIndex(2)
    d = win.dashboard
    t0 = d._t0
    for i in range(30):
        win.on_sample(Sample(t0 + i, "metrics", "http://127.0.0.1:8080",
                             {"decode_tps": 55.0 + i % 4, "prompt_tps": 320.0 + i}))
        win.on_sample(Sample(t0 + i, "server", "http://127.0.0.1:8080", {"state": "ready", "live_decode_tps": 54.0}))
    win.on_sample(Sample(t0 + 29, "reply", "http://127.0.0.1:8080", {"ttft_ms": 830.0, "predicted_ms": 4000.0}))
    # (the curves' names are in the window's language)
    qtbot.waitUntil(lambda: len(d.series) == 3 and all(len(d.curve_data(*k)[0]) == 30 for k in d.series),
                    timeout=3000)
    problems = []
    for width, height in SIZES:
        win.resize(width, height)
        for _ in range(5):
            QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        QApplication.processEvents()
        view = QRectF(d.graphs.viewport().rect())
        # the legend is a line of its own, above the graphs, not over a curve
        assert d.legend.isVisible() and d.legend.geometry().bottom() < d.scroll.geometry().top()
        assert all(p.legend is None for p in d.plots.values())
        boxes = []
        for key, p in d.plots.items():
            title = _scene_text_rect(p.titleLabel)
            # the whole title shows: inside the graphs and its own row, above its plot's data
            if not view.contains(title) or title.width() > p.titleLabel.width() + 1:
                problems.append((lang, width, height, key, "title cut off", title, p.titleLabel.width()))
            if title.bottom() > p.vb.sceneBoundingRect().top() + 1:
                problems.append((lang, width, height, key, "title over the data"))
            boxes.append((key, title))
            for axis in (p.getAxis("left"), p.getAxis("bottom")):
                if axis.isVisible() and axis.label.isVisible():
                    boxes.append((key + " axis", axis.label.mapRectToScene(axis.label.boundingRect())))
        for i, (a, ra) in enumerate(boxes):
            for b, rb in boxes[i + 1:]:
                if ra.intersects(rb):
                    problems.append((lang, width, height, a, "over", b))
        # the time-to-first-token words are in the legend, not on the data (#36)
        if getattr(d._ttft_lines[-1], "label", None) is not None or "0.83" not in d.legend.text():
            problems.append((lang, width, height, "first-token words not in the legend"))
    assert not problems, problems
