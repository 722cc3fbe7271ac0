"""*People at once* (#34 item 7): how many the endpoint answers at the same time.

Each person gets the whole context chosen in the split editor; llama-server gets one slot per
person (``-np``) and the memory fit plans the KV cache for all of them. *Auto* keeps
llama-server's own default (four sharing one context). The front door queues whoever comes
beyond this count.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QWidget

from gui.cluster.llama.server_command import MAX_PEOPLE


class PeopleBox(QWidget):
    """A label and a spin box: 0 (shown as *Auto*) or 1…:data:`MAX_PEOPLE`.

    Signals:
        peopleChanged(object): the user chose a count (None: *Auto*).

    Attributes:
        spin: the ``QSpinBox``.
    """

    peopleChanged = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.spin = QSpinBox()
        self.spin.setRange(0, MAX_PEOPLE)
        self.spin.setSpecialValueText(self.tr("Auto"))
        self.spin.setToolTip(self.tr("How many people (apps, devices) are answered at the same time, each with "
                                     "the whole context; the memory fit grows with them and others wait their "
                                     "turn. Auto: llama-server's default, four sharing one context."))
        label = QLabel(self.tr("People at once"))
        label.setBuddy(self.spin)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(label)
        lay.addWidget(self.spin)
        self.spin.valueChanged.connect(lambda v: self.peopleChanged.emit(int(v) or None))

    def people(self) -> int | None:
        """The count shown (None: *Auto*)."""
        return int(self.spin.value()) or None

    def show_people(self, people: int | None) -> None:
        """Show ``people`` (a profile or the settings chose it) without emitting ``peopleChanged``."""
        self.spin.blockSignals(True)
        self.spin.setValue(int(people or 0))
        self.spin.blockSignals(False)
