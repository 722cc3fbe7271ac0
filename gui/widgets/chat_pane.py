"""The chat pane: talk to the cluster's llama-server, see how fast it answers.

The pane renders the core's :class:`~gui.cluster.chat.conversation.Conversation` — the one transcript
of the app: a reply cut off by a lost worker or by Stop is marked interrupted there, with why,
and the whole conversation is what the next question sends (so it goes on after a relaunch on
the surviving nodes). The pane never opens a connection itself. It is given a *send* function (the app binds it to
the bridge and :func:`gui.cluster.chat.client.stream_chat`) that returns a :class:`gui.bridge.Call`
whose ``item`` signal carries ``ChatDelta``/``ChatDone`` events.

Fast local models produce hundreds of tokens per second. Re-rendering the document per token
would freeze the window, so text that arrives is buffered and appended once per frame (a 16 ms
timer) as plain text at the end of the reply; only when the reply is complete is it rendered
once as Markdown (code blocks included) in place of the plain text.

Before a message goes, the pane asks the send function's ``fit`` (when it has one) whether the
conversation fits the server's context; when it does not, a note under the transcript says so in
the core's words (:meth:`~gui.cluster.chat.conversation.ContextFit.describe`) and offers to leave
out the oldest turns, or to cancel. Nothing in the pane may grow wider than its place because of
a long message: the transcript and the input wrap unbroken text anywhere, and the status and the
note never ask for the width of their text.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QGuiApplication,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextFormat,
    QTextOption,
)
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gui.cluster.chat.client import ChatDelta, ChatDone, ChatError
from gui.cluster.chat.continuation import EchoedPrefix
from gui.cluster.chat.conversation import ContextFit, Conversation, Message
from gui.cluster.chat.history import ChatStore, resumed
from gui.cluster.nodes.network_errors import explain
from gui.widgets.chat_history import ChatKeeper
from gui.widgets.feedback import flash_copied
from gui.widgets.transcript import Transcript, insert_reply_markdown

FRAME_MS = 16


@dataclass
class ReplyStats:
    """What the pane measured about one reply (times from ``time.perf_counter``).

    Attributes:
        sent: when the request left.
        first: when the first text arrived, or None.
        last: when the latest text arrived.
        pieces: how many text pieces (≈ tokens: llama-server streams one token per event) arrived.
        server_tps: llama-server's own ``predicted_per_second`` for the reply, when it said.
    """

    sent: float
    first: float | None = None
    last: float | None = None
    pieces: int = 0
    server_tps: float | None = None
    finish_reason: str | None = None

    def ttft_ms(self) -> float | None:
        """Time to first token, in milliseconds."""
        return None if self.first is None else (self.first - self.sent) * 1000

    def seen_tps(self) -> float | None:
        """Tokens/s as the pane saw them, first token excluded (as llama-server counts)."""
        if self.first is None or self.last is None or self.pieces < 2 or self.last <= self.first:
            return None
        return (self.pieces - 1) / (self.last - self.first)


SendFn = Callable[[list[dict], dict], object]


def _shrinkable(label: QLabel) -> QLabel:
    """``label`` wraps its text and never asks for the width of it: a long unbroken word (a
    pasted line, a server's message) is cut at the pane's edge instead of widening the pane and
    squeezing the dashboard beside it."""
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)  # a server's words are text, never rich text (#32)
    label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
    label.setMinimumWidth(1)
    return label


class ChatPane(QWidget):
    """Chat with the running cluster.

    Signals:
        replyFinished(object): a reply ended (``ReplyStats``), whether complete, stopped or failed.
        busyChanged(bool): a reply started or ended.

    Attributes:
        conversation: the :class:`~gui.cluster.chat.conversation.Conversation` shown.
        stats: what was measured about each reply, in order (tokens, time to first token,
            tokens/s as seen and as llama-server counted them, stopped, error).
        transcript: the :class:`~gui.widgets.transcript.Transcript` holding the conversation.
        context_note: shown when the next message does not fit the server's context: what
            ``context_text`` says, ``drop_button`` (leave out the oldest turns and send) and
            ``cancel_button``.
        history: with a chat store, the :class:`~gui.widgets.chat_history.ChatKeeper` that keeps
            every chat and lists the past ones above the transcript (``history.chats``); else None.
    """

    replyFinished = Signal(object)
    busyChanged = Signal(bool)

    def __init__(self, send: SendFn | None = None, parent: QWidget | None = None, *,
                 history: ChatStore | None = None) -> None:
        super().__init__(parent)
        self._send = send
        self.conversation = Conversation()
        self.stats: list[dict] = []
        self._failed_reply: Message | None = None  # the last reply, when its stream failed
        self._call = None
        self._checking = None  # the context check in flight (a Call), before a message goes
        self._offer: tuple[str, ContextFit] | None = None  # a message that did not fit, held back
        self._stats: ReplyStats | None = None
        self._last_stats: ReplyStats | None = None
        self._pending: list[str] = []
        self._reply_parts: list[str] = []
        self._reply_start = 0
        self._flush = QTimer(self)
        self._flush.setInterval(FRAME_MS)
        self._flush.timeout.connect(self._flush_pending)

        self.system_edit = QLineEdit()
        self.system_edit.setPlaceholderText(self.tr("System prompt (optional)"))
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(0.0, 2.0)
        self.temperature.setSingleStep(0.1)
        self.temperature.setValue(0.8)
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 32768)
        self.max_tokens.setValue(256)
        self.new_button = QPushButton(self.tr("New chat"))
        self.save_button = QPushButton(self.tr("Save history…"))
        self.copy_button = QPushButton(self.tr("Copy reply"))
        # loads no image, opens a link only after showing its address (#32)
        self.transcript = Transcript()
        self.transcript.setUndoRedoEnabled(False)  # no undo history growing with every token
        # a 30k-character paste without spaces wraps too, instead of one endless line
        self.transcript.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        # Follow the reply until the user scrolls up, and again once they scroll back down. The
        # document is laid out lazily, so "at the bottom" measured after inserting text once
        # lagged behind a fast reply and the view stopped following it (#17).
        self._follow = True
        self._scrolling = False
        sb = self.transcript.verticalScrollBar()
        sb.valueChanged.connect(self._on_scrolled)
        sb.rangeChanged.connect(lambda _lo, _hi: self._follow and self._to_bottom())
        self.input = QPlainTextEdit()
        self.input.setPlaceholderText(self.tr("Ask something… (Ctrl+Enter sends)"))
        self.input.setMaximumHeight(80)
        self.input.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.send_button = QPushButton(self.tr("Send"))
        self.stop_button = QPushButton(self.tr("Stop"))
        self.stop_button.setEnabled(False)
        self.status = _shrinkable(QLabel())
        self.context_text = _shrinkable(QLabel())
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

        opts = QHBoxLayout()
        opts.addWidget(QLabel(self.tr("Temperature")))
        opts.addWidget(self.temperature)
        opts.addWidget(QLabel(self.tr("Max tokens")))
        opts.addWidget(self.max_tokens)
        opts.addStretch(1)
        # The reply's actions sit under the transcript, not beside the options: one row of all
        # of them made the pane (and so the window) wider than a small screen (#17).
        actions = QHBoxLayout()
        actions.addWidget(self.status, 1)
        actions.addWidget(self.copy_button)
        actions.addWidget(self.save_button)
        actions.addWidget(self.new_button)
        send_row = QHBoxLayout()
        send_row.addWidget(self.input, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        send_row.addLayout(buttons)
        lay = QVBoxLayout(self)
        lay.addWidget(self.system_edit)
        lay.addLayout(opts)
        self.history = ChatKeeper(self, history) if history is not None else None
        # past chats above the transcript (#36)
        lay.addWidget(self.transcript if self.history is None else self.history.above(self.transcript), 1)
        lay.addWidget(self.context_note)
        lay.addLayout(actions)
        lay.addLayout(send_row)

        self.send_button.clicked.connect(self.send_input)
        self.stop_button.clicked.connect(self.stop)
        self.new_button.clicked.connect(self.new_chat)
        self.save_button.clicked.connect(self._save_dialog)
        self.copy_button.clicked.connect(self.copy_last_reply)
        self.drop_button.clicked.connect(self.leave_out_and_send)
        self.cancel_button.clicked.connect(self.cancel_held)
        self.input.installEventFilter(self)
        #: why the last Ctrl+Enter did not send (said after the streaming status until the reply ends)
        self._refusal = ""
        #: while a cut reply is continued: takes off the prefix llama-server sends back first (#34)
        self._echo: EchoedPrefix | None = None
        #: the reply a lost worker cut (interrupt_reply): the one resume_reply continues, never
        #: a reply the person stopped
        self._lost_reply: Message | None = None
        self.set_available(send is not None)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        # Coming to the chat (its tab clicked) is coming to ask something: the keyboard goes to
        # the question box, one click less to the first question. Not when another field of the
        # pane was being typed in (the system prompt, a number): it gets the keyboard back.
        super().showEvent(event)
        if not isinstance(self.focusWidget(), QLineEdit):  # (a spin box types into one too)
            self.input.setFocus(Qt.FocusReason.OtherFocusReason)

    # ----------------------------------------------------------------- API

    def set_send(self, send: SendFn | None) -> None:
        """Connect the pane to a server (``None``: no server running)."""
        self._send = send
        self.set_available(send is not None)

    def set_available(self, ok: bool, reason: str | None = None) -> None:
        """Enable sending; otherwise show why not."""
        self.send_button.setEnabled(ok and not self.busy())
        if not ok:
            self.status.setText(reason or self.tr("Start the cluster to chat with it."))
        elif not self.busy():
            self.status.clear()

    def busy(self) -> bool:
        """True while a message is being checked against the context or its reply streams."""
        return self._stats is not None or self._checking is not None

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        # Ctrl+Enter in the input sends.
        if obj is self.input and event.type() == event.Type.KeyPress \
                and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) \
                and event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            if self.busy() and self.input.toPlainText().strip():
                # not silently ignored (#37): sending waits for the reply; the question stays
                self._refusal = self.tr("Not sent: wait for the reply to finish, or press Stop. "
                                        "Your message stays in the box.")
                self.status.setText(self._refusal)
            else:
                self.send_input()
            return True
        return super().eventFilter(obj, event)

    def send_text(self, text: str) -> bool:
        """Send ``text`` as the user's next message; False if not possible now.

        When the send function can check the context (``fit``), the conversation is measured
        first; a message that does not fit is held back with :attr:`context_note` shown.
        """
        text = text.strip()
        if not text or self._send is None or self.busy():
            return False
        self._hide_offer()
        fit = getattr(self._send, "fit", None)
        if fit is None:
            return self._send_now(text)
        messages = self.request_messages() + [{"role": "user", "content": text}]
        try:
            call = fit(messages, self.max_tokens.value())
        except Exception:  # noqa: BLE001 - no check possible: the server's own answer will say
            return self._send_now(text)
        self._checking = call
        self.send_button.setEnabled(False)
        self.stop_button.setEnabled(True)  # Stop also calls off the check
        self.status.setText(self.tr("Counting the conversation's tokens…"))
        call.finished.connect(lambda result: self._on_fit(text, result))
        # Counting failed (an older server, a lost connection): send anyway; the reply's own
        # failure, in words, says what is wrong.
        call.failed.connect(lambda _exc: self._on_fit(text, None))
        call.cancelled.connect(self._on_check_cancelled)
        return True

    def leave_out_and_send(self) -> None:
        """Send the held-back message without the oldest turns the check said to leave out."""
        if self._offer is None or self._offer[1].drop_turns is None or self.busy():
            return
        text, fit = self._offer
        self._hide_offer()
        count = self.conversation.leave_out_turns(fit.drop_turns)
        self._append_note(self.tr("%1 earlier messages are no longer sent, so the conversation fits "
                                  "the server's context.").replace("%1", str(count)))
        self._send_now(text)

    def cancel_held(self) -> None:
        """Do not send the held-back message; it stays in the input box."""
        if self._offer is None:
            return
        self._hide_offer()
        self.status.setText(self.tr("Not sent. Your message is still in the box below."))

    def _on_fit(self, text: str, fit: ContextFit | None) -> None:
        if self._checking is None:
            return
        self._checking = None
        self.stop_button.setEnabled(False)
        if self._send is None:  # the server stopped while counting (set_available said so)
            return
        if fit is None or fit.fits:
            self._send_now(text)
            return
        self._offer = (text, fit)
        self.context_text.setText(fit.describe())
        self.drop_button.setVisible(fit.drop_turns is not None)
        self.context_note.show()
        self.status.setText(self.tr("Not sent yet: the conversation is longer than the server can read."))
        self.send_button.setEnabled(True)

    def _on_check_cancelled(self) -> None:
        if self._checking is None:
            return
        self._checking = None
        self.stop_button.setEnabled(False)
        self.send_button.setEnabled(self._send is not None)
        self.status.setText(self.tr("Not sent. Your message is still in the box below."))

    def _hide_offer(self) -> None:
        self._offer = None
        self.context_note.hide()

    def _send_now(self, text: str) -> bool:
        if self.input.toPlainText().strip() == text:
            self.input.clear()  # it is in the transcript now
        self.conversation.add_user(text)
        self._append_message("user", text)
        self._begin_reply()
        return self._stream(self.request_messages())

    def resume_reply(self) -> bool:
        """Continue the last reply where it stopped, when a lost worker cut it (after the
        relaunch, #34): the conversation so far goes with the partial reply as the assistant's
        prefix, and the text that comes is added to that reply, marked resumed in the
        conversation. False when there is nothing to continue (no reply cut by a lost worker,
        :meth:`interrupt_reply`; one the person stopped stays stopped) or no server now."""
        cut = self.conversation.last_interrupted
        if (cut is None or cut is not self._lost_reply or not cut.content or cut.left_out or self._send is None
                or self.busy()):
            return False
        messages = self._system_messages() + self.conversation.continuation_messages()
        self._append_note(self.tr("The reply goes on where it was cut:"))
        self._echo = EchoedPrefix(cut.content)
        self._begin_reply(resuming=True)
        return self._stream(messages)

    def _stream(self, messages: list[dict]) -> bool:
        """Send ``messages`` and stream the reply begun with :meth:`_begin_reply`."""
        params = {"temperature": self.temperature.value(), "max_tokens": self.max_tokens.value()}
        try:
            call = self._send(messages, params)
        except Exception as exc:  # noqa: BLE001 - shown in the pane
            self._end_reply(error=str(exc))
            return False
        self._call = call
        call.item.connect(self._on_event)
        # in words a person understands: the server's refusal as the core worded it, a network
        # failure as "the connection was cut off…", not the HTTP library's text
        call.failed.connect(lambda exc: self._end_reply(
            error=str(exc) if isinstance(exc, ChatError) else explain(exc)))
        call.cancelled.connect(lambda: self._end_reply(stopped=True))
        call.finished.connect(lambda _r: self._end_reply() if self.busy() else None)
        return True

    def send_input(self) -> None:
        """Send what the user typed (the box is emptied once it is sent)."""
        self.send_text(self.input.toPlainText())

    def apply_settings(self, system: str, temperature: float, max_tokens: int) -> None:
        """Show the remembered system prompt, temperature and reply length."""
        self.system_edit.setText(system)
        self.temperature.setValue(temperature)
        self.max_tokens.setValue(max_tokens)

    def chat_settings(self) -> dict:
        """``{"system", "temperature", "max_tokens"}`` as the user set them (to remember)."""
        return {"system": self.system_edit.text(), "temperature": self.temperature.value(),
                "max_tokens": self.max_tokens.value()}

    def request_messages(self) -> list[dict]:
        """What the next request sends: the system prompt (if any), then the conversation by
        the rules of :meth:`~gui.cluster.chat.conversation.Conversation.request_messages`."""
        return self._system_messages() + self.conversation.request_messages()

    def _system_messages(self) -> list[dict]:
        system = self.system_edit.text()
        return [{"role": "system", "content": system}] if system.strip() else []

    def interrupt_reply(self, reason: str) -> None:
        """Mark the reply in flight interrupted, with ``reason`` (a worker was lost): its text
        is kept, and the stream ending after this does not overwrite the reason. When the stream
        failed first (llama-server dies with the worker, before the loss is confirmed), the
        failed reply is given the reason, with the stream's error after it."""
        if self.conversation.streaming is not None:
            self._lost_reply = self.conversation.interrupt(reason)
            return
        last = self.conversation.messages[-1] if self.conversation.messages else None
        if last is not None and last is self._failed_reply:
            self._lost_reply = last
            if reason not in last.note:
                self.conversation.set_note(last, f"{reason} ({last.note})" if last.note else reason)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the conversation (system prompt first) and the reply stats, atomically and
        readable by the owner only (:meth:`~gui.cluster.chat.conversation.Conversation.save`)."""
        system = self.system_edit.text()
        head = [Message("system", system)] if system.strip() else []
        return Conversation(head + self.conversation.messages).save(path, extra={"stats": self.stats})

    def stop(self) -> None:
        """Stop the reply that is streaming (what arrived so far is kept), or the context check
        before a message goes (the message stays in the box)."""
        if self._checking is not None:
            self._checking.cancel()
        if self._call is not None:
            self._call.cancel()

    def new_chat(self) -> None:
        """Start a new conversation (after stopping any reply); the one before stays kept."""
        self.stop()
        self._hide_offer()
        if self.history is not None:
            self.history.let_go()
        self.conversation.clear()
        self.stats = []
        self.transcript.clear()
        self.status.clear()
        if self.history is not None:
            self.history.follow()

    def show_transcript(self) -> None:
        """Show the whole conversation again (a past chat opened): each reply as Markdown, a cut
        reply with why, a reply asked again after one marked so."""
        self.transcript.clear()
        messages = self.conversation.messages
        for i, m in enumerate(messages):
            if m.role == "system":
                continue
            if resumed(messages, i):
                self._append_note(self.tr("Asked again after the interrupted reply above."))
            self._append_message(m.role, m.content)
            if m.role == "assistant":
                cur = QTextCursor(self.transcript.document())
                cur.movePosition(QTextCursor.MoveOperation.End)
                self._reply_start = cur.position()
                self._render_reply(m.content)
            if m.interrupted:
                self._append_note(self.tr("Interrupted: %1").replace("%1", m.note or self.tr("no reason given")))
        self._to_bottom()

    def serving_model(self) -> str:
        """The model the pane's server serves (a file name), or "" when not known."""
        return getattr(self._send, "model", "") or ""

    def copy_last_reply(self) -> None:
        """Put the last reply's Markdown text on the clipboard."""
        for m in reversed(self.conversation.messages):
            if m.role == "assistant" and m.content:
                QGuiApplication.clipboard().setText(m.content)
                flash_copied(self.copy_button)
                return

    def last_stats(self) -> ReplyStats | None:
        """Stats of the reply that ended last."""
        return self._last_stats

    def reply_text(self) -> str:
        """The text of the reply streaming now (or of the last one)."""
        return "".join(self._reply_parts)

    # ------------------------------------------------------------ internals

    def _append_message(self, role: str, text: str) -> None:
        cur = self.transcript.textCursor()
        cur.movePosition(QTextCursor.MoveOperation.End)
        if not self.transcript.document().isEmpty():
            cur.insertBlock()
        head = QTextCharFormat()
        head.setFontWeight(QFont.Weight.Bold)
        cur.insertText(self.tr("You") if role == "user" else self.tr("Assistant"), head)
        cur.insertBlock(QTextBlockFormat(), QTextCharFormat())
        if role == "user":
            cur.insertText(text, QTextCharFormat())
        self.transcript.setTextCursor(cur)

    def _append_note(self, text: str) -> None:
        """A grey line in the transcript (not part of the conversation)."""
        cur = QTextCursor(self.transcript.document())
        cur.movePosition(QTextCursor.MoveOperation.End)
        fmt = QTextCharFormat()
        fmt.setForeground(QColor("#808080"))
        if not self.transcript.document().isEmpty():
            cur.insertBlock(QTextBlockFormat(), fmt)
        cur.insertText(text, fmt)

    def following(self) -> bool:
        """Whether the view follows the end of the conversation (False after the user scrolled up)."""
        return self._follow

    def _to_bottom(self) -> None:
        sb = self.transcript.verticalScrollBar()
        self._scrolling = True
        try:
            sb.setValue(sb.maximum())
        finally:
            self._scrolling = False

    def _on_scrolled(self, value: int) -> None:
        if self._scrolling:
            return
        # the user moved the view: follow again only once it is back at the bottom
        self._follow = value >= self.transcript.verticalScrollBar().maximum() - 4

    def _begin_reply(self, resuming: bool = False) -> None:
        self._follow = True  # a new question: show its answer
        self._append_message("assistant", "")
        cur = self.transcript.textCursor()
        cur.movePosition(QTextCursor.MoveOperation.End)
        self._reply_start = cur.position()
        self._reply_parts = []
        self._pending = []
        self._stats = ReplyStats(sent=time.perf_counter())
        if resuming:
            self.conversation.resume_reply()
        else:
            self._echo = None
            self.conversation.begin_reply()
        self.send_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.status.setText(self.tr("Waiting for the first token…"))
        self._flush.start()
        self.busyChanged.emit(True)

    def _on_event(self, ev: object) -> None:
        st = self._stats
        if st is None:
            return
        if isinstance(ev, ChatDelta) and self._echo is not None:
            ev = ChatDelta(self._echo.new_text(ev.text))
        if isinstance(ev, ChatDelta) and ev.text:
            now = time.perf_counter()
            if st.first is None:
                st.first = now
            st.last = now
            st.pieces += 1
            self._pending.append(ev.text)
            self._reply_parts.append(ev.text)
            if self.conversation.streaming is not None:  # (not after a lost worker interrupted it)
                self.conversation.append(ev.text)
        elif isinstance(ev, ChatDone):
            st.server_tps = ev.predicted_per_second
            st.finish_reason = ev.finish_reason

    def _flush_pending(self) -> None:
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        cur = QTextCursor(self.transcript.document())
        cur.movePosition(QTextCursor.MoveOperation.End)
        cur.insertText(text, QTextCharFormat())
        if self._follow:
            self._to_bottom()
        st = self._stats
        if st is not None and st.first is not None:
            tps = st.seen_tps()
            self.status.setText(self.tr("Streaming… %1 tokens").replace("%1", str(st.pieces))
                                + (f" · {tps:.0f} tok/s" if tps else "")
                                + (" — " + self._refusal if self._refusal else ""))

    def _end_reply(self, *, stopped: bool = False, error: str | None = None) -> None:
        st = self._stats
        if st is None:
            return
        self._flush.stop()
        self._flush_pending()
        self._stats = None
        held, self._refusal = bool(self._refusal), ""
        self._call = None
        text = "".join(self._reply_parts)
        self._failed_reply = None
        if self.conversation.streaming is not None:
            if stopped or error:  # marked, not dropped: the user saw it and may go on from it
                reply = self.conversation.interrupt(error or "stopped")
                self._failed_reply = reply if error else None
            else:
                self.conversation.finish(st.finish_reason)
        self._render_reply(text)
        self.stats.append({"tokens": st.pieces, "ttft_ms": st.ttft_ms(), "seen_tps": st.seen_tps(),
                           "server_tps": st.server_tps, "stopped": stopped, "error": error})
        self._append_footer(st, stopped, error)
        self._last_stats = st
        self.send_button.setEnabled(self._send is not None)
        self.stop_button.setEnabled(False)
        if error:
            self.status.setText(self.tr("The reply failed: %1").replace("%1", error))
        elif stopped:
            self.status.setText(self.tr("Stopped."))
        elif held and self.input.toPlainText().strip():
            self.status.setText(self.tr("Your message is still in the box: press Ctrl+Enter to send it."))
        else:
            self.status.clear()
        self.busyChanged.emit(False)
        self.replyFinished.emit(st)

    def _render_reply(self, text: str) -> None:
        # Replace the plain streamed text by its Markdown rendering, once per reply.
        doc = self.transcript.document()
        cur = QTextCursor(doc)
        cur.setPosition(self._reply_start)
        cur.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cur.removeSelectedText()
        if text:
            insert_reply_markdown(cur, text)  # no raw HTML, images as links (#32)
            self._shade_code_blocks(self._reply_start, cur.position())

    def _shade_code_blocks(self, start: int, end: int) -> None:
        doc = self.transcript.document()
        shade = self.palette().alternateBase().color()
        block = doc.findBlock(start)
        while block.isValid() and block.position() <= end:
            fmt = block.blockFormat()
            if fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.nonBreakableLines():
                fmt.setBackground(shade)
                QTextCursor(block).setBlockFormat(fmt)
            block = block.next()

    def _append_footer(self, st: ReplyStats, stopped: bool, error: str | None) -> None:
        parts = [self.tr("%1 tokens").replace("%1", str(st.pieces))]
        tps = st.seen_tps()
        if st.server_tps:
            parts.append(self.tr("%1 tok/s").replace("%1", f"{st.server_tps:.1f}"))
        elif tps:
            parts.append(self.tr("%1 tok/s").replace("%1", f"{tps:.1f}"))
        if st.ttft_ms() is not None:
            parts.append(self.tr("first token after %1 ms").replace("%1", f"{st.ttft_ms():.0f}"))
        if stopped:
            parts.append(self.tr("stopped"))
        if error:
            parts.append(self.tr("failed: %1").replace("%1", error))
        cur = QTextCursor(self.transcript.document())
        cur.movePosition(QTextCursor.MoveOperation.End)
        fmt = QTextCharFormat()
        fmt.setForeground(QColor("#808080"))
        small = QFont(self.font())
        small.setPointSizeF(max(6.0, small.pointSizeF() * 0.85))
        fmt.setFont(small)
        cur.insertBlock(QTextBlockFormat(), fmt)
        cur.insertText(" · ".join(parts), fmt)
        if self._follow:
            self._to_bottom()

    def _save_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, self.tr("Save chat history"), "chat.json",
                                              self.tr("Chat history (*.json)"))
        if path:
            try:
                self.save(path)
            except OSError as exc:
                QMessageBox.warning(self, self.tr("Save chat history"),
                                    self.tr("Could not save the history: %1").replace("%1", str(exc)))
