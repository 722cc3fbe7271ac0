"""The import dialog: what a cluster profile holds and how it differs from the live cluster.

Shown before an imported profile replaces the current split, so the user sees a missing node, a
different llama.cpp build or another model *before* pressing Start. A profile with an error (a
node that is gone or silent, another model or build) cannot be used: *Use this profile* stays
greyed out and each error says what to do about it. A node that is here but not paired gets a
*Pair with …* button; the window checks the profile again as the nodes change
(:meth:`ProfileDiffDialog.set_findings`), so after pairing the same dialog lets it be used.

Everything that will run is shown: llama-server's whole command line, the options the profile
adds, and where the endpoint listens (this PC's setting, never the profile's). Every text that
comes from the profile is plain text (``Qt.PlainText``, table cells, a plain-text box) and
elided to a sane width: a model named ``<img src=/dev/zero>`` is shown as those characters, and a
5,000-character name does not make the dialog wider than the screen (#32).
"""

from __future__ import annotations

import shlex
from dataclasses import replace

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gui.cluster.llama.server_command import ServerSpec
from gui.cluster.planning.plan import slot_span

WARN = "#d62728"
AMBER = "#e6a700"
#: The widest a text from the profile is drawn (pixels): longer ones are elided.
NAME_WIDTH_PX = 400


def plain_label(text: str = "") -> QLabel:
    """A label that shows ``text`` as the characters it holds, never as rich text."""
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


