"""The import dialog: what a cluster profile holds and how it differs from the live cluster.

Shown before an imported profile replaces the current split, so the user sees a missing node, a
different llama.cpp build or another model *before* pressing Start.
"""

from __future__ import annotations

from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QLabel, QListWidget, QListWidgetItem, QPlainTextEdit,
                               QVBoxLayout, QWidget)

WARN = "#d62728"
AMBER = "#e6a700"


class ProfileDiffDialog(QDialog):
    """Review an imported profile.

    Attributes:
        findings: the list of differences (``gui.cluster.profile.Finding``), errors first.
        apply_button: accepts the dialog (the window then applies the profile).
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
        plan = QPlainTextEdit("\n".join(profile.plan.describe()))
        plan.setReadOnly(True)
        plan.setMaximumHeight(120)
        self.list = QListWidget()
        if not self.findings:
            self.list.addItem(self.tr("✔ Matches the live cluster: it can launch as saved."))
        for f in self.findings:
            item = QListWidgetItem(("✖ " if f.severity == "error" else "⚠ ") + f"{f.subject}: {f.message}")
            item.setForeground(QBrush(QColor(WARN if f.severity == "error" else AMBER)))
            self.list.addItem(item)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.apply_button = buttons.addButton(self.tr("Use this profile"), QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(head)
        lay.addWidget(QLabel(self.tr("Plan")))
        lay.addWidget(plan)
        lay.addWidget(QLabel(self.tr("Differences from the live cluster")))
        lay.addWidget(self.list, 1)
        lay.addWidget(buttons)
        self.resize(640, 420)
