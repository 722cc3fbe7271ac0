"""The import dialog: what a cluster profile holds and how it differs from the live cluster.

Shown before an imported profile replaces the current split, so the user sees a missing node, a
different llama.cpp build or another model *before* pressing Start. A profile with an error (a
node that is gone or silent, another model or build) cannot be used: *Use this profile* stays
greyed out and each error says what to do about it.
"""

from __future__ import annotations

from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gui.cluster.planning.plan import slot_span

WARN = "#d62728"
AMBER = "#e6a700"


class ProfileDiffDialog(QDialog):
    """Review an imported profile.

    Attributes:
        findings: the list of differences (``gui.cluster.launching.profile.Finding``), errors first.
        plan_table: the profile's split, one row per holder of slots (host first).
        verdict: one sentence: whether the profile can be used, and if not what to do.
        apply_button: accepts the dialog (the window then applies the profile); disabled while
            a finding is an error.
    """

    def __init__(self, path: str, profile, findings: list, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("Import cluster profile"))
        self.findings = sorted(findings, key=lambda f: f.severity != "error")
        head = QLabel(self.tr("<b>%1</b><br>Model %2 · %3 layer slots · context %4 · port %5")
                      .replace("%1", path).replace("%2", profile.model.name or profile.model.path)
                      .replace("%3", str(profile.plan.n_slots)).replace("%4", str(profile.server.ctx))
                      .replace("%5", str(profile.server.port)))
        head.setWordWrap(True)
        self.plan_table = self._plan_table(profile)
        self.list = QListWidget()
        self.list.setWordWrap(True)
        if not self.findings:
            self.list.addItem(self.tr("✔ Matches the live cluster: it can launch as saved."))
        for f in self.findings:
            text = ("✖ " if f.severity == "error" else "⚠ ") + f"{self._subject(f.subject)}: {f.message}"
            if getattr(f, "advice", ""):
                text += "\n    " + f.advice
            item = QListWidgetItem(text)
            item.setForeground(QBrush(QColor(WARN if f.severity == "error" else AMBER)))
            self.list.addItem(item)
        errors = [f for f in self.findings if f.severity == "error"]
        self.verdict = QLabel(self.tr("This profile cannot be used as it is: see what to do under each ✖.")
                              if errors else self.tr("The split, context and port of this profile replace "
                                                     "the current ones. Nothing starts until you press Start."))
        self.verdict.setWordWrap(True)
        if errors:
            self.verdict.setStyleSheet(f"color: {WARN}; font-weight: bold;")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.apply_button = buttons.addButton(self.tr("Use this profile"), QDialogButtonBox.ButtonRole.AcceptRole)
        # a profile whose nodes are gone would launch on endpoints nobody listens on (#17)
        self.apply_button.setEnabled(not errors)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(head)
        lay.addWidget(QLabel(self.tr("Plan")))
        lay.addWidget(self.plan_table)
        lay.addWidget(QLabel(self.tr("Differences from the live cluster")))
        lay.addWidget(self.list, 1)
        lay.addWidget(self.verdict)
        lay.addWidget(buttons)
        self.resize(680, 460)

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
            rows.append((label, count, plan.slots_of(i), dev.endpoint or self.tr("this computer")))
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
