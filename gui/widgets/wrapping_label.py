"""A word-wrapped label that always gets the height its wrapped text needs.

Qt's layouts ask a word-wrapped ``QLabel`` for its height at the width they give it only when
every layout up to the window supports height-for-width; a ``QSplitter`` or ``QMainWindow`` on
the way does not, and the label then keeps one line's height and cuts off the rest (the model's
path under its name was hidden that way, #17). This label asks itself on every resize.
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QSizePolicy


class WrappingLabel(QLabel):
    """A ``QLabel`` with word wrap on whose minimum height follows its text at its width."""

    def __init__(self, text: str = "", parent=None) -> None:
        super().__init__(text, parent)
        self.setWordWrap(True)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)

    def _fit(self) -> None:
        need = self.heightForWidth(self.width()) if self.width() > 0 else -1
        if need > 0 and need != self.minimumHeight():
            self.setMinimumHeight(need)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt override
        super().setText(text)
        self._fit()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit()
