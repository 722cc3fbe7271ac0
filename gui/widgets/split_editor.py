"""The split editor: which layers go to which device, edited by hand, checked live.

Above, the :class:`~gui.widgets.split_bar.SplitBar` (host slots, then each device in
llama.cpp's order, output layer marked). Below it, live: a table of slots and estimated memory
per device against its free memory (red, with the shortfall, when it won't fit) and the exact
``llama-server`` command line. Buttons: *By memory* (llama.cpp's default split), *Fastest*
(when the planner offers it), undo and redo. Every edit becomes a :class:`gui.cluster.plan.Plan`
through the core's rules, so what is shown is what llama.cpp will do.
"""

from __future__ import annotations

import re
import shlex
import zlib
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QLabel, QPlainTextEdit, QPushButton,
                               QSpinBox, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from gui.cluster.server_command import ServerOptions, ServerSpec
from gui.cluster.plan import Assignment, Device, DeviceFit, Plan, PlanError, estimate, model_order, plan_by_memory
from gui.widgets.feedback import flash_copied
from gui.widgets.split_bar import HOST_COLOR, PALETTE, Segment, SplitBar

MiB = 1 << 20
BAD = QColor("#d62728")


def server_spec_for(plan: Plan, model_path: Path, ctx: int, host: str = "127.0.0.1", port: int = 8080,
                    extra_args: list[str] | None = None, alias: str | None = None) -> ServerSpec:
    """The :class:`ServerSpec` that runs ``plan`` — the launcher's own, so they never disagree."""
    return ServerSpec.for_plan(plan, model_path, ServerOptions(ctx=ctx, host=host, port=port, alias=alias,
                                                               extra_args=tuple(extra_args or ())))


def _mib(n: int | None) -> str:
    if n is None:
        return "?"
    # GiB from 1 GiB on, as the free memory beside it ("9,768.1 MiB" next to "22.66 GiB", #17)
    return f"{n / MiB:,.1f} MiB" if n < 1024 * MiB else f"{n / (1 << 30):,.2f} GiB"


def node_color(name: str, taken: set[str]) -> str:
    """A node's colour, the same on every run: picked by its name, the next free one on a clash."""
    start = zlib.crc32(name.encode("utf-8")) % len(PALETTE)
    for k in range(len(PALETTE)):
        c = PALETTE[(start + k) % len(PALETTE)]
        if c not in taken:
            return c
    return PALETTE[start]


#: Shown after each "-" inside an argument so a line never breaks between "--" and "fit" (#17);
#: never part of the text read or copied from the view.
WORD_JOINER = "\u2060"


