"""The chat's question box and the checks before a question goes (#33).

* Ctrl+Enter sends; while a reply streams it does not, and says so (#37): the question stays in
  the box, and once the reply ends the pane says it can be sent now.
* When the pane's send function can count tokens (its ``fit``), a question is first measured
  against the server's context (:meth:`ChatInput.check`). A question that does not fit is held
  back: a note under the transcript says why in the core's words
  (:meth:`~gui.cluster.chat.conversation.ContextFit.describe`) and offers to leave out the
  oldest turns and send, or to cancel (the question stays in the box).

What is sent, and the conversation, are the pane's: this widget only says when a question may go
(``fitChecked``, ``leaveOutRequested``).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QTextOption
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from gui.cluster.chat.conversation import ContextFit


def shrinkable(label: QLabel) -> QLabel:
    """``label`` wraps its text and never asks for the width of it: a long unbroken word (a
    pasted line, a server's message) is cut at the pane's edge instead of widening the pane and
    squeezing the dashboard beside it."""
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)  # a server's words are text, never rich text (#32)
    label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
    label.setMinimumWidth(1)
    return label


class ChatInput(QWidget):
    """The question box with Send and Stop, and the context note (see the module docstring).

    Signals:
        sendRequested(): Send was clicked, or Ctrl+Enter pressed while nothing streams.
        stopRequested(): Stop was clicked.
        fitChecked(str): this question may go as it is (it fits, or could not be counted).
        leaveOutRequested(str, int): send this held-back question without that many oldest turns.
        said(str): a line for the pane's status.

    Attributes:
        input: the question box.
        send_button, stop_button: Send; Stop (the reply, or the check before a question goes).
        context_note: shown when a question does not fit the server's context: what
            ``context_text`` says, ``drop_button`` (leave out the oldest turns and send) and
            ``cancel_button``.
        refusal: why the last Ctrl+Enter did not send ("" when it did).
    """

    sendRequested = Signal()
    stopRequested = Signal()
    fitChecked = Signal(str)
    leaveOutRequested = Signal(str, int)
    said = Signal(str)

    def __init__(self, busy: Callable[[], bool], connected: Callable[[], bool],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._busy, self._connected = busy, connected
        self._checking = None  # the context check in flight (a Call), before a question goes
        self._offer: tuple[str, ContextFit] | None = None  # a question that did not fit, held back
        self.refusal = ""
        self.input = QPlainTextEdit()
        self.input.setPlaceholderText(self.tr("Ask something… (Ctrl+Enter sends)"))
        self.input.setMaximumHeight(80)
        self.input.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.send_button = QPushButton(self.tr("Send"))
        self.stop_button = QPushButton(self.tr("Stop"))
        self.stop_button.setEnabled(False)
        self.context_text = shrinkable(QLabel())
        self.drop_button = QPushButton(self.tr("Leave out oldest turns and send"))
        self.cancel_button = QPushButton(self.tr("Cancel"))
        self.context_note = QFrame()
        self.context_note.setFrameShape(QFrame.Shape.StyledPanel)
        note = QVBoxLayout(self.context_note)
        note.addWidget(self.context_text)
        note_buttons = QHBoxLayout()
        note_buttons.addStretch(1)
        note_buttons.addWidget(self.drop_button)
        note_buttons.addWidget(self.cancel_button)
        note.addLayout(note_buttons)
        self.context_note.hide()
        send_row = QHBoxLayout(self)
        send_row.setContentsMargins(0, 0, 0, 0)
        send_row.addWidget(self.input, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        send_row.addLayout(buttons)
        self.send_button.clicked.connect(self.sendRequested)
        self.stop_button.clicked.connect(self.stopRequested)
        self.drop_button.clicked.connect(self.leave_out_and_send)
        self.cancel_button.clicked.connect(self.cancel_held)
        self.input.installEventFilter(self)

    def text(self) -> str:
        """What is in the question box."""
        return self.input.toPlainText()

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        # Ctrl+Enter in the input sends.
        if obj is self.input and event.type() == event.Type.KeyPress \
                and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) \
                and event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            if self._busy() and self.text().strip():
                # not silently ignored (#37): sending waits for the reply; the question stays
                self.refusal = self.tr("Not sent: wait for the reply to finish, or press Stop. "
                                       "Your message stays in the box.")
                self.said.emit(self.refusal)
            else:
                self.sendRequested.emit()
            return True
        return super().eventFilter(obj, event)

    # ------------------------------------------------------- the context check

    def checking(self) -> bool:
        """True while a question is being measured against the server's context."""
        return self._checking is not None

    def check(self, text: str, call) -> None:
        """Wait for ``call`` (a :class:`gui.bridge.Call` whose result is a
        :class:`~gui.cluster.chat.conversation.ContextFit`) before ``text`` goes."""
        self._checking = call
        self.send_button.setEnabled(False)
        self.stop_button.setEnabled(True)  # Stop also calls off the check
        self.said.emit(self.tr("Counting the conversation's tokens…"))
        call.finished.connect(lambda result: self._on_fit(text, result))
        # Counting failed (an older server, a lost connection): send anyway; the reply's own
        # failure, in words, says what is wrong.
        call.failed.connect(lambda _exc: self._on_fit(text, None))
        call.cancelled.connect(self._on_check_cancelled)

    def cancel_check(self) -> None:
        """Call off the check in flight (the question stays in the box)."""
        if self._checking is not None:
            self._checking.cancel()

    def leave_out_and_send(self) -> None:
        """Send the held-back question without the oldest turns the check said to leave out."""
        if self._offer is None or self._offer[1].drop_turns is None or self._busy():
            return
        text, fit = self._offer
        self.hide_offer()
        self.leaveOutRequested.emit(text, fit.drop_turns)

    def cancel_held(self) -> None:
        """Do not send the held-back question; it stays in the input box."""
        if self._offer is None:
            return
        self.hide_offer()
        self.said.emit(self.tr("Not sent. Your message is still in the box below."))

    def hide_offer(self) -> None:
        """Forget the held-back question (it stays in the box) and hide the note."""
        self._offer = None
        self.context_note.hide()

    def _on_fit(self, text: str, fit: ContextFit | None) -> None:
        if self._checking is None:
            return
        self._checking = None
        self.stop_button.setEnabled(False)
        if not self._connected():  # the server stopped while counting (the pane said so)
            return
        if fit is None or fit.fits:
            self.fitChecked.emit(text)
            return
        self._offer = (text, fit)
        self.context_text.setText(fit.describe())
        self.drop_button.setVisible(fit.drop_turns is not None)
        self.context_note.show()
        self.said.emit(self.tr("Not sent yet: the conversation is longer than the server can read."))
        self.send_button.setEnabled(True)

    def _on_check_cancelled(self) -> None:
        if self._checking is None:
            return
        self._checking = None
        self.stop_button.setEnabled(False)
        self.send_button.setEnabled(self._connected())
        self.said.emit(self.tr("Not sent. Your message is still in the box below."))
