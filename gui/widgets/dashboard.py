"""The dashboard: speed and links over time, on one shared time axis.

Four stacked pyqtgraph plots whose x axes are linked, so a stall in tokens/s lines up with the
RTT spike or throughput drop that caused it: decode tokens/s, prompt tokens/s (its own plot: a
prompt runs at hundreds of tokens/s and would flatten decode to a line at the bottom), per-node
link RTT (median of the agent's echo), per-node link throughput. Each finished reply marks its
time to first token on the decode plot (a vertical line at the moment the first token came,
labelled with the wait). The last ``window_s`` seconds are kept.
Samples (``gui.cluster.nodes.telemetry.Sample``) can arrive at any rate; they are stored at once and
the curves are redrawn at most four times a second. *Pause* freezes the view (samples keep
arriving and show again on resume). Hovering shows the values at that moment.
"""

from __future__ import annotations

import html
import time
from collections import deque

import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from gui.widgets.split_bar import PALETTE

REDRAW_MS = 250


class _Series:
    """Timestamped values of one curve, trimmed to the window."""

    def __init__(self) -> None:
        self.t: deque[float] = deque()
        self.v: deque[float] = deque()

    def add(self, t: float, v: float, keep_after: float) -> None:
        self.t.append(t)
        self.v.append(v)
        while self.t and self.t[0] < keep_after:
            self.t.popleft()
            self.v.popleft()

    def value_at(self, t: float) -> float | None:
        """The latest value at or before ``t``."""
        best = None
        for ti, vi in zip(self.t, self.v):
            if ti > t:
                break
            best = vi
        return best


