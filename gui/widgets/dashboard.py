"""The dashboard: speed and links over time, on one shared time axis.

Four stacked pyqtgraph plots whose x axes are linked, so a stall in tokens/s lines up with the
RTT spike or throughput drop that caused it: decode tokens/s, prompt tokens/s (its own plot: a
prompt runs at hundreds of tokens/s and would flatten decode to a line at the bottom), per-node
link RTT (median of the agent's echo), per-node link throughput. Each finished reply marks its
time to first token on the decode plot (a dashed line at the moment the first token came; the
newest wait is in the legend, off the data). The history is kept across Starts in bounded rings
(:mod:`gui.cluster.nodes.history`); the user picks the last minutes, hours or days to see.
Samples (``gui.cluster.nodes.telemetry.Sample``) can arrive at any rate; they are stored at once and
the curves are redrawn at most four times a second. *Pause* freezes the view (samples keep
arriving and show again on resume). Hovering shows the values at that moment.

What is drawn says only what was measured: a node has a curve only while it has a card (the
window passes the known nodes to :meth:`Dashboard.set_node_names`), in the colour the split bar
and its card give it (:func:`gui.widgets.node_colors.node_colors`); a moment with no measurement
(an interval with no reply, a failed probe, a silence of more than ``GAP_S``) is a gap in the
line, and hovering there reads nothing. A node silent for longer than that is drawn grey, as lost.
Value axes start at 0 with a minimum span, and an empty plot says "no data yet" (#36). Each plot's title, above it, names it with its unit; the
legend is a line of text above the graphs, nodes by name.

The throughput a node's agent reports is all of its network traffic. While *Fastest* measures
the links (:meth:`Dashboard.set_probing`), that includes its bandwidth probes — on loopback about
1.7 GB/s while nothing was generating (#37) — so those samples are left out of the throughput
curves, and the span is shaded and labelled as a link probe.
"""

from __future__ import annotations

import html
import math
import time
from collections import deque

import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFrame, QHBoxLayout, QLabel, QScrollArea, QSizePolicy,
                               QVBoxLayout, QWidget)

from gui.cluster.nodes.history import RANGES, Series
from gui.widgets.acceptance_line import AcceptanceLine
from gui.widgets.node_colors import node_colors
from gui.widgets.outside_text import NAME_WORD, escaped
from gui.widgets.usage_table import UsageTableView

REDRAW_MS = 250
#: The samplers report every 1–2 s; a series silent for longer than this was idle or unreachable,
#: and the line breaks there instead of sloping across the silence.
GAP_S = 5.0
#: The curves that are not a node's: (plot, key) → colour. None of them shares a plot with a node.
#: Each its own, and none a node's (:data:`gui.widgets.split_bar.PALETTE`): decode and prompt once
#: shared one cyan in the legend (#36).
OWN_COLORS = {("tps", "decode"): "#17becf", ("tps", "live"): "#e15759", ("prompt", "prompt"): "#bcbd22"}
#: A lost node's curves and legend entry (#36): grey, so old figures do not pass for live ones.
LOST_COLOR = "#b0b0b0"
#: The smallest span of each value axis, from 0 (in the unit drawn): one or two points once
#: zoomed the axis to "33.8–34.4" (#36).
MIN_SPAN = {"tps": 10.0, "prompt": 10.0, "rtt": 1.0, "net": 1.0}
#: The smallest height of one plot's data area in pixels: the page scrolls rather than squeeze a
#: plot to one axis label while a banner shows (#36).
MIN_PLOT_HEIGHT = 60
#: The time axis' unit for each range: (seconds per unit, unit name).
TIME_UNITS = {"minutes": (1.0, "seconds"), "hours": (60.0, "minutes"), "days": (3600.0, "hours")}
#: Throughput units, decimal as a network's are, from the largest down.
RATE_UNITS = ((1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1.0, "B/s"))
PLOTS = ("tps", "prompt", "rtt", "net")
#: The dashed line where a reply's first token came, and its words in the legend.
TTFT_COLOR = "#c87800"


def rate_unit(peak_bytes_per_s: float) -> tuple[float, str]:
    """The divisor and unit that show ``peak_bytes_per_s`` with one to three digits before the
    point (a link idling at a few kB/s reads "kB/s", not "0.003 MB/s")."""
    for divisor, unit in RATE_UNITS:
        if peak_bytes_per_s >= divisor:
            return divisor, unit
    return RATE_UNITS[-1]


