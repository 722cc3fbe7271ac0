"""The chat pane: talk to the cluster's llama-server, see how fast it answers.

The pane shows the core's :class:`~gui.cluster.chat.chat_state.ChatState` — the one conversation
of the app, the reply in progress with its stats, and the settings the next request goes with.
It renders what the :class:`~gui.cluster.chat.conversation.Conversation` tells its watchers and
never changes it by hand (#33): a reply cut off by a lost worker or by Stop is marked interrupted
there, with why, and the whole conversation is what the next question sends (so it goes on after
a relaunch on the surviving nodes). The pane never opens a connection itself. It is given a
*send* function (the app binds it to the bridge and :func:`gui.cluster.chat.client.stream_chat`)
that returns a :class:`gui.bridge.Call` whose ``item`` signal carries ``ChatDelta``/``ChatDone``
events.

Its jobs have homes of their own: drawing the conversation is the
:class:`~gui.widgets.transcript.Transcript`'s; the question box, Ctrl+Enter and the check that a
question fits the server's context (with the offer to leave out the oldest turns) are the
:class:`~gui.widgets.chat_input.ChatInput`'s. Nothing in the pane may grow wider than its place
because of a long message: the transcript and the input wrap unbroken text anywhere, and the
status and the note never ask for the width of their text.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gui.cluster.chat import conversation as conv
from gui.cluster.chat.chat_state import ChatState, ReplyStats
from gui.cluster.chat.client import ChatError
from gui.cluster.chat.conversation import Change, Conversation
from gui.cluster.chat.history import ChatStore
from gui.cluster.nodes.network_errors import explain
from gui.widgets.chat_history import ChatKeeper
from gui.widgets.chat_input import ChatInput, shrinkable
from gui.widgets.feedback import flash_copied
from gui.widgets.transcript import Transcript

SendFn = Callable[[list[dict], dict], object]


class ChatPane(QWidget):
    """Chat with the running cluster.

    Signals:
        replyFinished(object): a reply ended (``ReplyStats``), whether complete, stopped or failed.
        busyChanged(bool): a reply started or ended.

    Attributes:
        chat: the :class:`~gui.cluster.chat.chat_state.ChatState` shown (its ``conversation``,
            the reply in progress, ``stats`` of each reply, ``settings``).
        transcript: the :class:`~gui.widgets.transcript.Transcript` drawing the conversation.
        composer: the :class:`~gui.widgets.chat_input.ChatInput`; its ``input``, ``send_button``,
            ``stop_button``, ``context_note``, ``context_text``, ``drop_button`` and
            ``cancel_button`` are reachable on the pane too.
        history: with a chat store, the :class:`~gui.widgets.chat_history.ChatKeeper` that keeps
            every chat and lists the past ones above the transcript (``history.chats``); else None.
    """

    replyFinished = Signal(object)
    busyChanged = Signal(bool)

    def __init__(self, send: SendFn | None = None, parent: QWidget | None = None, *,
                 history: ChatStore | None = None) -> None:
        super().__init__(parent)
        self._send = send
        self._call = None
        self.chat = ChatState()
        self._build_settings()
        self.new_button = QPushButton(self.tr("New chat"))
        self.save_button = QPushButton(self.tr("Save history…"))
        self.copy_button = QPushButton(self.tr("Copy reply"))
        # loads no image, opens a link only after showing its address (#32)
        self.transcript = Transcript()
        self.composer = ChatInput(busy=self.busy, connected=lambda: self._send is not None)
        c = self.composer
        self.input, self.send_button, self.stop_button = c.input, c.send_button, c.stop_button
        self.context_note, self.context_text = c.context_note, c.context_text
        self.drop_button, self.cancel_button = c.drop_button, c.cancel_button
        self.status = shrinkable(QLabel())
        self.history = ChatKeeper(self, history) if history is not None else None
        self._lay_out()

        self.transcript.textShown.connect(self._show_progress)
        c.sendRequested.connect(self.send_input)
        c.stopRequested.connect(self.stop)
        c.fitChecked.connect(self._send_now)
        c.leaveOutRequested.connect(self._leave_out_and_send)
        c.said.connect(self.status.setText)
        self.new_button.clicked.connect(self.new_chat)
        self.save_button.clicked.connect(self._save_dialog)
        self.copy_button.clicked.connect(self.copy_last_reply)
        self._unwatch = self.chat.conversation.watch(self._on_change)
        self.destroyed.connect(lambda *_a, unwatch=self._unwatch: unwatch())
        self.set_available(send is not None)

    def _build_settings(self) -> None:
        """The system prompt, temperature and reply length, kept in ``chat.settings``."""
        settings = self.chat.settings
        self.system_edit = QLineEdit()
        self.system_edit.setPlaceholderText(self.tr("System prompt (optional)"))
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(0.0, 2.0)
        self.temperature.setSingleStep(0.1)
        self.temperature.setValue(settings.temperature)
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 32768)
        self.max_tokens.setValue(settings.max_tokens)
        self.system_edit.textChanged.connect(lambda text: setattr(settings, "system", text))
        self.temperature.valueChanged.connect(lambda value: setattr(settings, "temperature", value))
        self.max_tokens.valueChanged.connect(lambda value: setattr(settings, "max_tokens", value))

    def _lay_out(self) -> None:
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
        lay = QVBoxLayout(self)
        lay.addWidget(self.system_edit)
        lay.addLayout(opts)
        # past chats above the transcript (#36)
        lay.addWidget(self.transcript if self.history is None else self.history.above(self.transcript), 1)
        lay.addWidget(self.context_note)
        lay.addLayout(actions)
        lay.addWidget(self.composer)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        # Coming to the chat (its tab clicked) is coming to ask something: the keyboard goes to
        # the question box, one click less to the first question. Not when another field of the
        # pane was being typed in (the system prompt, a number): it gets the keyboard back.
        super().showEvent(event)
        if not isinstance(self.focusWidget(), QLineEdit):  # (a spin box types into one too)
            self.input.setFocus(Qt.FocusReason.OtherFocusReason)

    # ----------------------------------------------------------------- API

    @property
    def conversation(self) -> Conversation:
        """The conversation shown (``chat.conversation``)."""
        return self.chat.conversation

    @property
    def stats(self) -> list[dict]:
        """What was measured about each reply, in order (``chat.stats``)."""
        return self.chat.stats

    @property
    def reply_stats(self) -> ReplyStats | None:
        """What is measured about the reply streaming now (None when none streams)."""
        return self.chat.reply.stats if self.chat.reply is not None else None

    # (tests written before the split read the reply's stats under this name)
    _stats = reply_stats

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
        return self.chat.reply is not None or self.composer.checking()

    def send_text(self, text: str) -> bool:
        """Send ``text`` as the user's next message; False if not possible now.

        When the send function can check the context (``fit``), the conversation is measured
        first; a message that does not fit is held back with :attr:`context_note` shown.
        """
        text = text.strip()
        if not text or self._send is None or self.busy():
            return False
        self.composer.hide_offer()
        fit = getattr(self._send, "fit", None)
        if fit is None:
            return self._send_now(text)
        messages = self.request_messages() + [{"role": "user", "content": text}]
        try:
            call = fit(messages, self.max_tokens.value())
        except Exception:  # noqa: BLE001 - no check possible: the server's own answer will say
            return self._send_now(text)
        self.composer.check(text, call)
        return True

    def leave_out_and_send(self) -> None:
        """Send the held-back message without the oldest turns the check said to leave out."""
        self.composer.leave_out_and_send()

    def cancel_held(self) -> None:
        """Do not send the held-back message; it stays in the input box."""
        self.composer.cancel_held()

    def _leave_out_and_send(self, text: str, turns: int) -> None:
        count = self.chat.leave_out_turns(turns)
        self.transcript.add_note(self.tr("%1 earlier messages are no longer sent, so the conversation fits "
                                         "the server's context.").replace("%1", str(count)))
        self._send_now(text)

    def _send_now(self, text: str) -> bool:
        if self.input.toPlainText().strip() == text:
            self.input.clear()  # it is in the transcript now
        return self._stream(self.chat.ask(text))

    def resume_reply(self) -> bool:
        """Continue the last reply where it stopped, when a lost worker cut it (after the
        relaunch, #34): the conversation so far goes with the partial reply as the assistant's
        prefix, and the text that comes is added to that reply, marked resumed in the
        conversation; the reply's length (max tokens) counts what it had before the cut. False when there is nothing to continue (no reply cut by a lost worker,
        :meth:`~gui.cluster.chat.conversation.Conversation.mark_cut`; one the person stopped
        stays stopped) or no server now."""
        if self._send is None or self.busy():
            return False
        messages = self.chat.resume()
        return messages is not None and self._stream(messages)

    def _stream(self, messages: list[dict]) -> bool:
        """Send ``messages`` and stream the reply the conversation has begun."""
        self.send_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.status.setText(self.tr("Waiting for the first token…"))
        self.busyChanged.emit(True)
        try:
            call = self._send(messages, self.chat.settings.params())
        except Exception as exc:  # noqa: BLE001 - shown in the pane
            self._end_reply(error=str(exc))
            return False
        self._call = call
        call.item.connect(self.chat.take)
        # in words a person understands: the server's refusal as the core worded it, a network
        # failure as "the connection was cut off…", not the HTTP library's text
        call.failed.connect(lambda exc: self._end_reply(
            error=str(exc) if isinstance(exc, ChatError) else explain(exc)))
        call.cancelled.connect(lambda: self._end_reply(stopped=True))
        call.finished.connect(lambda _r: self._end_reply())
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
        s = self.chat.settings
        return {"system": s.system, "temperature": s.temperature, "max_tokens": s.max_tokens}

    def request_messages(self) -> list[dict]:
        """What the next request sends (:meth:`~gui.cluster.chat.chat_state.ChatState.request_messages`)."""
        return self.chat.request_messages()

    def interrupt_reply(self, reason: str) -> None:
        """A worker was lost: the reply it cut is marked on the conversation, with ``reason``
        (:meth:`~gui.cluster.chat.conversation.Conversation.mark_cut`); the pane shows it."""
        self.conversation.mark_cut(reason)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the conversation (system prompt first) and the reply stats, atomically and
        readable by the owner only (:meth:`~gui.cluster.chat.chat_state.ChatState.save`)."""
        return self.chat.save(path)

    def stop(self) -> None:
        """Stop the reply that is streaming (what arrived so far is kept), or the context check
        before a message goes (the message stays in the box)."""
        self.composer.cancel_check()
        if self._call is not None:
            self._call.cancel()

    def new_chat(self) -> None:
        """Start a new conversation (after stopping any reply); the one before stays kept."""
        self.stop()
        self.composer.hide_offer()
        if self.history is not None:
            self.history.let_go()
        self.chat.new_chat()  # the transcript empties itself (CLEARED)
        self.status.clear()
        if self.history is not None:
            self.history.follow()

    def show_transcript(self) -> None:
        """Show the whole conversation again (a past chat opened)."""
        self.transcript.show_conversation(self.conversation.messages)

    def serving_model(self) -> str:
        """The model the pane's server serves (a file name), or "" when not known."""
        return getattr(self._send, "model", "") or ""

    def copy_last_reply(self) -> None:
        """Put the last reply's Markdown text on the clipboard."""
        text = self.chat.last_reply_text()
        if text:
            QGuiApplication.clipboard().setText(text)
            flash_copied(self.copy_button)

    def last_stats(self) -> ReplyStats | None:
        """Stats of the reply that ended last."""
        return self.chat.last_stats

    def reply_text(self) -> str:
        """The text of the reply streaming now (or of the last one)."""
        return self._reply_text

    def following(self) -> bool:
        """Whether the view follows the end of the conversation (False after the user scrolled up)."""
        return self.transcript.following()

    # ------------------------------------------------------------ internals

    _reply_text = ""  # what the reply streaming now (or the last one) added, as shown

    def _on_change(self, change: Change) -> None:
        """Draw what changed in the conversation (#33)."""
        kind, message = change.kind, change.message
        if kind == conv.ADDED and message.role == "user":
            self.transcript.add_message("user", message.content)
        elif kind == conv.ADDED and message.role == "assistant":
            self._reply_text = ""
            self.transcript.begin_reply()
        elif kind == conv.RESUMED:
            self._reply_text = ""
            self.transcript.add_note(self.tr("The reply goes on where it was cut:"))
            self.transcript.begin_reply()
        elif kind == conv.TEXT:
            self._reply_text += change.text
            self.transcript.stream_text(change.text)
        elif kind in (conv.FINISHED, conv.CUT):
            self.transcript.end_reply()
        elif kind == conv.CLEARED:
            self.transcript.clear()
        elif kind == conv.OPENED:
            self.show_transcript()

    def _show_progress(self) -> None:
        st = self.reply_stats
        if st is not None and st.first is not None:
            tps = st.seen_tps()
            refusal = self.composer.refusal
            self.status.setText(self.tr("Streaming… %1 tokens").replace("%1", str(st.pieces))
                                + (f" · {tps:.0f} tok/s" if tps else "")
                                + (" — " + refusal if refusal else ""))

    def _end_reply(self, *, stopped: bool = False, error: str | None = None) -> None:
        st = self.chat.end_reply(stopped=stopped, error=error)
        if st is None:
            return
        held, self.composer.refusal = bool(self.composer.refusal), ""
        self._call = None
        self.transcript.end_reply()  # (drawn already when a lost worker cut it)
        self.transcript.add_footer(st, stopped, error)
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

    def _save_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, self.tr("Save chat history"), "chat.json",
                                              self.tr("Chat history (*.json)"))
        if path:
            try:
                self.save(path)
            except OSError as exc:
                QMessageBox.warning(self, self.tr("Save chat history"),
                                    self.tr("Could not save the history: %1").replace("%1", str(exc)))