class ProfileDiffDialog(QDialog):
    """Review an imported profile.

    Attributes:
        findings: the list of differences (``gui.cluster.launching.profile.Finding``), errors first.
        plan_table: the profile's split, one row per holder of slots (host first).
        command: llama-server's whole command line for this profile, read-only plain text.
        extra_label: the options the profile adds to herd's, in words (or that it adds none).
        endpoint_label: where the endpoint will listen: this PC's setting.
        verdict: one sentence: whether the profile can be used, and if not what to do.
        pair_buttons: {node id: its *Pair with …* button}, one per node the profile uses that is
            here but not paired.
        apply_button: accepts the dialog (the window then applies the profile); disabled while
            a finding is an error.

    Signals:
        pairRequested(str): the user wants to pair with this node (the window asks for its PIN).
    """

    pairRequested = Signal(str)

    def __init__(self, path: str, profile, findings: list, parent: QWidget | None = None, *,
                 host: str = "127.0.0.1") -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("Import cluster profile"))
        title = plain_label(self._fit(path, Qt.TextElideMode.ElideMiddle))
        font = title.font()
        font.setBold(True)
        title.setFont(font)
        head = plain_label(self.tr("Model %2 · %3 layer slots · context %4 · port %5")
                           .replace("%2", self._fit(profile.model.name or profile.model.path))
                           .replace("%3", str(profile.plan.n_slots)).replace("%4", str(profile.server.ctx))
                           .replace("%5", str(profile.server.port)))
        head.setWordWrap(True)
        self.plan_table = self._plan_table(profile)
        extra = profile.server.extra_args
        self.extra_label = plain_label(
            self.tr("Further llama-server options from the profile: %1").replace("%1", shlex.join(extra))
            if extra else self.tr("The profile adds no llama-server options of its own."))
        self.extra_label.setWordWrap(True)
        self.endpoint_label = plain_label(
            self.tr("The endpoint will listen on %1:%2 — this computer's own setting; a profile never chooses it.")
            .replace("%1", host).replace("%2", str(profile.server.port)))
        self.endpoint_label.setWordWrap(True)
        # every argument that will run, as the launcher builds it, listening where this PC says (#32)
        spec = ServerSpec.for_plan(profile.plan, profile.model.path, replace(profile.server, host=host))
        self.command = QPlainTextEdit(shlex.join(["llama-server", *spec.args()]))
        self.command.setReadOnly(True)
        self.command.setMaximumHeight(90)
        self.list = QListWidget()
        self.list.setWordWrap(True)
        self.pair_row = QHBoxLayout()
        self.pair_buttons: dict[str, QPushButton] = {}
        self.verdict = QLabel()
        self.verdict.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.apply_button = buttons.addButton(self.tr("Use this profile"), QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(title)
        lay.addWidget(head)
        lay.addWidget(QLabel(self.tr("Plan")))
        lay.addWidget(self.plan_table)
        lay.addWidget(QLabel(self.tr("What will run")))
        lay.addWidget(self.command)
        lay.addWidget(self.extra_label)
        lay.addWidget(self.endpoint_label)
        lay.addWidget(QLabel(self.tr("Differences from the live cluster")))
        lay.addWidget(self.list, 1)
        lay.addLayout(self.pair_row)
        lay.addWidget(self.verdict)
        lay.addWidget(buttons)
        self.findings: list = []
        self.set_findings(findings, force=True)
        self.resize(680, 460)

    def set_findings(self, findings: list, *, force: bool = False) -> None:
        """Show ``findings`` (the profile checked again, e.g. after a node was paired): the list,
        the Pair buttons, the verdict and whether *Use this profile* can be pressed. Nothing is
        redrawn when they did not change (``force``: draw anyway)."""
        findings = sorted(findings, key=lambda f: f.severity != "error")
        if findings == self.findings and not force:
            return
        self.findings = findings
        self.list.clear()
        if not findings:
            self.list.addItem(self.tr("✔ Matches the live cluster: it can launch as saved."))
        for f in findings:
            text = ("✖ " if f.severity == "error" else "⚠ ") + f"{self._fit(self._subject(f.subject), width=240)}: {f.message}"
            if getattr(f, "advice", ""):
                text += "\n    " + f.advice
            item = QListWidgetItem(text)
            item.setForeground(QBrush(QColor(WARN if f.severity == "error" else AMBER)))
            self.list.addItem(item)
        for button in self.pair_buttons.values():
            self.pair_row.removeWidget(button)
            button.deleteLater()
        self.pair_buttons = {}
        for f in findings:
            if getattr(f, "pair_with", "") and f.pair_with not in self.pair_buttons:
                button = QPushButton(self.tr("Pair with %1…").replace("%1", self._fit(f.subject, width=240)))
                button.clicked.connect(lambda _=False, nid=f.pair_with: self.pairRequested.emit(nid))
                self.pair_row.addWidget(button)
                self.pair_buttons[f.pair_with] = button
        errors = [f for f in findings if f.severity == "error"]
        if not errors:
            verdict = self.tr("The split, context and port of this profile replace the current ones. "
                              "Nothing starts until you press Start.")
        elif self.pair_buttons and all(getattr(f, "pair_with", "") for f in errors):
            verdict = self.tr("This profile can be used once its nodes are paired: press Pair for each. "
                              "This check runs again by itself; there is no need to import again.")
        else:
            verdict = self.tr("This profile cannot be used as it is: see what to do under each ✖.")
        self.verdict.setText(verdict)
        self.verdict.setStyleSheet(f"color: {WARN}; font-weight: bold;" if errors else "")
        # a profile whose nodes are gone would launch on endpoints nobody listens on (#17)
        self.apply_button.setEnabled(not errors)

    def _fit(self, text: str, mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight, width: int = NAME_WIDTH_PX) -> str:
        """``text`` from the profile, one line, elided to ``width`` pixels."""
        line = " ".join(str(text).split())
        return self.fontMetrics().elidedText(line, mode, width)

    def _subject(self, subject: str) -> str:
        names = {"model": self.tr("model"), "engine": self.tr("engine")}
        return names.get(subject, subject)

    def _plan_table(self, profile) -> QTableWidget:
        plan = profile.plan
        rows = [(self.tr("host CPU"), plan.host_layers, plan.host_slots(), self.tr("this computer"))]
        for i, (dev, count) in enumerate(plan.assignments):
            node = profile.nodes.get(dev.node_id)
            name = node.name if node is not None else dev.node_name
            label = f"{name} {dev.name}".strip() if dev.name else name
            rows.append((self._fit(label, width=260), count, plan.slots_of(i),
                         self._fit(dev.endpoint, width=200) if dev.endpoint else self.tr("this computer")))
        t = QTableWidget(len(rows), 4)
        t.setHorizontalHeaderLabels([self.tr("Device"), self.tr("Slots"), self.tr("Layers"), self.tr("Address")])
        t.verticalHeader().setVisible(False)
        t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        t.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        for r, (label, count, slots, where) in enumerate(rows):
            span = slot_span(slots, empty="–")
            for c, text in enumerate((label, str(count), span, where)):
                t.setItem(r, c, QTableWidgetItem(text))
        t.resizeColumnsToContents()
        t.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        t.setMaximumHeight(40 + 26 * len(rows))
        return t