class CommandView(QPlainTextEdit):
    """The read-only command line: wraps between arguments, never inside ``--fit`` or ``-ngl``.

    Qt breaks lines after a hyphen; a word joiner after each hyphen inside an argument stops
    that. :meth:`toPlainText` and copying leave the joiners out, so what is read or copied is
    the exact command."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)

    def setPlainText(self, text: str) -> None:  # noqa: N802 - Qt override
        super().setPlainText(re.sub(r"-(?=\S)", "-" + WORD_JOINER, text))

    def toPlainText(self) -> str:  # noqa: N802 - Qt override
        return super().toPlainText().replace(WORD_JOINER, "")

    def createMimeDataFromSelection(self):  # noqa: N802 - Qt override
        data = super().createMimeDataFromSelection()
        data.setText(data.text().replace(WORD_JOINER, ""))
        return data


class SplitEditor(QWidget):
    """Edit a plan with the mouse or keyboard and see at once what it costs.

    Signals:
        planChanged(object): the current :class:`Plan` changed (or became None).
        fastestRequested(): the user asked for the fastest plan (the app computes it off-thread
            and calls :meth:`apply_plan`).

    Attributes:
        bar: the :class:`SplitBar`.
        table: per-holder rows (host first): slots, layers, memory needed, free, verdict.
        command: the exact llama-server command line (read-only text).
    """

    planChanged = Signal(object)
    fastestRequested = Signal()
    relaunchRequested = Signal()

    COLUMNS = ("Use", "Device", "Slots", "Layers", "Needs", "Free", "Fit")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._model = None
        self._all_devices: list[Device] = []
        self._excluded: set[str] = set()
        self._endpoint_order: list[str] = []
        self._colors: dict[str, str] = {}
        self._host_free: int | None = None
        self._plan: Plan | None = None
        self._fits: list[DeviceFit] = []
        self._history: list[Plan] = []
        self._pos = -1
        self._llama_server = "llama-server"
        self._port = 8080
        self._host = "127.0.0.1"
        self._extra: list[str] = []
        self._alias: str | None = None
        self._custom = False  # the split shown was made by the user (kept when nodes change)
        self._row_order: list[str] = []  # device keys in the order their rows first appeared

        self.bar = SplitBar()
        self.ctx = QSpinBox()
        self.ctx.setRange(128, 1 << 24)
        self.ctx.setSingleStep(1024)
        self.ctx.setValue(4096)
        self.ctx.setToolTip(self.tr("Context size (-c): the KV cache grows with it"))
        self.by_memory_button = QPushButton(self.tr("By memory"))
        self.by_memory_button.setToolTip(self.tr("Split in proportion to free memory, as llama.cpp does by default"))
        self.fastest_button = QPushButton(self.tr("Fastest"))
        self.fastest_button.setToolTip(self.tr("Ask the planner for the quickest split"))
        self.fastest_button.setEnabled(False)
        # what Fastest optimises (#16): the decode speed of a chat, or a long prompt's first token
        self.fastest_for = QComboBox()
        self.fastest_for.addItem(self.tr("for chat"), "chat")
        self.fastest_for.addItem(self.tr("for documents"), "documents")
        self.fastest_for.setToolTip(self.tr("Chat: the fastest replies. Documents: the shortest wait for the "
                                            "first token after a long prompt (512 tokens)."))
        self.undo_button = QPushButton(self.tr("Undo"))
        self.redo_button = QPushButton(self.tr("Redo"))
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        # why the split is what it is (after Fastest), until the next edit
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.hide()
        # while the cluster serves another split than the one shown (after an edit or import)
        self.differs_label = QLabel(self.tr("The cluster is running another split. Relaunch to use this one "
                                            "(the chat waits for it)."))
        self.differs_label.setWordWrap(True)
        self.differs_label.setStyleSheet("color: #e6a700; font-weight: bold;")
        self.relaunch_button = QPushButton(self.tr("Relaunch with this split"))
        self.differs = QWidget()
        row = QHBoxLayout(self.differs)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.differs_label, 1)
        row.addWidget(self.relaunch_button)
        self.differs.hide()
        self.table = QTableWidget(0, len(self.COLUMNS))
        self.table.setHorizontalHeaderLabels([self.tr("Use"), self.tr("Device"), self.tr("Slots"), self.tr("Layers"),
                                              self.tr("Needs"), self.tr("Free"), self.tr("Fit")])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.command = CommandView()
        self.command.setReadOnly(True)
        self.command.setMaximumHeight(70)
        self.copy_command_button = QPushButton(self.tr("Copy command"))

        tools = QHBoxLayout()
        tools.addWidget(QLabel(self.tr("Context")))
        tools.addWidget(self.ctx)
        tools.addStretch(1)
        for b in (self.undo_button, self.redo_button, self.by_memory_button, self.fastest_button):
            tools.addWidget(b)
        cmd_row = QHBoxLayout()
        cmd_row.addWidget(QLabel(self.tr("Command line")))
        cmd_row.addStretch(1)
        cmd_row.addWidget(self.copy_command_button)
        # under Fastest, on a row of its own: the tool row must fit an 800 px screen (#17)
        fastest_row = QHBoxLayout()
        fastest_row.addStretch(1)
        fastest_row.addWidget(QLabel(self.tr("Fastest optimises")))
        fastest_row.addWidget(self.fastest_for)
        lay = QVBoxLayout(self)
        lay.addLayout(tools)
        lay.addLayout(fastest_row)
        lay.addWidget(self.bar)
        lay.addWidget(self.summary)
        lay.addWidget(self.note)
        lay.addWidget(self.differs)
        lay.addWidget(self.table, 1)
        lay.addLayout(cmd_row)
        lay.addWidget(self.command)

        self.bar.countsChanged.connect(self._on_bar_counts)
        self.bar.editFinished.connect(self._record)
        self.bar.reorderRequested.connect(self._on_reorder)
        self.by_memory_button.clicked.connect(self.reset_by_memory)
        self.fastest_button.clicked.connect(self.fastestRequested)
        self.relaunch_button.clicked.connect(self.relaunchRequested)
        self.undo_button.clicked.connect(self.undo)
        self.redo_button.clicked.connect(self.redo)
        self.ctx.valueChanged.connect(lambda _v: self._refresh())
        self.copy_command_button.clicked.connect(
            lambda: (QGuiApplication.clipboard().setText(self.command.toPlainText()),
                     flash_copied(self.copy_command_button)))
        self.table.itemChanged.connect(self._on_use_toggled)
        QShortcut(QKeySequence.StandardKey.Undo, self, self.undo)
        QShortcut(QKeySequence.StandardKey.Redo, self, self.redo)
        if QKeySequence("Ctrl+Y") not in QKeySequence.keyBindings(QKeySequence.StandardKey.Redo):
            QShortcut(QKeySequence("Ctrl+Y"), self, self.redo)  # as on Windows, everywhere (#17)
        self._update_buttons()
        self._refresh()

    # -------------------------------------------------------------- inputs

    def set_engine(self, llama_server: str | Path | None) -> None:
        """Which llama-server program the command line names."""
        self._llama_server = str(llama_server) if llama_server else "llama-server"
        self._refresh()

    def set_endpoint(self, host: str, port: int, extra_args: list[str] | None = None,
                     alias: str | None = None) -> None:
        """Where the server will listen, the model id it shows, and extra options for it."""
        self._host, self._port, self._extra, self._alias = host, port, list(extra_args or []), alias
        self._refresh()

    def set_fastest_available(self, ok: bool, why_not: str = "") -> None:
        """Enable the *Fastest* button (the planner can rank splits); ``why_not`` becomes its
        tooltip while it is greyed out."""
        self.fastest_button.setEnabled(ok)
        self.fastest_button.setToolTip(self.tr("Ask the planner for the quickest split") if ok or not why_not
                                       else why_not)

    def set_differs_from_running(self, differs: bool) -> None:
        """Say (or stop saying) that the split shown is not the one the cluster runs."""
        self.differs.setVisible(differs)

    def predicted_text(self, result) -> str:
        """Both predicted figures of a Fastest result (``gui.cluster.optimize.FastestResult``):
        decode speed and a long prompt's first token; "" for None."""
        if result is None:
            return ""
        text = self.tr("Predicted: %1 tokens/s decode.").replace("%1", f"{result.cost.tokens_per_s:.1f}")
        if result.prompt is not None:
            text += " " + self.tr("A %1-token prompt: first token after %2 s.").replace(
                "%1", str(result.prompt.n_prompt)).replace("%2", f"{result.prompt.total_s:.2f}")
        return text

    def set_note(self, text: str) -> None:
        """A sentence under the summary on why the split is what it is ("" hides it); the next
        edit clears it."""
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def set_cluster(self, model, devices: list[Device], host_free_bytes: int | None = None,
                    keep_split: bool = True) -> None:
        """Show ``model`` over ``devices``; keeps the user's split when it still applies."""
        old = self._plan
        self._model = model
        self._host_free = host_free_bytes
        self._all_devices = list(devices)
        for d in devices:
            if d.node_id not in self._colors:
                # by name, so a PC keeps its colour between runs (#17)
                self._colors[d.node_id] = node_color(d.node_name, set(self._colors.values()))
        known = {d.key for d in devices}
        self._excluded &= {k for k in self._excluded if k in known}
        plan = None
        # Only a split the user made (an edit, Fastest, an import) is kept: a split computed by
        # memory before the nodes were known (all slots on the host) is computed again, or
        # `herd demo` opened with every handle stacked at the end of the bar (#17).
        if keep_split and self._custom and old is not None and model is not None and old.n_layer == model.n_layer:
            plan = self._plan_with_counts(old.host_layers, {d.key: c for d, c in old.assignments})
        custom = plan is not None
        if plan is None and model is not None:
            plan = self._by_memory()
        self._history, self._pos = [], -1
        self._set_plan(plan, record=True)
        self._custom = custom

    # ------------------------------------------------------------ outputs

    def plan(self) -> Plan | None:
        """The plan shown, or None without a model."""
        return self._plan

    def fits(self) -> list[DeviceFit]:
        """Memory fit of every device, then the host (empty without a plan)."""
        return list(self._fits)

    def problems(self) -> list[str]:
        """Why this plan cannot launch, one sentence each (empty: it can)."""
        out = []
        for f in self._fits:
            if not f.fits:
                out.append(self.tr("%1 needs %2 but has %3 free: short by %4.")
                           .replace("%1", self._fit_label(f)).replace("%2", _mib(f.need_bytes))
                           .replace("%3", _mib(f.free_bytes)).replace("%4", _mib(f.short_by_bytes)))
        return out

    def fit_hint(self) -> str:
        """What to try when the plan does not fit."""
        return self.tr("Lower the context (now %1: the KV cache grows with it), or give layers to the "
                       "devices with memory to spare.").replace("%1", f"{self.ctx.value():,}")

    def server_spec(self) -> ServerSpec | None:
        """The llama-server invocation for the shown plan."""
        if self._plan is None or self._model is None:
            return None
        return server_spec_for(self._plan, self._model.path, self.ctx.value(), self._host, self._port, self._extra,
                               self._alias)

    def command_line(self) -> str:
        """The exact command line, shell-quoted."""
        spec = self.server_spec()
        return "" if spec is None else shlex.join(spec.argv(self._llama_server))

    # ------------------------------------------------------------- edits

    def apply_plan(self, plan: Plan) -> None:
        """Show ``plan`` (from *Fastest*, an imported profile …) as one undoable step."""
        if self._model is None or plan.n_layer != self._model.n_layer:
            return
        keys = {d.key for d in plan.devices()}
        self._excluded = {d.key for d in self._all_devices if d.key not in keys}
        self._endpoint_order = [d.endpoint for d in plan.devices() if d.endpoint]
        self._set_plan(plan, record=True)

    def reset_by_memory(self) -> None:
        """llama.cpp's default: in proportion to free memory (one undoable step)."""
        if self._model is not None:
            self._set_plan(self._by_memory(), record=True)
            self._custom = False

    def set_counts(self, host: int, counts: list[int]) -> bool:
        """Set slot counts (host first, then each shown device); one undoable step."""
        plan = self._plan_from_bar(host, counts)
        if plan is None:
            return False
        self._set_plan(plan, record=True)
        return True

    def undo(self) -> None:
        """Go back one step."""
        if self._pos > 0:
            self._pos -= 1
            self._restore(self._history[self._pos])

    def redo(self) -> None:
        """Go forward one step."""
        if self._pos + 1 < len(self._history):
            self._pos += 1
            self._restore(self._history[self._pos])

    def can_undo(self) -> bool:
        """Whether :meth:`undo` would change anything."""
        return self._pos > 0

    # ----------------------------------------------------------- internals

    def _included(self) -> list[Device]:
        # llama.cpp numbers a worker's devices together (its -d list), so a device left out of a
        # worker whose other devices stay is kept in the plan with no free memory: the split
        # by memory gives it no slot (a GPU worker's slow GPU, say).
        kept = {d.endpoint for d in self._all_devices if d.key not in self._excluded and d.endpoint}
        devs = [d if d.key not in self._excluded else replace(d, free_bytes=0)
                for d in self._all_devices if d.key not in self._excluded or d.endpoint in kept]
        return model_order(devs, self._endpoint_order)

    def _by_memory(self) -> Plan:
        return plan_by_memory(self._model, self._included(), self.ctx.value(), self._host_free)

    def _plan_with_counts(self, host: int, counts: dict[str, int]) -> Plan | None:
        devs = self._included()
        try:
            cs = [counts.get(d.key, 0) for d in devs]
            host = self._model.n_layer + 1 - sum(cs)
            return Plan(self._model.n_layer, host, tuple(Assignment(d, c) for d, c in zip(devs, cs)))
        except PlanError:
            return None

    def _plan_from_bar(self, host: int, counts: list[int]) -> Plan | None:
        devs = self._included()
        if self._model is None or len(counts) != len(devs):
            return None
        try:
            return Plan(self._model.n_layer, host, tuple(Assignment(d, c) for d, c in zip(devs, counts)))
        except PlanError:
            return None

    def _on_bar_counts(self, counts: list) -> None:
        plan = self._plan_from_bar(counts[0], counts[1:])
        if plan is not None:
            self._set_plan(plan, record=False)

    def _record(self) -> None:
        self._custom = True
        self.set_note("")
        if self._plan is not None and (self._pos < 0 or self._history[self._pos] != self._plan):
            del self._history[self._pos + 1:]
            self._history.append(self._plan)
            self._pos = len(self._history) - 1
        self._update_buttons()

    def _restore(self, plan: Plan) -> None:
        keys = {d.key for d in plan.devices()}
        self._excluded = {d.key for d in self._all_devices if d.key not in keys}
        self._endpoint_order = [d.endpoint for d in plan.devices() if d.endpoint]
        self._set_plan(plan, record=False)
        self._update_buttons()

    def _on_reorder(self, src: int, dst: int) -> None:
        devs = self._included()
        if self._plan is None or not (0 <= src < len(devs) and 0 <= dst < len(devs)):
            return
        eps = list(dict.fromkeys(d.endpoint for d in devs if d.endpoint))
        a, b = devs[src].endpoint, devs[dst].endpoint
        if a is None or b is None or a == b:
            return  # local GPUs always come after RPC devices in llama.cpp
        ia, ib = eps.index(a), eps.index(b)
        eps.insert(ib, eps.pop(ia))
        counts = {d.key: c for d, c in self._plan.assignments}
        self._endpoint_order = eps
        plan = self._plan_with_counts(self._plan.host_layers, counts)
        if plan is not None:
            self._set_plan(plan, record=True)

    def _on_use_toggled(self, item: QTableWidgetItem) -> None:
        if item.column() != 0 or self._refreshing:
            return
        key = item.data(Qt.ItemDataRole.UserRole)
        if not key:
            return
        if item.checkState() == Qt.CheckState.Checked:
            self._excluded.discard(key)
        else:
            self._excluded.add(key)
        if self._model is not None:
            # Leaving a node out (or taking it back) re-splits by memory over the rest.
            self._set_plan(self._by_memory(), record=True)

    def _set_plan(self, plan: Plan | None, *, record: bool) -> None:
        self._plan = plan
        if plan is not None:
            segs = [Segment(self.tr("host"), plan.host_layers, HOST_COLOR)]
            for d, c in plan.assignments:
                segs.append(Segment(d.label, c, self._colors.get(d.node_id, PALETTE[0])))
            self.bar.set_segments(segs)
        else:
            self.bar.set_segments([])
        if record:
            self._record()
        self._refresh()
        self.planChanged.emit(plan)

    def _update_buttons(self) -> None:
        self.undo_button.setEnabled(self._pos > 0)
        self.redo_button.setEnabled(self._pos + 1 < len(self._history))
        self.by_memory_button.setEnabled(self._model is not None)

    def _fit_label(self, f: DeviceFit) -> str:
        return self.tr("host CPU") if f.device is None else f.device.label

    _refreshing = False

    def _refresh(self) -> None:
        self._refreshing = True
        try:
            self._fill()
        finally:
            self._refreshing = False
        self._update_buttons()

    def _fill(self) -> None:
        plan, model = self._plan, self._model
        self._fits = []
        if plan is not None and model is not None:
            try:
                self._fits = estimate(plan, model, self.ctx.value(), self._host_free)
            except PlanError as exc:
                self.summary.setText(str(exc))
        rows: list[tuple] = []
        if self._fits:
            host = self._fits[-1]
            rows.append((None, host))
        planned = {f.device.key for f in self._fits[:-1]} if self._fits else set()
        devs = ([(f.device, f) for f in self._fits[:-1]] if self._fits else []) + \
            [(d, None) for d in self._all_devices if d.key in self._excluded and d.key not in planned]
        # Each device keeps its row, ticked or not: unticking one moved its row (and the next
        # one under the mouse) to the end of the table (#17).
        for d, _ in devs:
            if d.key not in self._row_order:
                self._row_order.append(d.key)
        rows += sorted(devs, key=lambda r: self._row_order.index(r[0].key))
        self.table.setRowCount(len(rows))
        for r, (dev, fit) in enumerate(rows):
            use = QTableWidgetItem()
            if dev is not None:
                use.setFlags(Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsEnabled)
                use.setCheckState(Qt.CheckState.Unchecked if dev.key in self._excluded else Qt.CheckState.Checked)
                use.setData(Qt.ItemDataRole.UserRole, dev.key)
                use.setToolTip(self.tr("Untick to leave this device out"))
            else:
                use.setFlags(Qt.ItemFlag.ItemIsEnabled)
            self.table.setItem(r, 0, use)
            name = self.tr("host CPU") if dev is None else dev.label
            if dev is not None and dev.endpoint:
                name += f"  ({dev.endpoint})"
            cells = [name]
            if fit is not None:
                s = fit.slots
                layers = "–" if not s else (f"{s.start}" if len(s) == 1 else f"{s.start}–{s.stop - 1}")
                if s and model is not None and model.n_layer in s:
                    layers += " " + self.tr("+ output")
                verdict = self.tr("fits") if fit.fits else \
                    self.tr("short by %1").replace("%1", _mib(fit.short_by_bytes))
                cells += [str(len(s)), layers, _mib(fit.need_bytes), _mib(fit.free_bytes), verdict]
            else:
                cells += ["0", self.tr("left out"), "–", _mib(dev.free_bytes if dev else None), ""]
            for c, text in enumerate(cells, start=1):
                item = QTableWidgetItem(text)
                if c >= 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if fit is not None and not fit.fits:
                    item.setForeground(QBrush(BAD))
                    item.setToolTip(fit.describe())
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        problems = self.problems()
        if model is None:
            self.summary.setText(self.tr("Open a model to plan the split."))
        elif problems:
            self.summary.setText("⚠ " + " ".join(problems + [self.fit_hint()]))
            self.summary.setStyleSheet(f"color: {BAD.name()};")
        elif plan is not None:
            self.summary.setText(self.tr("%1 layer slots: %2 on the host, %3 on %4 device(s). Everything fits.")
                                 .replace("%1", str(plan.n_slots)).replace("%2", str(plan.host_layers))
                                 .replace("%3", str(plan.offloaded))
                                 .replace("%4", str(sum(1 for c in plan.counts() if c))))
            self.summary.setStyleSheet("")
        if model is not None and model.context_length and self.ctx.value() > model.context_length:
            self.summary.setText(self.summary.text() + " " + self.tr(
                "The context (%1) is larger than the %2 the model was trained for: llama.cpp allows it, "
                "but replies beyond %2 tokens get worse.").replace("%1", f"{self.ctx.value():,}")
                .replace("%2", f"{model.context_length:,}"))
        self.command.setPlainText(self.command_line())
