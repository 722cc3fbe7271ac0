"""The split editor's *Speculation* choice (#35): Auto, Off, N-gram, MTP when the model has
heads, and each model on this PC that can draft for it, by name; the models that cannot, with
the reason, on a line under it and in the combo's tooltip."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from gui.cluster.planning.speculation import AUTO, MTP, NGRAM, NONE
from gui.widgets.outside_text import PlainLabel, plain_tooltip


class SpeculationChoice(QWidget):
    """A labelled combo whose items carry the stored choice (``auto``, ``none``, ``ngram``,
    ``mtp`` or a draft model's path) as their data.

    Attributes:
        combo: the choice.
        line: a line for the view's owner to place: the refused models and why, or why the
            choice cannot be had (hidden when there is nothing to say).

    Signals:
        choiceChanged(str): the user chose another item (its stored form).
    """

    choiceChanged = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.combo = QComboBox()
        # a long draft's name must not widen the Split tab past an 800 px screen (#17): the list
        # that opens shows the whole name
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.combo.setMinimumContentsLength(18)
        self.combo.setToolTip(self.tr("Speculative decoding: a small model drafts tokens the cluster "
                                      "verifies together, paying the network's round trips once"))
        self.line = PlainLabel()
        self.line.setWordWrap(True)
        self.line.setStyleSheet("color: palette(mid);")
        self.line.hide()
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel(self.tr("Speculation")))
        row.addWidget(self.combo)
        self.combo.activated.connect(lambda _i: self.choiceChanged.emit(self.choice()))
        self.set_offer(None, AUTO)

    def choice(self) -> str:
        """The stored form of the item shown."""
        return self.combo.currentData() or AUTO

    def set_offer(self, offer, choice: str, auto_label: str = "") -> None:
        """Offer what ``offer`` (a :class:`~gui.cluster.planning.speculation_offer.SpeculationOffer`,
        None before a model is read) allows and show ``choice``; ``auto_label`` says what *Auto*
        picked. A stored draft that is not on offer stays listed by its file name, so the user
        sees what was chosen (the line says why it cannot run)."""
        self.combo.clear()
        auto = self.tr("Auto") if not auto_label else self.tr("Auto (%1)").replace("%1", auto_label)
        self.combo.addItem(auto, AUTO)
        self.combo.addItem(self.tr("Off"), NONE)
        self.combo.addItem(self.tr("N-gram look-up"), NGRAM)
        if offer is not None and offer.has_mtp:
            self.combo.addItem(self.tr("MTP heads"), MTP)
        for candidate in offer.usable if offer is not None else ():
            self.combo.addItem(candidate.path.name, str(candidate.path))
        if self.combo.findData(choice) < 0:
            self.combo.addItem(choice.replace("\\", "/").rsplit("/", 1)[-1], choice)
        self.combo.setCurrentIndex(self.combo.findData(choice))
        refusals = offer.refusals_text() if offer is not None else ""
        self.combo.setToolTip(plain_tooltip(self.tr("Not a draft for this model:") + "\n" + refusals)
                              if refusals else "")
        self.set_line(self.tr("Not a draft for this model: %1").replace("%1", refusals.replace("\n", "; "))
                      if refusals else "")

    def set_line(self, text: str) -> None:
        """Say ``text`` under the choice ("" hides the line)."""
        self.line.setText(text)
        self.line.setVisible(bool(text))