def _wrapping_label(text: str) -> QLabel:
    """A rich-text label that wraps inside the dashboard's width: one line per curve never fits,
    and an unwrapped label's minimum width once pushed the whole window past the screen (#17)."""
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setWordWrap(True)
    label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
    return label


def _vertical_scroll(widget: QWidget) -> QScrollArea:
    """``widget`` in a frameless area that scrolls up and down, never sideways."""
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    scroll.setWidget(widget)
    return scroll


class Dashboard(QWidget):
    """Live graphs of the cluster.

    Signals:
        pausedChanged(bool)

    Attributes:
        window_s: seconds of history shown: the span of the range chosen (:data:`RANGES`).
        plots: the four ``pg.PlotItem`` — ``tps`` (decode), ``prompt``, ``rtt``, ``net``.
        series: ``{(plot, label): Series}`` of every curve (kept across Starts, #36).
        legend: the legend above the graphs: each curve's colour and name, nodes by name.
        ttft_marks: ``[(wall-clock time of the first token, seconds waited)]`` per reply.
        usage: *Who uses the cluster* from ``usage`` samples, refreshed with the graphs (#34).
    """

    pausedChanged = Signal(bool)

    def __init__(self, window_s: float = 600.0, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.window_s = window_s
        self._t0 = time.time()
        self._range = "minutes"
        self._lost: set[str] = set()
        self.series: dict[tuple[str, str], Series] = {}
        self._curves: dict[tuple[str, str], pg.PlotDataItem] = {}
        self._node_names: dict[str, str] = {}
        self._colors: dict[str, str] = {}
        self._rate = RATE_UNITS[1]
        self._dirty = False
        self._paused = False
        self.ttft_marks: list[tuple[float, float]] = []
        self._ttft_lines: list[pg.InfiniteLine] = []
        #: (start, end) wall-clock spans of link probes, end None while one runs
        self.probe_spans: list[list[float | None]] = []
        self._probe_regions: list[pg.LinearRegionItem] = []

        self.pause_box = QCheckBox(self.tr("Pause"))
        self.range_box = QComboBox()
        for name, text in (("minutes", self.tr("Last 10 minutes")), ("hours", self.tr("Last 6 hours")),
                           ("days", self.tr("Last 3 days"))):
            self.range_box.addItem(text, name)
        self.hover_label = _wrapping_label(self.tr("Hover over the graphs to read values."))
        # Room for two lines from the start, so the graphs do not jump down at the first hover.
        self.hover_label.setMinimumHeight(2 * self.hover_label.fontMetrics().lineSpacing())
        self.hover_label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        # Off the graphs, so it never hides data; a Qt label wraps where a plot's legend would
        # be cut off.
        self.legend = _wrapping_label("")
        self.usage, self._usage_rows = UsageTableView(), None  # (the newest rows, not shown yet)
        self.graphs = pg.GraphicsLayoutWidget()
        self.graphs.setBackground(None)
        self.plots: dict[str, pg.PlotItem] = {}
        title_height = self._add_plots()
        self._set_titles()
        self.plots["net"].setLabel("bottom", self._time_unit_name())
        self._empty_notes = {key: self._empty_note(p) for key, p in self.plots.items()}
        self._cursor = [pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen((128, 128, 128), width=1))
                        for _ in self.plots]
        for line, p in zip(self._cursor, self.plots.values()):
            p.addItem(line, ignoreBounds=True)
        self._proxy = pg.SignalProxy(self.graphs.scene().sigMouseMoved, rateLimit=30, slot=self._on_mouse)

        top = QHBoxLayout()
        top.addWidget(self.hover_label, 1)
        top.addWidget(self.range_box)
        top.addWidget(self.pause_box)
        # The graphs keep a readable height and the page scrolls when the window has less room
        # (a banner above): squeezed, each plot shrank to one axis label (#36).
        # (each plot adds its title, its time axis' ticks and margins to its data area)
        line = self.fontMetrics().lineSpacing()
        self.graphs.setMinimumHeight(len(PLOTS) * (MIN_PLOT_HEIGHT + title_height + 3 * line + 4) + line)
        self.scroll = _vertical_scroll(self.graphs)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.legend)
        lay.addWidget(self.usage)
        lay.addWidget(self.scroll, 1)
        self.pause_box.toggled.connect(self.set_paused)
        self.range_box.currentIndexChanged.connect(lambda i: self.set_range(self.range_box.itemData(i)))
        self._timer = QTimer(self)
        self._timer.setInterval(REDRAW_MS)
        self._timer.timeout.connect(self._redraw)
        self._timer.start()

    def _add_plots(self) -> int:
        """The four plots, one above the other on one time axis; returns a title's height."""
        # A title above each plot rather than a label along its axis: turned on its side, a
        # label longer than a short plot is cut off or written over its neighbour's.
        title_height = self.fontMetrics().height() + 4
        # One width for every left axis, so the same second sits at the same x on all four plots
        # (an axis sizes itself to its widest tick, "300.4" wider than "60").
        axis_width = self.fontMetrics().horizontalAdvance("88888.8") + 12
        for row, key in enumerate(PLOTS):
            p = self.graphs.addPlot(row=row, col=0)
            p.showGrid(x=True, y=True, alpha=0.2)
            p.setMouseEnabled(x=True, y=False)
            # each title gives its unit; pyqtgraph's own "(x0.001)" on top of it misread (kB/s
            # as MB/s)
            p.getAxis("left").enableAutoSIPrefix(False)
            p.getAxis("bottom").enableAutoSIPrefix(False)
            p.getAxis("left").setWidth(axis_width)
            p.setTitle("", justify="left", size=f"{self.font().pointSizeF():g}pt")
            p.layout.setRowFixedHeight(0, title_height)
            p.titleLabel.setMaximumHeight(title_height)
            if row:
                p.setXLink(self.plots["tps"])
            self.plots[key] = p
        return title_height

    # ------------------------------------------------------------------ input

    def set_node_names(self, names: dict[str, str]) -> None:
        """The nodes that have a card, ``{node id: name}``: only they are drawn, under these
        names and in the colours every view gives them. A node that left loses its curves."""
        self._node_names = dict(names)
        self._colors = node_colors(self._node_names)
        for key, s in list(self.series.items()):
            if s.node_id is None:
                continue
            name = self._node_names.get(s.node_id)
            if name is None:
                self._drop(key)
            elif name != s.label:
                self._drop(key)
                s.label = name
                self.series[(key[0], name)] = s
        for key, curve in self._curves.items():
            curve.setPen(self._pen(key))
        self._update_legend()
        self._dirty = True

    def add_sample(self, sample) -> None:
        """Take one telemetry sample (any kind; unknown kinds are ignored). A sample that
        carries no value for a curve (an error, an interval without a reply) is a gap in it."""
        v = sample.values
        t = sample.time
        if sample.kind == "metrics":
            self._add("tps", "decode", self.tr("decode"), t, v.get("decode_tps"))
            self._add("prompt", "prompt", self.tr("prompt"), t, v.get("prompt_tps"))
        elif sample.kind == "server":
            self._add("tps", "live", self.tr("decode (live)"), t, v.get("live_decode_tps"))
        elif sample.kind == "reply":
            self._mark_ttft(sample)
            self._acceptance_line().add_reply(sample.values)
        elif sample.kind == "usage":
            self._usage_rows = list(v.get("rows") or [])
        elif sample.kind in ("link", "node") and sample.source in self._node_names:
            name = self._node_names[sample.source]
            if sample.kind == "link":
                self._add("rtt", sample.source, name, t, v.get("rtt_median_ms"))
            else:
                load = (v.get("status") or {}).get("load") or {}
                # the agent names them net_rx/tx_bytes_per_s; accept either spelling
                rx, tx = (next((x for x in (v.get(f"net_{d}_bps"), v.get(f"net_{d}_bytes_per_s"),
                                            load.get(f"net_{d}_bytes_per_s")) if x is not None), None)
                          for d in ("rx", "tx"))
                both = None if rx is None and tx is None else (rx or 0) + (tx or 0)
                # traffic of the link probes is not the cluster's: a gap, in the shaded span
                self._add("net", sample.source, name, t, None if self.probing_at(t) else both)

    def set_probing(self, probing: bool, tail_s: float = 0.0) -> None:
        """Link probes (*Fastest* measuring) start, or end; a node's throughput sampled within
        ``tail_s`` after the end still averages over probe traffic, so the span reaches that far."""
        now = time.time()
        running = bool(self.probe_spans) and self.probe_spans[-1][1] is None
        if probing and not running:
            self.probe_spans.append([now, None])
            region = pg.LinearRegionItem(values=(now - self._t0, now - self._t0), movable=False,
                                         brush=pg.mkBrush(150, 150, 150, 40), pen=pg.mkPen(None))
            pg.InfLineLabel(region.lines[0], text=self.tr("link probe"), position=0.9, anchors=[(0, 0), (0, 0)],
                            color=(120, 120, 120))
            self.plots["net"].addItem(region, ignoreBounds=True)
            self._probe_regions.append(region)
        elif not probing and running:
            self.probe_spans[-1][1] = now + tail_s
        self._dirty = True

    def set_range(self, name: str) -> None:
        """Show the last minutes, hours or days (a key of :data:`RANGES`)."""
        if name not in RANGES:
            raise ValueError(f"no time range {name!r}; choose one of {', '.join(RANGES)}")
        self._range = name
        self.window_s = RANGES[name]
        self.range_box.setCurrentIndex(self.range_box.findData(name))
        self.plots["net"].setLabel("bottom", self._time_unit_name())
        self._dirty = True
        self._redraw()

    def time_range(self) -> str:
        """The range shown: ``minutes``, ``hours`` or ``days``."""
        return self._range

    def probing_at(self, t: float) -> bool:
        """Whether wall-clock time ``t`` lies in a link probe's span."""
        return any(start <= t and (end is None or t <= end) for start, end in self.probe_spans)

    def set_paused(self, paused: bool) -> None:
        """Freeze or resume the view."""
        if paused != self._paused:
            self._paused = paused
            self.pause_box.setChecked(paused)
            if not paused:
                self._redraw()
            self.pausedChanged.emit(paused)

    def paused(self) -> bool:
        """Whether the view is frozen."""
        return self._paused

    def clear(self) -> None:
        """Forget every sample. (A new Start keeps them: the history is the cluster's, #36.)"""
        for key in list(self.series):
            self._drop(key)
        for line in self._ttft_lines:
            self.plots["tps"].removeItem(line)
        self._ttft_lines.clear()
        for region in self._probe_regions:
            self.plots["net"].removeItem(region)
        self._probe_regions.clear()
        self.probe_spans.clear()
        self.ttft_marks.clear()
        self._lost.clear()
        self._update_legend()
        self._t0 = time.time()
        self._range = "minutes"
        self._lost: set[str] = set()

    def values_at(self, t: float) -> dict[str, dict[str, float]]:
        """The value of every curve at wall-clock time ``t`` (what hovering shows), in the units
        drawn; a curve with no value current at ``t`` is left out."""
        out: dict[str, dict[str, float]] = {}
        for (plot, name), s in self.series.items():
            val = s.value_at(t)
            if val is not None:
                out.setdefault(plot, {})[name] = val / self._rate[0] if plot == "net" else val
        return out

    def curve_data(self, plot: str, name: str) -> tuple[list[float], list[float]]:
        """x (seconds since the dashboard started) and y of one curve as last drawn (NaN where
        the line breaks)."""
        c = self._curves.get((plot, name))
        if c is None:
            return [], []
        x, y = c.getData()
        return ([] if x is None else list(x)), ([] if y is None else list(y))

    def legend_names(self) -> list[str]:
        """The names in the legend, in its order."""
        return [s.label for _, s in self._legend_order()]

    def color_of(self, plot: str, name: str) -> str:
        """The colour a curve is drawn in (``#rrggbb``), or "" for no such curve."""
        c = self._curves.get((plot, name))
        return c.opts["pen"].color().name() if c is not None else ""

    def plot_title(self, plot: str) -> str:
        """The text of a plot's title, with its unit."""
        return self._titles[plot]

    # -------------------------------------------------------------- internals

    def _set_titles(self) -> None:
        self._titles = {"tps": self.tr("Decode tokens/s"), "prompt": self.tr("Prompt tokens/s"),
                        "rtt": self.tr("Link RTT (ms)"),
                        "net": self.tr("Link throughput (%1)").replace("%1", self._rate[1])}
        for key, p in self.plots.items():
            p.setTitle(html.escape(self._titles[key]))

    def _pen(self, key: tuple[str, str]) -> pg.QtGui.QPen:
        return pg.mkPen(self._color(key), width=2)

    def _color(self, key: tuple[str, str]) -> str:
        s = self.series[key]
        if s.node_id is not None:
            return LOST_COLOR if s.node_id in self._lost else self._colors.get(s.node_id, "#8c8c8c")
        return OWN_COLORS[(key[0], s.own)]

    def lost_nodes(self) -> set[str]:
        """The nodes drawn grey: measured before, silent or failing for more than ``GAP_S`` now."""
        return set(self._lost)

    def _time_unit_name(self) -> str:
        names = {"seconds": self.tr("seconds"), "minutes": self.tr("minutes"), "hours": self.tr("hours")}
        return names[TIME_UNITS[self._range][1]]

    def _empty_note(self, plot: pg.PlotItem) -> pg.TextItem:
        """"no data yet" in the top-left corner of an empty plot (it showed a made-up 0.2–0.8)."""
        note = pg.TextItem(self.tr("no data yet"), color=(128, 128, 128), anchor=(0, 0))
        note.setParentItem(plot.vb)  # in the view's pixels: it stays in the corner whatever the range
        note.setPos(6, 4)
        return note

    def _legend_order(self) -> list[tuple[tuple[str, str], Series]]:
        """The server's curves first, then each node once (its colour is the same on every plot),
        by name."""
        own = [(k, s) for k, s in self.series.items() if s.node_id is None]
        own.sort(key=lambda ks: list(OWN_COLORS).index((ks[0][0], ks[1].own)))
        nodes: dict[str, tuple[tuple[str, str], Series]] = {}
        for k, s in self.series.items():
            if s.node_id is not None:
                nodes.setdefault(s.node_id, (k, s))
        return own + sorted(nodes.values(), key=lambda ks: (ks[1].label.casefold(), ks[1].label, ks[1].node_id))

    def _update_legend(self) -> None:
        parts = []
        for k, s in self._legend_order():
            name = escaped(s.label, longest_word=NAME_WORD)
            if s.node_id in self._lost:
                name = f'<span style="color: {LOST_COLOR};">' + self.tr("%1 (lost)").replace("%1", name) + "</span>"
            parts.append(f'<span style="color: {self._color(k)};">■</span>&nbsp;{name}')
        if self.ttft_marks:
            # the newest reply's wait, here rather than on the plot where it covered the data (#36)
            wait = self.tr("first token after %1 s").replace("%1", f"{self.ttft_marks[-1][1]:.2f}")
            parts.append(f'<span style="color: {TTFT_COLOR};">┆</span>&nbsp;{html.escape(wait)}')
        self.legend.setText(" &nbsp; ".join(parts))

    def _drop(self, key: tuple[str, str]) -> None:
        self.series.pop(key, None)
        curve = self._curves.pop(key, None)
        if curve is not None:
            self.plots[key[0]].removeItem(curve)

    def _mark_ttft(self, sample) -> None:
        """A finished reply: mark when its first token came (a dashed line; the wait is in the
        legend) — the client's own wait when known, else llama-server's prompt time."""
        v = sample.values
        wait_ms = v.get("ttft_ms", v.get("prompt_ms"))
        if wait_ms is None:
            return
        first = sample.time - float(v.get("predicted_ms") or 0.0) / 1000.0
        self.ttft_marks.append((first, float(wait_ms) / 1000.0))
        line = pg.InfiniteLine(pos=self._x(first), angle=90, movable=False,
                               pen=pg.mkPen(TTFT_COLOR, width=1, style=Qt.PenStyle.DashLine))
        self.plots["tps"].addItem(line, ignoreBounds=True)
        self._ttft_lines.append(line)
        # as bounded as the curves: the marks of the last few days
        while self.ttft_marks and self.ttft_marks[0][0] < sample.time - RANGES["days"]:
            self.ttft_marks.pop(0)
            self.plots["tps"].removeItem(self._ttft_lines.pop(0))
        self._update_legend()

    acceptance_line: AcceptanceLine | None = None  # drafts accepted (#35), from the first reply on

    def _acceptance_line(self) -> AcceptanceLine:
        if self.acceptance_line is None:
            self.acceptance_line = AcceptanceLine()
            self.layout().insertWidget(1, self.acceptance_line)
        return self.acceptance_line

    def _add(self, plot: str, source: str, label: str, t: float, value) -> None:
        """One value of a curve (``source``: the node id, or the server curve's own key); None
        is a gap, and starts no curve."""
        node = plot in ("rtt", "net")
        key = (plot, label)
        s = self.series.get(key)
        if value is None:
            if s is not None:
                s.gap(t)
                self._dirty = True
            return
        if s is None:
            s = self.series[key] = Series(label, source if node else None, None if node else source, gap_s=GAP_S)
            self._update_legend()
        s.add(t, float(value))
        self._dirty = True

    def _x(self, t: float) -> float:
        """Wall-clock time → the time axis (seconds, minutes or hours since the dashboard began)."""
        return (t - self._t0) / TIME_UNITS[self._range][0]

    def _redraw(self) -> None:
        if not self._paused and self._usage_rows is not None:
            self.usage.show_rows(self._usage_rows)
            self._usage_rows = None
        if self._paused or not self._dirty:
            return
        self._dirty = False
        rate = rate_unit(max((s.peak() for (p, _), s in self.series.items() if p == "net"), default=0.0))
        if rate != self._rate:
            self._rate = rate
            self._set_titles()
        latest = max((s.t[-1] for s in self.series.values() if s.t), default=None)
        self._update_lost(latest)
        peaks = dict.fromkeys(PLOTS, 0.0)
        for key, s in self.series.items():
            curve = self._curves.get(key)
            if curve is None:
                # connect="finite": a NaN (no measurement) breaks the line instead of bridging it
                curve = self.plots[key[0]].plot(connect="finite", symbol="o", symbolSize=4, symbolPen=None)
                self._curves[key] = curve
            curve.setPen(self._pen(key))
            curve.setSymbolBrush(self._color(key))
            ts, vs = s.points(self.window_s, latest if latest is not None else time.time())
            ys = [v / rate[0] for v in vs] if key[0] == "net" else vs
            peaks[key[0]] = max([peaks[key[0]]] + [y for y in ys if not math.isnan(y)])
            curve.setData([self._x(t) for t in ts], ys, connect="finite")
        for key, p in self.plots.items():
            # from 0, and at least MIN_SPAN high, so a few points do not blow up noise (#36)
            p.setYRange(0.0, max(peaks[key] * 1.1, MIN_SPAN[key]), padding=0)
            self._empty_notes[key].setVisible(not any(k[0] == key for k in self._curves))
        now = time.time()
        for region, (start, end) in zip(self._probe_regions, self.probe_spans):
            region.setRegion((self._x(start), self._x(now if end is None else min(end, now))))
        for line, (first, _) in zip(self._ttft_lines, self.ttft_marks):
            line.setPos(self._x(first))
        if latest is not None:
            right = self._x(latest)
            self.plots["tps"].setXRange(max(0.0, right - self._x(self._t0 + self.window_s)),
                                        right + self._x(self._t0 + 1), padding=0)

    def _update_lost(self, latest: float | None) -> None:
        """Grey the nodes whose curves have had no value for ``GAP_S`` while others have (#36)."""
        lost = set()
        if latest is not None:
            by_node: dict[str, bool] = {}
            for s in self.series.values():
                if s.node_id is not None:
                    by_node[s.node_id] = by_node.get(s.node_id, False) or s.current_at(latest)
            lost = {n for n, current in by_node.items() if not current}
        if lost != self._lost:
            self._lost = lost
            self._update_legend()

    def _on_mouse(self, event) -> None:
        pos = event[0]
        for p in self.plots.values():
            if p.sceneBoundingRect().contains(pos):
                x = p.vb.mapSceneToView(pos).x()
                for line in self._cursor:
                    line.setPos(x)
                self.hover_label.setText(self._describe(self._t0 + x * TIME_UNITS[self._range][0], x))
                return

    def _describe(self, t: float, x: float) -> str:
        vals = self.values_at(t)
        # each value says what it is: a node has an RTT and a throughput, once told apart only
        # by the unit (#36)
        what = {"tps": "", "prompt": "", "rtt": self.tr("RTT"), "net": self.tr("throughput")}
        units = {"tps": self.tr("tok/s"), "prompt": self.tr("tok/s"), "rtt": self.tr("ms"), "net": self._rate[1]}
        unit_name = {"seconds": "s", "minutes": "min", "hours": "h"}[TIME_UNITS[self._range][1]]
        parts = [f"<b>{x:.1f} {unit_name}</b>"]
        for plot in PLOTS:
            for name, v in sorted(vals.get(plot, {}).items(), key=lambda nv: nv[0].casefold()):
                label = escaped(name, longest_word=NAME_WORD) + (f" {what[plot]}" if what[plot] else "")
                parts.append(f"{label}: {v:.2f} {units[plot]}")
        return " · ".join(parts)
