"""What the chat pane shows and sends, Qt-free: the conversation, the reply in progress with its
stats, and the settings the next request goes with (#33).

The chat pane used to own its :class:`~gui.cluster.chat.conversation.Conversation` and change it
by hand. Now :class:`ChatState` holds it and is the only one that changes it for the pane: a
question asked (:meth:`ChatState.ask`), text arriving (:meth:`ChatState.take`), the reply's end
(:meth:`ChatState.end_reply`), a cut reply continued (:meth:`ChatState.resume`). The pane
renders what the conversation tells its watchers (:meth:`Conversation.watch`) and shows the
measured :class:`ReplyStats`; the failover marks a cut reply on the conversation itself
(:meth:`Conversation.mark_cut`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gui.cluster.chat.client import ChatDelta, ChatDone
from gui.cluster.chat.continuation import EchoedPrefix, resume_request
from gui.cluster.chat.conversation import Conversation, Message


@dataclass
class ReplyStats:
    """What was measured about one reply (times from ``time.perf_counter``).

    Attributes:
        sent: when the request left.
        first: when the first text arrived, or None.
        last: when the latest text arrived.
        pieces: how many text pieces (≈ tokens: llama-server streams one token per event) arrived.
        server_tps: llama-server's own ``predicted_per_second`` for the reply, when it said.
        finish_reason: the server's ``finish_reason``, when it said.
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


@dataclass
class ChatSettings:
    """What the next request goes with, as the person set it.

    Attributes:
        system: the system prompt ("" or blanks: none).
        temperature: the sampling temperature.
        max_tokens: the longest reply, in tokens.
    """

    system: str = ""
    temperature: float = 0.8
    max_tokens: int = 256

    def system_messages(self) -> list[dict]:
        """The system prompt as the request's first message (none when it is blank)."""
        return [{"role": "system", "content": self.system}] if self.system.strip() else []

    def params(self) -> dict:
        """The request's sampling parameters."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens}


@dataclass
class ReplyInProgress:
    """The reply streaming now.

    Attributes:
        message: its message in the conversation.
        stats: what is measured about it.
        echo: for a continued reply, what takes the prefix llama-server sends back first off
            the text (#34); None for a new reply.
        parts: the pieces of text it added to its message, in order.
    """

    message: Message
    stats: ReplyStats
    echo: EchoedPrefix | None = None
    parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The text this reply added to its message (for a continued one: the new text only)."""
        return "".join(self.parts)


class ChatState:
    """The chat pane's state (see the module docstring).

    Attributes:
        conversation: the :class:`~gui.cluster.chat.conversation.Conversation` shown.
        settings: the :class:`ChatSettings` the next request goes with.
        reply: the :class:`ReplyInProgress`, or None when no reply streams.
        last_stats: the :class:`ReplyStats` of the reply that ended last, or None.
        stats: one record per reply, in order (tokens, time to first token, tokens/s as seen
            and as llama-server counted them, stopped, error), saved beside the conversation.
    """

    def __init__(self, conversation: Conversation | None = None, *,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.conversation = conversation if conversation is not None else Conversation()
        self.settings = ChatSettings()
        self.reply: ReplyInProgress | None = None
        self.last_stats: ReplyStats | None = None
        self.stats: list[dict] = []
        self._clock = clock

    def request_messages(self) -> list[dict]:
        """What the next request sends: the system prompt (if any), then the conversation by
        the rules of :meth:`~gui.cluster.chat.conversation.Conversation.request_messages`."""
        return self.settings.system_messages() + self.conversation.request_messages()

    def ask(self, text: str) -> list[dict]:
        """Add ``text`` as the person's message and begin the reply to it; returns what the
        request sends."""
        self.conversation.add_user(text)
        self._begin(self.conversation.begin_reply(), None)
        return self.request_messages()

    def resume(self) -> list[dict] | None:
        """Continue the reply a lost worker cut, where it stopped (#34): returns what the request
        sends (the conversation so far with the partial reply as the assistant's prefix), or
        None when there is nothing to continue (:func:`gui.cluster.chat.continuation.resume_request`)."""
        messages = resume_request(self.conversation) if self.reply is None else None
        if messages is None:
            return None
        prefix = self.conversation.resumable.content
        self._begin(self.conversation.resume_reply(), EchoedPrefix(prefix))
        return self.settings.system_messages() + messages

    def _begin(self, message: Message, echo: EchoedPrefix | None) -> None:
        self.reply = ReplyInProgress(message, ReplyStats(sent=self._clock()), echo)

    def take(self, event: object) -> None:
        """One event of the reply's stream (``ChatDelta``/``ChatDone``): text goes on the reply
        (unless a lost worker cut it meanwhile) and is measured."""
        reply = self.reply
        if reply is None:
            return
        if isinstance(event, ChatDelta):
            text = reply.echo.new_text(event.text) if reply.echo is not None else event.text
            if not text:
                return
            st = reply.stats
            st.last = self._clock()
            if st.first is None:
                st.first = st.last
            st.pieces += 1
            if self.conversation.streaming is reply.message:  # not after a lost worker cut it
                reply.parts.append(text)
                self.conversation.append(text)
        elif isinstance(event, ChatDone):
            reply.stats.server_tps = event.predicted_per_second
            reply.stats.finish_reason = event.finish_reason

    def end_reply(self, *, stopped: bool = False, error: str | None = None) -> ReplyStats | None:
        """The reply's stream ended: complete, stopped by the person, or failed with ``error``
        (in words). A reply that did not run to its end is marked, not dropped: the person saw
        it and may go on from it. Returns its stats (None when no reply was streaming)."""
        reply, self.reply = self.reply, None
        if reply is None:
            return None
        st = reply.stats
        if self.conversation.streaming is reply.message:
            if error:
                self.conversation.fail(error)
            elif stopped:
                self.conversation.interrupt("stopped")
            else:
                self.conversation.finish(st.finish_reason)
        self.stats.append({"tokens": st.pieces, "ttft_ms": st.ttft_ms(), "seen_tps": st.seen_tps(),
                           "server_tps": st.server_tps, "stopped": stopped, "error": error})
        self.last_stats = st
        return st

    def leave_out_turns(self, turns: int) -> int:
        """Stop sending the oldest ``turns`` turns; returns how many messages no longer go
        (:meth:`~gui.cluster.chat.conversation.Conversation.leave_out_turns`)."""
        return self.conversation.leave_out_turns(turns)

    def new_chat(self) -> None:
        """Forget the conversation and its stats (a new chat; the reply must have ended)."""
        self.conversation.clear()
        self.stats = []

    def last_reply_text(self) -> str:
        """The last reply with text, as the model wrote it (Markdown), or ""."""
        for m in reversed(self.conversation.messages):
            if m.role == "assistant" and m.content:
                return m.content
        return ""

    def save(self, path: str | os.PathLike) -> Path:
        """Write the conversation (system prompt first) and the reply stats, atomically and
        readable by the owner only (:meth:`~gui.cluster.chat.conversation.Conversation.save`)."""
        system = self.settings.system
        head = [Message("system", system)] if system.strip() else []
        return Conversation(head + self.conversation.messages).save(path, extra={"stats": self.stats})
