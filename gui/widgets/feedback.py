"""Small confirmations on the control that was used (a Copy button saying it copied)."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QTimer
from PySide6.QtWidgets import QAbstractButton

#: How long a confirmation stays on the button (ms).
FLASH_MS = 1500


def flash_copied(button: QAbstractButton, ms: int = FLASH_MS) -> None:
    """Show "Copied ✔" on ``button`` for a moment, then its own text again (#17: Copy said nothing)."""
    own = button.property("herdOwnText") or button.text()
    button.setProperty("herdOwnText", own)
    button.setText(QCoreApplication.translate("Feedback", "Copied ✔"))
    QTimer.singleShot(ms, button, lambda: button.setText(button.property("herdOwnText") or own))
