"""The split editor: which layers go to which device, edited by hand, checked live.

Above, the :class:`~gui.widgets.split_bar.SplitBar` (host slots, then each device in
llama.cpp's order, output layer marked). Below it, live: a table of slots and estimated memory
per device against its free memory (red, with the shortfall, when it won't fit) and the exact
``llama-server`` command line. Buttons: *By memory* (llama.cpp's default split), *Fastest*
(when the planner offers it), undo and redo. Every edit becomes a :class:`gui.cluster.planning.plan.Plan`
through the core's rules, so what is shown is what llama.cpp will do.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gui.cluster.llama.server_command import DEFAULT_CTX, ServerOptions, ServerSpec
from gui.cluster.planning.plan import Device, DeviceFit, Plan
from gui.cluster.planning.split_model import SplitModel
from gui.widgets.devices_table import BAD, DevicesTable, mib_text
from gui.widgets.feedback import flash_copied
from gui.widgets.node_colors import node_colors
from gui.widgets.outside_text import PlainLabel, plain_tooltip
from gui.widgets.speculation_choice import SpeculationChoice
from gui.widgets.split_bar import HOST_COLOR, PALETTE, Segment, SplitBar

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
        ctxChanged(int): the user changed the context size.
        fastestRequested(): the user asked for the fastest plan (the app computes it off-thread
            and calls :meth:`apply_plan`).

    Attributes:
        bar: the :class:`SplitBar`.
        table: per-holder rows (host first): slots, layers, memory needed, free, verdict.
        command: the exact llama-server command line (read-only text).
    """

    planChanged = Signal(object)
    ctxChanged = Signal(int)
    fastestRequested = Signal()
    relaunchRequested = Signal()

    COLUMNS = ("Use", "Device", "Slots", "Layers", "Needs", "Free", "Fit", "Experts")
    EXPERTS_COLUMN = DevicesTable.EXPERTS_COLUMN

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        #: the split being edited: plan, left-out devices, worker order, undo (Qt-free)
        self.split = SplitModel()
        self._colors: dict[str, str] = {}
        self._node_names: dict[str, str] = {}
        self._llama_server = "llama-server"
        #: llama-server's options besides the context (the context is the box below)
        self._options = ServerOptions()

        self.bar = SplitBar()
        self.ctx = QSpinBox()
        self.ctx.setRange(128, 1 << 24)
        self.ctx.setSingleStep(1024)
        self.ctx.setValue(DEFAULT_CTX)
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
        # speculation with or without a draft model (#35): part of the plan, measured by Fastest
        self.speculation_choice = SpeculationChoice()
        # why Fastest is greyed out, where it can be read (not only in a tooltip)
        self.fastest_why = PlainLabel()
        self.fastest_why.setStyleSheet("color: palette(mid);")
        self.fastest_why.hide()
        self.undo_button = QPushButton(self.tr("Undo"))
        self.redo_button = QPushButton(self.tr("Redo"))
        # node and device names and the planner's words about them: plain text (#32)
        self.summary = PlainLabel()
        # why the split is what it is (after Fastest), until the next edit
        self.note = PlainLabel()
        self.note.hide()
        # while the cluster serves another split than the one shown (after an edit or import)
        self.relaunch_button = QPushButton(self.tr("Relaunch with this split"))
        self.differs = self._differs_row()
        # one row per holder; its tick boxes edit the split model (#17)
        self.table = DevicesTable()
        self.command = CommandView()
        self.command.setReadOnly(True)
        self.command.setMaximumHeight(70)
        self.copy_command_button = QPushButton(self.tr("Copy command"))

        self._lay_out()
        self._connect()
        self._update_buttons()
        self._refresh()

    def _differs_row(self) -> QWidget:
        """The row shown while the cluster serves another split than the one shown: the words
        and *Relaunch with this split*."""
        self.differs_label = QLabel(self.tr("The cluster is running another split. Relaunch to use this one "
                                            "(the chat waits for it)."))
        self.differs_label.setWordWrap(True)
        self.differs_label.setStyleSheet("color: #e6a700; font-weight: bold;")
        differs = QWidget()
        row = QHBoxLayout(differs)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.differs_label, 1)
        row.addWidget(self.relaunch_button)
        differs.hide()
        return differs

    def _lay_out(self) -> None:
        """The tools on top, Fastest's row, the bar, the words, the table, the command line."""
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
        fastest_row.addWidget(self.fastest_why, 1)
        fastest_row.addStretch(1)
        fastest_row.addWidget(QLabel(self.tr("Fastest optimises")))
        fastest_row.addWidget(self.fastest_for)
        fastest_row.addWidget(self.speculation_choice)
        lay = QVBoxLayout(self)
        lay.addLayout(tools)
        lay.addLayout(fastest_row)
        lay.addWidget(self.speculation_choice.line)
        lay.addWidget(self.bar)
        lay.addWidget(self.summary)
        lay.addWidget(self.note)
        lay.addWidget(self.differs)
        lay.addWidget(self.table, 1)
        lay.addLayout(cmd_row)
        lay.addWidget(self.command)

    def _connect(self) -> None:
        """The controls edit the split model; the view follows the model's changes."""
        self.bar.countsChanged.connect(self._on_bar_counts)
        self.bar.editFinished.connect(self._on_bar_released)
        self.bar.reorderRequested.connect(self._on_reorder)
        self.by_memory_button.clicked.connect(self.reset_by_memory)
        self.fastest_button.clicked.connect(self.fastestRequested)
        self.relaunch_button.clicked.connect(self.relaunchRequested)
        self.undo_button.clicked.connect(self.undo)
        self.redo_button.clicked.connect(self.redo)
        self.ctx.valueChanged.connect(lambda v: self.split.set_ctx(int(v)))
        self.ctx.valueChanged.connect(lambda v: self.ctxChanged.emit(int(v)))
        self.split.subscribe(self._on_split_changed)
        self.copy_command_button.clicked.connect(
            lambda: (QGuiApplication.clipboard().setText(self.command.toPlainText()),
                     flash_copied(self.copy_command_button)))
        self.table.useToggled.connect(self._on_use_toggled)
        self.table.expertsToggled.connect(self._on_experts_toggled)
        QShortcut(QKeySequence.StandardKey.Undo, self, self.undo)
        QShortcut(QKeySequence.StandardKey.Redo, self, self.redo)
        if QKeySequence("Ctrl+Y") not in QKeySequence.keyBindings(QKeySequence.StandardKey.Redo):
            QShortcut(QKeySequence("Ctrl+Y"), self, self.redo)  # as on Windows, everywhere (#17)

    # -------------------------------------------------------------- inputs

    def set_engine(self, llama_server: str | Path | None) -> None:
        """Which llama-server program the command line names."""
        self._llama_server = str(llama_server) if llama_server else "llama-server"
        self._refresh()

    def set_options(self, options: ServerOptions) -> None:
        """llama-server's options the command line shows: where the server will listen, the
        model id it shows, and extra options for it (the context is the editor's own box)."""
        self._options = options
        self.split.set_server_args(options.extra_args)  # -np, -ub… change what fits
        self.split.set_people(options.people)  # each person holds a whole context (#34)
        self._refresh()

    _speculation = None  # the plan's speculation (#35): in the summary and on the command line

    def set_speculation(self, speculation) -> None:
        """Show the plan's :class:`~gui.cluster.planning.speculation.Speculation` (#35), or None."""
        self._speculation = speculation
        self.split.set_speculation(speculation)  # its draft's memory in the fit; refreshes the view

    def set_fastest_available(self, ok: bool, why_not: str = "") -> None:
        """Enable the *Fastest* button (the planner can rank splits); while it is greyed out,
        ``why_not`` shows beside it and as its tooltip."""
        self.fastest_button.setEnabled(ok)
        self.fastest_button.setToolTip(self.tr("Ask the planner for the quickest split") if ok or not why_not
                                       else plain_tooltip(why_not))
        self.fastest_why.setText("" if ok else why_not)
        self.fastest_why.setVisible(not ok and bool(why_not))

    def set_differs_from_running(self, differs: bool) -> None:
        """Say (or stop saying) that the split shown is not the one the cluster runs."""
        self.differs.setVisible(differs)

    def predicted_text(self, result) -> str:
        """Both predicted figures of a Fastest result (``gui.cluster.planning.optimize.FastestResult``):
        decode speed and a long prompt's first token; "" for None."""
        if result is None:
            return ""
        text = self.tr("Predicted: %1 tokens/s decode.").replace("%1", f"{result.cost.tokens_per_s:.1f}")
        if result.prompt is not None:
            text += " " + self.tr("A %1-token prompt: first token after %2 s.").replace(
                "%1", str(result.prompt.n_prompt)).replace("%2", f"{result.prompt.total_s:.2f}")
        return text

    def fastest_objective(self) -> str:
        """What *Fastest* optimises, as the user chose: ``chat`` or ``documents``."""
        return self.fastest_for.currentData()

    def set_ctx(self, ctx: int) -> None:
        """Show the context size (the workspace's); the editor's box emits ``ctxChanged`` on edits."""
        if self.ctx.value() != ctx:
            self.ctx.setValue(ctx)

    def show_summary(self, text: str) -> None:
        """Say ``text`` where the plan's summary goes (until the plan changes)."""
        self.summary.setText(text)

    def set_note(self, text: str) -> None:
        """A sentence under the summary on why the split is what it is ("" hides it); the next
        edit clears it."""
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def set_node_names(self, names: dict[str, str]) -> None:
        """The names of every node the window knows (``{node id: name}``): their colours are
        picked among all of them, as the node cards and the dashboard pick theirs."""
        devices = {d.node_id: d.node_name for d in self.split.devices}
        self._node_names = {**devices, **names}
        self._colors = node_colors(self._node_names)
        self._show_bar(self.split.plan)

    def set_cluster(self, model, devices: list[Device], host_free_bytes: int | None = None,
                    keep_split: bool = True) -> None:
        """Show ``model`` over ``devices``; keeps the user's split when it still applies."""
        # by name, so a PC keeps its colour between runs (#17), and the colour the other views give it
        self._node_names.update({d.node_id: d.node_name for d in devices if d.node_id not in self._node_names})
        self._colors = node_colors(self._node_names)
        self.set_note("")
        self.split.set_cluster(model, devices, host_free_bytes, keep_split)

    # ------------------------------------------------------------ outputs

    def plan(self) -> Plan | None:
        """The plan shown, or None without a model."""
        return self.split.plan

    def fits(self) -> list[DeviceFit]:
        """Memory fit of every device, then the host (empty without a plan)."""
        return list(self.split.fits)

    def problems(self) -> list[str]:
        """Why this plan cannot launch, one sentence each (empty: it can)."""
        out = []
        for f in self.split.fits:
            if not f.fits and f.shared_bytes:  # one computer's RAM, which other devices use too
                out.append(self.tr("%1 needs %2, and the other devices on the same computer %3, but it "
                                   "has %4 free: short by %5.")
                           .replace("%1", self._fit_label(f)).replace("%2", mib_text(f.need_bytes))
                           .replace("%3", mib_text(f.shared_bytes)).replace("%4", mib_text(f.free_bytes))
                           .replace("%5", mib_text(f.short_by_bytes)))
            elif not f.fits:
                out.append(self.tr("%1 needs %2 but has %3 free: short by %4.")
                           .replace("%1", self._fit_label(f)).replace("%2", mib_text(f.need_bytes))
                           .replace("%3", mib_text(f.free_bytes)).replace("%4", mib_text(f.short_by_bytes)))
        return out

    def fit_hint(self) -> str:
        """What to try when the plan does not fit."""
        return self.tr("Lower the context (now %1: the KV cache grows with it), or give layers to the "
                       "devices with memory to spare.").replace("%1", f"{self.ctx.value():,}")

    def server_spec(self) -> ServerSpec | None:
        """The llama-server invocation for the shown plan."""
        if self.split.plan is None or self.split.model is None:
            return None
        # the launcher's own command line, so they never disagree
        return ServerSpec.for_plan(self.split.plan, self.split.model.path,
                                   replace(self._options, ctx=self.ctx.value()), speculation=self._speculation)

    def command_line(self) -> str:
        """The exact command line, shell-quoted."""
        spec = self.server_spec()
        return "" if spec is None else shlex.join(spec.argv(self._llama_server))

    # ------------------------------------------------------------- edits

    def apply_plan(self, plan: Plan) -> None:
        """Show ``plan`` (from *Fastest*, an imported profile …) as one undoable step."""
        self.set_note("")
        self.split.apply_plan(plan)

    def reset_by_memory(self) -> None:
        """llama.cpp's default: in proportion to free memory (one undoable step)."""
        self.set_note("")
        self.split.reset_by_memory()

    def set_counts(self, host: int, counts: list[int]) -> bool:
        """Set slot counts (host first, then each shown device); one undoable step."""
        self.set_note("")
        return self.split.set_counts(host, counts)

    def undo(self) -> None:
        """Go back one step."""
        self.split.undo()

    def redo(self) -> None:
        """Go forward one step."""
        self.split.redo()

    def can_undo(self) -> bool:
        """Whether :meth:`undo` would change anything."""
        return self.split.can_undo()

    # ----------------------------------------------------------- internals

    def _on_bar_counts(self, counts: list) -> None:
        self.split.preview_counts(counts[0], counts[1:])

    def _on_bar_released(self) -> None:
        self.set_note("")
        self.split.commit()
        self._update_buttons()

    def _on_reorder(self, src: int, dst: int) -> None:
        self.set_note("")
        self.split.move_worker(src, dst)

    def _on_use_toggled(self, key: str, used: bool) -> None:
        # Leaving a node out (or taking it back) re-splits by memory over the rest.
        self.set_note("")
        self.split.set_included(key, used)

    def _on_experts_toggled(self, key: str, in_ram: bool) -> None:
        self.set_note("")
        self.split.set_experts_in_ram(key, in_ram)

    def _on_split_changed(self, plan: Plan | None) -> None:
        self._show_bar(plan)
        self._refresh()
        self.planChanged.emit(plan)

    def _show_bar(self, plan: Plan | None) -> None:
        if plan is not None:
            segs = [Segment(self.tr("host"), plan.host_layers, HOST_COLOR)]
            for d, c in plan.assignments:
                segs.append(Segment(d.label, c, self._colors.get(d.node_id, PALETTE[0])))
            self.bar.set_segments(segs)
        else:
            self.bar.set_segments([])

    def _update_buttons(self) -> None:
        self.undo_button.setEnabled(self.split.can_undo())
        self.redo_button.setEnabled(self.split.can_redo())
        self.by_memory_button.setEnabled(self.split.model is not None)

    def _fit_label(self, f: DeviceFit) -> str:
        return self.tr("host CPU") if f.device is None else f.device.label

    def _refresh(self) -> None:
        self._fill()
        self._update_buttons()

    def _fill(self) -> None:
        plan, model, fits, excluded = self.split.plan, self.split.model, self.split.fits, self.split.excluded
        if self.split.error:
            self.summary.setText(self.split.error)
        self.table.show_split(self.split)
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
        self.summary.setText(self.summary.text() + _speculation_sentence(self._speculation, model))
        self.command.setPlainText(self.command_line())


def _speculation_sentence(speculation, model) -> str:
    """The summary's sentence on the plan's speculation (#35): the choice, its predicted gain and
    the reason; "" when there is nothing to say."""
    if model is None or speculation is None or not (speculation.active or speculation.reason):
        return ""
    text = speculation.describe()
    return " " + text[:1].upper() + text[1:] + "."