class Dashboard(QWidget):
    """Live graphs of the cluster.

    Signals:
        pausedChanged(bool)

    Attributes:
        window_s: seconds of history shown (5–10 minutes is what a user scrolls back through).
        plots: the four ``pg.PlotItem`` — ``tps`` (decode), ``prompt``, ``rtt``, ``net``.
        series: ``{(plot, name): _Series}`` of every curve.
        ttft_marks: ``[(wall-clock time of the first token, seconds waited)]`` per reply.
    """

    pausedChanged = Signal(bool)

    def __init__(self, window_s: float = 600.0, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.window_s = window_s
        self._t0 = time.time()
        self.series: dict[tuple[str, str], _Series] = {}
        self._curves: dict[tuple[str, str], pg.PlotDataItem] = {}
        self._node_names: dict[str, str] = {}
        self._dirty = False
        self._paused = False
        self.ttft_marks: list[tuple[float, float]] = []
        self._ttft_lines: list[pg.InfiniteLine] = []

        self.pause_box = QCheckBox(self.tr("Pause"))
        self.hover_label = QLabel(self.tr("Hover over the graphs to read values."))
        self.hover_label.setTextFormat(Qt.TextFormat.RichText)
        # The readout wraps inside the dashboard's width: one line per curve never fits, and an
        # unwrapped label's minimum width once pushed the whole window past the screen (#17).
        self.hover_label.setWordWrap(True)
        self.hover_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
        # Room for two lines from the start, so the graphs do not jump down at the first hover.
        self.hover_label.setMinimumHeight(2 * self.hover_label.fontMetrics().lineSpacing())
        self.hover_label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.graphs = pg.GraphicsLayoutWidget()
        self.graphs.setBackground(None)
        self.plots: dict[str, pg.PlotItem] = {}
        titles = {"tps": self.tr("Decode tokens/s"), "prompt": self.tr("Prompt tokens/s"),
                  "rtt": self.tr("Link RTT (ms)"), "net": self.tr("Link throughput (MB/s)")}
        for row, key in enumerate(("tps", "prompt", "rtt", "net")):
            p = self.graphs.addPlot(row=row, col=0)
            p.setLabel("left", titles[key])
            p.showGrid(x=True, y=True, alpha=0.2)
            p.addLegend(offset=(-10, 5))
            p.setMouseEnabled(x=True, y=False)
            if row:
                p.setXLink(self.plots["tps"])
            self.plots[key] = p
        self.plots["net"].setLabel("bottom", self.tr("seconds"))
        self._cursor = [pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen((128, 128, 128), width=1))
                        for _ in self.plots]
        for line, p in zip(self._cursor, self.plots.values()):
            p.addItem(line, ignoreBounds=True)
        self._proxy = pg.SignalProxy(self.graphs.scene().sigMouseMoved, rateLimit=30, slot=self._on_mouse)

        top = QHBoxLayout()
        top.addWidget(self.hover_label, 1)
        top.addWidget(self.pause_box)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.graphs, 1)
        self.pause_box.toggled.connect(self.set_paused)
        self._timer = QTimer(self)
        self._timer.setInterval(REDRAW_MS)
        self._timer.timeout.connect(self._redraw)
        self._timer.start()

    # ------------------------------------------------------------------ input

    def set_node_names(self, names: dict[str, str]) -> None:
        """Show node ids under these names."""
        self._node_names.update(names)

    def add_sample(self, sample) -> None:
        """Take one telemetry sample (any kind; unknown kinds are ignored)."""
        v = sample.values
        if "error" in v and len(v) == 1:
            return
        if sample.kind == "metrics":
            self._add("tps", self.tr("decode"), sample.time, v.get("decode_tps"))
            self._add("prompt", self.tr("prompt"), sample.time, v.get("prompt_tps"))
        elif sample.kind == "server":
            self._add("tps", self.tr("decode (live)"), sample.time, v.get("live_decode_tps"))
        elif sample.kind == "reply":
            self._mark_ttft(sample)
        elif sample.kind == "link":
            self._add("rtt", self._node(sample.source), sample.time, v.get("rtt_median_ms"))
        elif sample.kind == "node":
            rx, tx = v.get("net_rx_bps"), v.get("net_tx_bps")
            load = (v.get("status") or {}).get("load") or {}
            # the agent names them net_rx/tx_bytes_per_s; accept either spelling
            rx = rx if rx is not None else load.get("net_rx_bytes_per_s")
            tx = tx if tx is not None else load.get("net_tx_bytes_per_s")
            if rx is not None or tx is not None:
                self._add("net", self._node(sample.source), sample.time, ((rx or 0) + (tx or 0)) / 1e6)

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
        """Forget every sample."""
        for key, curve in self._curves.items():
            self.plots[key[0]].removeItem(curve)
        self.series.clear()
        self._curves.clear()
        for line in self._ttft_lines:
            self.plots["tps"].removeItem(line)
        self._ttft_lines.clear()
        self.ttft_marks.clear()
        self._t0 = time.time()

    def values_at(self, t: float) -> dict[str, dict[str, float]]:
        """The value of every curve at wall-clock time ``t`` (what hovering shows)."""
        out: dict[str, dict[str, float]] = {}
        for (plot, name), s in self.series.items():
            val = s.value_at(t)
            if val is not None:
                out.setdefault(plot, {})[name] = val
        return out

    def curve_data(self, plot: str, name: str) -> tuple[list[float], list[float]]:
        """x (seconds since the dashboard started) and y of one curve as last drawn."""
        c = self._curves.get((plot, name))
        if c is None:
            return [], []
        x, y = c.getData()
        return ([] if x is None else list(x)), ([] if y is None else list(y))

    # -------------------------------------------------------------- internals

    def _node(self, node_id: str) -> str:
        return self._node_names.get(node_id, node_id)

    def _mark_ttft(self, sample) -> None:
        """A finished reply: mark when its first token came and how long that took (the
        client's own wait when known, else llama-server's prompt time)."""
        v = sample.values
        wait_ms = v.get("ttft_ms", v.get("prompt_ms"))
        if wait_ms is None:
            return
        first = sample.time - float(v.get("predicted_ms") or 0.0) / 1000.0
        self.ttft_marks.append((first, float(wait_ms) / 1000.0))
        label = self.tr("first token after %1 s").replace("%1", f"{float(wait_ms) / 1000.0:.2f}")
        line = pg.InfiniteLine(pos=first - self._t0, angle=90, movable=False,
                               pen=pg.mkPen((200, 120, 0), width=1, style=Qt.PenStyle.DashLine),
                               label=label, labelOpts={"position": 0.9, "color": (200, 120, 0)})
        # only the newest mark keeps its words: replies a few seconds apart wrote their labels
        # over each other (the older marks stay as lines; hovering reads them)
        for older in self._ttft_lines:
            older.label.setVisible(False)
        self.plots["tps"].addItem(line, ignoreBounds=True)
        self._ttft_lines.append(line)
        while self.ttft_marks and self.ttft_marks[0][0] < sample.time - self.window_s:
            self.ttft_marks.pop(0)
            self.plots["tps"].removeItem(self._ttft_lines.pop(0))

    def _add(self, plot: str, name: str, t: float, value) -> None:
        if value is None:
            return
        key = (plot, name)
        s = self.series.get(key)
        if s is None:
            s = self.series[key] = _Series()
        s.add(t, float(value), t - self.window_s)
        self._dirty = True

    def _redraw(self) -> None:
        if self._paused or not self._dirty:
            return
        self._dirty = False
        for key, s in self.series.items():
            curve = self._curves.get(key)
            if curve is None:
                color = PALETTE[len([k for k in self._curves if k[0] == key[0]]) % len(PALETTE)]
                curve = self.plots[key[0]].plot(name=key[1], pen=pg.mkPen(color, width=2),
                                                symbol="o", symbolSize=3, symbolBrush=color, symbolPen=None)
                self._curves[key] = curve
            curve.setData([t - self._t0 for t in s.t], list(s.v))
        latest = max((s.t[-1] for s in self.series.values() if s.t), default=None)
        if latest is not None:
            right = latest - self._t0
            self.plots["tps"].setXRange(max(0.0, right - self.window_s), right + 1, padding=0)

    def _on_mouse(self, event) -> None:
        pos = event[0]
        for p in self.plots.values():
            if p.sceneBoundingRect().contains(pos):
                x = p.vb.mapSceneToView(pos).x()
                for line in self._cursor:
                    line.setPos(x)
                self.hover_label.setText(self._describe(self._t0 + x, x))
                return

    def _describe(self, t: float, x: float) -> str:
        vals = self.values_at(t)
        units = {"tps": self.tr("tok/s"), "prompt": self.tr("tok/s"), "rtt": self.tr("ms"), "net": self.tr("MB/s")}
        parts = [f"<b>{x:.1f} s</b>"]
        for plot in ("tps", "prompt", "rtt", "net"):
            for name, v in vals.get(plot, {}).items():
                parts.append(f"{html.escape(name)}: {v:.2f} {units[plot]}")
        return " · ".join(parts)
