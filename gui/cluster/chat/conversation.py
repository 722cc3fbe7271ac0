"""A chat transcript that survives a lost worker: what the chat pane and ``herd`` show and send.

A :class:`Conversation` is a list of :class:`Message` with a state each:

* ``complete`` — a user or system message, or a reply that ran to its end;
* ``streaming`` — the reply arriving now;
* ``interrupted`` — a reply cut off (a worker was lost, the server stopped, the user
  cancelled). It keeps the text that arrived and says why (``note``): it is marked, never dropped.

:meth:`Conversation.request_messages` is what goes to the server next: the whole conversation so
far (interrupted replies included with the text the user saw, unless a retry replaced them).
After the cluster was relaunched on the surviving nodes the new llama-server has an empty
cache, so sending the whole conversation is exactly what lets the user continue where they
were. :func:`send` streams one reply into the transcript, :func:`retry` asks the question of an
interrupted reply again, and :func:`resume` continues the interrupted reply where it stopped: the
conversation so far with the partial reply as the assistant's prefix
(:mod:`gui.cluster.chat.continuation`); the reply is then marked ``resumed`` (#34).

A conversation can outgrow the server's context. :func:`check_context` measures the next
request with the server's own tokenizer against the context of one slot, leaving room for the
reply; when it does not fit, it says how many of the oldest turns to leave out
(:meth:`Conversation.leave_out_turns`, the system prompt is always kept) and
:meth:`ContextFit.describe` says it in words. Left-out messages stay on screen and in the saved
file, marked; they are only no longer sent.

The transcript is Qt-free and owns its changes: views and the history recorder follow it, never
change it by hand (#33). :meth:`Conversation.watch` tells each :class:`Change` by its kind (a
message added, text arrived, a reply finished, cut, resumed, …); :meth:`Conversation.subscribe`
tells only which message changed. When a worker is lost, the failover marks the reply it cut on
the conversation (:meth:`Conversation.mark_cut`), and only that reply may be continued
(:attr:`Conversation.resumable`, read by :func:`gui.cluster.chat.continuation.resume_request`); a
reply the person stopped stays stopped. It is saved atomically on request
(:meth:`Conversation.save`) and a corrupt file is set aside when loading.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from agent.files import parse_json_object, read_or_set_aside, write_json_atomic
from agent.i18n import translate
from gui.cluster.chat.continuation import EchoedPrefix, continuation_messages, continuation_params
from gui.cluster.chat.client import (
    ChatDelta,
    ChatDone,
    ChatError,
    context_per_slot,
    count_prompt_tokens,
    stream_chat,
)

COMPLETE = "complete"
STREAMING = "streaming"
INTERRUPTED = "interrupted"
STATES = (COMPLETE, STREAMING, INTERRUPTED)
ROLES = ("system", "user", "assistant")
FILE_VERSION = 1

# The kinds of :class:`Change` (#33).
ADDED = "added"          # a message was added at ``index``
TEXT = "text"            # text arrived on the streaming reply (``Change.text``)
FINISHED = "finished"    # the streaming reply ran to its end
CUT = "cut"              # a reply was marked interrupted (stopped, failed, or a worker was lost)
RESUMED = "resumed"      # a cut reply streams again, its new text added after the old
NOTED = "noted"          # why a cut reply was cut was told after the fact
LEFT_OUT = "left_out"    # a message is no longer sent (so the conversation fits the context)
CLEARED = "cleared"      # every message was forgotten (a new chat)
OPENED = "opened"        # the messages were replaced by kept ones (a past chat opened)


class ReplyInterrupted(RuntimeError):
    """A reply stopped before its end; the transcript already marks it (``message.note``)."""

    def __init__(self, message: "Message") -> None:
        super().__init__(message.note or "the reply was interrupted")
        self.message = message


@dataclass
class Message:
    """One message of the transcript.

    Attributes:
        role: ``system``, ``user`` or ``assistant``.
        content: its text (for a streaming or interrupted reply: what arrived so far).
        state: ``complete``, ``streaming`` or ``interrupted``.
        note: why a reply was interrupted, in words (empty otherwise).
        finish_reason: the server's ``finish_reason`` for a complete reply (``stop``, ``length``).
        created: UNIX time the message was added.
        left_out: no longer sent to the server (left out so the conversation fits its context).
        resumed: the reply was cut and continued where it stopped (#34); ``note`` keeps why it
            was cut.
    """

    role: str
    content: str = ""
    state: str = COMPLETE
    note: str = ""
    finish_reason: str | None = None
    created: float = field(default_factory=time.time)
    left_out: bool = False
    resumed: bool = False

    @property
    def interrupted(self) -> bool:
        return self.state == INTERRUPTED

    def to_json(self) -> dict:
        return {"role": self.role, "content": self.content, "state": self.state, "note": self.note,
                "finish_reason": self.finish_reason, "created": self.created, "left_out": self.left_out,
                "resumed": self.resumed}

    @classmethod
    def from_json(cls, d: dict) -> "Message":
        """Raises ValueError naming what is wrong."""
        if not isinstance(d, dict):
            raise ValueError("a message is not an object")
        role, content, state = d.get("role"), d.get("content", ""), d.get("state", COMPLETE)
        if role not in ROLES:
            raise ValueError(f"message role {role!r} is not one of {', '.join(ROLES)}")
        if not isinstance(content, str):
            raise ValueError("message content is not text")
        if state not in STATES:
            raise ValueError(f"message state {state!r} is not one of {', '.join(STATES)}")
        note = d.get("note") or ""
        if state == STREAMING:  # saved mid-reply: that reply will never finish now
            state, note = INTERRUPTED, note or "the app stopped while this reply was arriving"
        finish = d.get("finish_reason")
        created = d.get("created", 0.0)
        return cls(role=role, content=content, state=state, note=str(note),
                   finish_reason=finish if isinstance(finish, str) else None,
                   created=float(created) if isinstance(created, (int, float)) else 0.0,
                   left_out=d.get("left_out") is True, resumed=d.get("resumed") is True)


@dataclass(frozen=True)
class Change:
    """One change of a :class:`Conversation`, as :meth:`Conversation.watch` tells it (#33).

    Attributes:
        kind: what happened: ``ADDED``, ``TEXT``, ``FINISHED``, ``CUT``, ``RESUMED``, ``NOTED``,
            ``LEFT_OUT`` (one message each), ``CLEARED`` or ``OPENED`` (the whole conversation).
        index: the message's place in ``Conversation.messages`` (-1 for the whole conversation).
        message: the message that changed (None for the whole conversation).
        text: for ``TEXT``, the text that arrived (else "").
    """

    kind: str
    index: int = -1
    message: Message | None = None
    text: str = ""


class Conversation:
    """The transcript (see the module docstring).

    Attributes:
        messages: the messages, oldest first.
        cut: the reply a lost worker cut (:meth:`mark_cut`); None when no reply was cut that
            way (or the conversation was cleared).

    ``watch(callback)`` registers ``callback(change)`` (a :class:`Change`) for every change;
    ``subscribe(callback)`` registers ``callback(index, message)``, called whenever a message is
    added or changes (text arrives, it completes or is interrupted).
    """

    def __init__(self, messages: list[Message] | None = None) -> None:
        self.messages: list[Message] = list(messages or [])
        self.cut: Message | None = None
        self._failed: Message | None = None  # the last reply whose stream failed (fail)
        self._watchers: list[Callable[[Change], None]] = []

    def watch(self, callback: Callable[[Change], None]) -> Callable[[], None]:
        """Call ``callback(change)`` on every change; returns the function that stops it."""
        self._watchers.append(callback)
        return lambda: self._watchers.remove(callback) if callback in self._watchers else None

    def subscribe(self, callback: Callable[[int, Message], None]) -> Callable[[], None]:
        """Call ``callback(index, message)`` whenever a message is added or changes; returns the
        unsubscribe function. (Clearing and opening, which change no one message, are not told.)"""
        def on_change(change: Change) -> None:
            if change.message is not None:
                callback(change.index, change.message)
        return self.watch(on_change)

    def _tell(self, change: Change) -> None:
        for cb in list(self._watchers):
            cb(change)

    def _changed(self, index: int, kind: str, text: str = "") -> None:
        self._tell(Change(kind, index, self.messages[index], text))

    def _add(self, message: Message) -> Message:
        self.messages.append(message)
        self._changed(len(self.messages) - 1, ADDED)
        return message

    # --- building -----------------------------------------------------------------------------

    def add_system(self, text: str) -> Message:
        """Add a system prompt."""
        return self._add(Message("system", text))

    def add_user(self, text: str) -> Message:
        """Add what the user typed."""
        if self.streaming is not None:
            raise RuntimeError("a reply is still arriving; wait for it or interrupt it first")
        return self._add(Message("user", text))

    def begin_reply(self) -> Message:
        """Start a streaming assistant reply."""
        if self.streaming is not None:
            raise RuntimeError("a reply is already arriving")
        self._failed = None
        return self._add(Message("assistant", "", STREAMING))

    def append(self, text: str) -> None:
        """Add arriving text to the streaming reply."""
        msg = self._need_streaming()
        msg.content += text
        self._changed(self.messages.index(msg), TEXT, text)

    def finish(self, finish_reason: str | None = None) -> Message:
        """The streaming reply ran to its end."""
        msg = self._need_streaming()
        msg.state, msg.finish_reason = COMPLETE, finish_reason
        self._changed(self.messages.index(msg), FINISHED)
        return msg

    def interrupt(self, reason: str) -> Message | None:
        """Mark the streaming reply (if any) interrupted, keeping its text; returns it."""
        msg = self.streaming
        if msg is None:
            return None
        msg.state, msg.note = INTERRUPTED, reason
        self._changed(self.messages.index(msg), CUT)
        return msg

    def fail(self, error: str) -> Message | None:
        """The streaming reply's stream failed with ``error`` (in words): it is marked interrupted,
        and remembered, so a lost worker confirmed after the failure is still marked on it
        (:meth:`mark_cut`)."""
        self._failed = self.interrupt(error)
        return self._failed

    def mark_cut(self, reason: str) -> Message | None:
        """A lost worker cut the reply in flight: mark it interrupted with ``reason`` (its text is
        kept, and the stream ending after this does not overwrite the reason) and remember it as
        the one that may go on where it stopped (:attr:`resumable`, #34). When its stream failed
        first (llama-server dies with the worker, before the loss is confirmed), the failed reply
        is given the reason, with the stream's error after it. Returns the reply, or None when no
        reply was in flight."""
        if self.streaming is not None:
            self.cut = self.interrupt(reason)
            return self.cut
        last = self.messages[-1] if self.messages else None
        if last is None or last is not self._failed or not last.interrupted:
            return None
        self.cut = last
        if reason not in last.note:
            self.set_note(last, f"{reason} ({last.note})" if last.note else reason)
        return last

    @property
    def resumable(self) -> Message | None:
        """The reply a lost worker cut when it can go on where it stopped: the last message,
        with text, still sent (not left out); None otherwise (one the person stopped stays
        stopped)."""
        cut = self.last_interrupted
        if cut is None or cut is not self.cut or not cut.content or cut.left_out:
            return None
        return cut

    def set_note(self, message: Message, note: str) -> None:
        """Say why ``message`` (an interrupted reply) was cut, after the fact: a lost worker is
        confirmed after the stream already failed. Subscribers are told, so the kept history has
        the mark too (#36)."""
        message.note = note
        self._changed(self.messages.index(message), NOTED)

    def resume_reply(self) -> Message:
        """The last interrupted reply streams again, marked ``resumed``: text that arrives is
        added after what it already had (#34). It stays :attr:`cut`: when continuing it fails
        (the server is not back yet), it may be continued again."""
        msg = self.last_interrupted
        if msg is None:
            raise RuntimeError("the last message is not an interrupted reply")
        msg.state, msg.resumed = STREAMING, True
        self._failed = None
        self._changed(self.messages.index(msg), RESUMED)
        return msg

    def leave_out_turns(self, turns: int) -> int:
        """Stop sending the oldest ``turns`` turns (a user message and the replies to it) so the
        conversation fits the server's context; system messages are always sent. Returns how
        many messages were left out. The messages stay in the transcript, marked ``left_out``."""
        users = [i for i, m in enumerate(self.messages) if m.role == "user" and not m.left_out]
        if turns <= 0 or not users:
            return 0
        end = users[turns] if turns < len(users) else len(self.messages)
        count = 0
        for i, m in enumerate(self.messages[:end]):
            if m.role != "system" and m.state != STREAMING and not m.left_out:
                m.left_out = True
                count += 1
                self._changed(i, LEFT_OUT)
        return count

    def clear(self) -> None:
        """Forget every message (a new chat). Watchers are told (``CLEARED``); subscribers are
        not: one that keeps the conversation (a :class:`~gui.cluster.chat.history.ChatRecorder`)
        is closed first."""
        self.messages.clear()
        self.cut = self._failed = None
        self._tell(Change(CLEARED))

    def open(self, messages: list[Message]) -> None:
        """Show kept ``messages`` in place of these (a past chat opened, to go on with it).
        Watchers are told (``OPENED``); subscribers are not (the messages are kept already)."""
        self.messages[:] = messages
        self.cut = self._failed = None
        self._tell(Change(OPENED))

    def _need_streaming(self) -> Message:
        msg = self.streaming
        if msg is None:
            raise RuntimeError("no reply is arriving")
        return msg

    # --- reading ------------------------------------------------------------------------------

    @property
    def streaming(self) -> Message | None:
        """The reply arriving now, if any."""
        last = self.messages[-1] if self.messages else None
        return last if last is not None and last.state == STREAMING else None

    @property
    def last_interrupted(self) -> Message | None:
        """The last message when it is an interrupted reply (what :func:`retry` answers again)."""
        last = self.messages[-1] if self.messages else None
        return last if last is not None and last.interrupted else None

    def request_messages(self) -> list[dict]:
        """The conversation so far as OpenAI ``messages``, for the next request.

        Streaming replies are left out (they are being produced). An interrupted reply is sent
        with the text that arrived — the user saw it and may refer to it — unless it is the last
        message (the question is asked again instead, see :func:`retry`) or a later reply to the
        same question replaced it. Messages left out to fit the context are not sent.
        """
        out: list[dict] = []
        msgs = self.messages
        for i, m in enumerate(msgs):
            if m.state == STREAMING or m.left_out:
                continue
            if m.interrupted:
                nxt = msgs[i + 1] if i + 1 < len(msgs) else None
                if nxt is None or nxt.role == "assistant" or not m.content:
                    continue
            out.append({"role": m.role, "content": m.content})
        return out

    def continuation_messages(self) -> list[dict]:
        """What continues the last interrupted reply: the conversation before it, then its text
        as the assistant's prefix (:func:`gui.cluster.chat.continuation.continuation_messages`)."""
        msg = self.last_interrupted
        if msg is None or not msg.content:
            raise RuntimeError("the last message is not an interrupted reply with text")
        return continuation_messages(self.request_messages(), msg.content)

    # --- files --------------------------------------------------------------------------------

    def to_json(self) -> dict:
        return {"version": FILE_VERSION, "messages": [m.to_json() for m in self.messages]}

    def save(self, path: str | Path, extra: dict | None = None) -> Path:
        """Write the transcript atomically (owner-only: chats are private). ``extra`` keys (the
        chat pane's per-reply stats) are stored beside the messages; :meth:`load` ignores them."""
        return write_json_atomic(path, {**(extra or {}), **self.to_json()}, 0o600)

    @classmethod
    def load(cls, path: str | Path) -> "Conversation":
        """Read a saved transcript (an empty one if the file does not exist).

        A file that is not a transcript is set aside and :class:`~agent.files.CorruptFile`
        raised; a reply saved while streaming comes back interrupted.
        """
        def parse(raw: bytes) -> Conversation:
            data = parse_json_object(raw)
            if data.get("version") != FILE_VERSION:
                raise ValueError(f"unknown transcript version {data.get('version')!r}")
            msgs = data.get("messages")
            if not isinstance(msgs, list):
                raise ValueError("no message list")
            return cls([Message.from_json(m) for m in msgs])
        return read_or_set_aside(path, parse, missing=cls)


# Room kept for the reply: the user's "max tokens", but never more than this share of the context,
# so a reply limit set higher than the whole context does not make every message "too long".
REPLY_ROOM_SHARE = 0.5


def reply_room(context: int, max_tokens: int) -> int:
    """Tokens to keep free for the reply in a context of ``context`` tokens."""
    return max(0, min(max_tokens, int(context * REPLY_ROOM_SHARE)))


@dataclass(frozen=True)
class ContextFit:
    """Whether the next request fits the server's context (see :func:`check_context`).

    Attributes:
        tokens: the request's length in the server's tokens.
        context: the context of one slot (what one conversation may hold), in tokens.
        room: tokens kept free for the reply.
        drop_turns: the oldest turns to leave out so it fits: 0 when it fits as it is, None
            when even the system prompt and the last message alone do not fit.
        tokens_after: the request's length once those turns are left out (``tokens`` when none).
    """

    tokens: int
    context: int
    room: int
    drop_turns: int | None
    tokens_after: int

    @property
    def limit(self) -> int:
        """The most tokens the request may take."""
        return self.context - self.room

    @property
    def fits(self) -> bool:
        """The request fits as it is."""
        return self.drop_turns == 0

    def describe(self) -> str:
        """Why the message is not sent yet and what can be done, in words (empty if it fits)."""
        if self.fits:
            return ""
        head = translate("ChatContext", "This conversation is {tokens} tokens long; the server holds "
                         "{context} per conversation, of which {room} are kept for the reply, so "
                         "{limit} fit.").format(tokens=self.tokens, context=self.context,
                                                room=self.room, limit=self.limit)
        if self.drop_turns is None:
            return head + " " + translate("ChatContext", "Your message alone does not fit: shorten it, lower "
                                          "Max tokens, or start the cluster with a larger context.")
        return head + " " + translate("ChatContext", "Leaving out the oldest {turns} turn(s) brings it to "
                                      "{after} tokens (the system prompt is kept).").format(
            turns=self.drop_turns, after=self.tokens_after)


def _without_turns(messages: list[dict], turns: int) -> list[dict]:
    """``messages`` without the oldest ``turns`` turns (system messages kept)."""
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    end = users[turns] if turns < len(users) else len(messages)
    return [m for i, m in enumerate(messages) if i >= end or m["role"] == "system"]


async def check_context(client: httpx.AsyncClient, base_url: str, messages: list[dict],
                        max_tokens: int) -> ContextFit:
    """Does the request ``messages`` (the last one the user's new message) fit the server's
    context with room for a reply of ``max_tokens``? Counted by the server itself; when it
    does not fit, the fewest oldest turns to leave out are found (by bisection: the length only
    shrinks as turns go)."""
    context = await context_per_slot(client, base_url)
    room = reply_room(context, max_tokens)
    limit = context - room
    tokens = await count_prompt_tokens(client, base_url, messages)
    if tokens <= limit:
        return ContextFit(tokens, context, room, 0, tokens)
    # turns that may go: all but the last (the message being sent)
    spare = max(0, sum(1 for m in messages if m["role"] == "user") - 1)
    counts = {0: tokens}

    async def count(turns: int) -> int:
        if turns not in counts:
            counts[turns] = await count_prompt_tokens(client, base_url, _without_turns(messages, turns))
        return counts[turns]

    if spare == 0 or await count(spare) > limit:
        return ContextFit(tokens, context, room, None, counts.get(spare, tokens))
    lo, hi = 0, spare  # count(lo) > limit, count(hi) fits
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if await count(mid) <= limit:
            hi = mid
        else:
            lo = mid
    return ContextFit(tokens, context, room, hi, counts[hi])


async def _stream_into(conv: Conversation, client: httpx.AsyncClient, base_url: str,
                       messages: list[dict], **kw) -> Message:
    reply = conv.begin_reply()
    return await _follow_stream(conv, reply, stream_chat(client, base_url, messages, **kw))


async def _follow_stream(conv: Conversation, reply: Message, events) -> Message:
    """Add the streamed ``events`` to ``reply`` (streaming in ``conv``) until it ends."""
    try:
        async for ev in events:
            if reply.state != STREAMING:
                # Marked interrupted from outside (a worker was lost): stop reading a reply
                # that the server is about to lose anyway.
                raise ReplyInterrupted(reply)
            if isinstance(ev, ChatDelta):
                conv.append(ev.text)
            elif isinstance(ev, ChatDone):
                if ev.finish_reason:
                    return conv.finish(ev.finish_reason)
                # The stream closed without saying why it ended: the server went away.
                conv.interrupt("the server closed the stream before the reply was finished")
                raise ReplyInterrupted(reply)
    except ChatError as exc:  # the server said why, in words (a request too long, …)
        conv.fail(str(exc))
        raise ReplyInterrupted(reply) from exc
    except (httpx.HTTPError, OSError) as exc:
        conv.fail(f"the connection to the server was lost during this reply "
                       f"({type(exc).__name__}: {exc})" if str(exc) else
                       f"the connection to the server was lost during this reply ({type(exc).__name__})")
        raise ReplyInterrupted(reply) from exc
    except ReplyInterrupted:
        raise
    except BaseException:  # cancelled by the user or the app closing
        conv.interrupt("stopped before the reply was finished")
        raise
    if reply.state == STREAMING:  # a stream without ChatDone (cannot happen with stream_chat)
        conv.interrupt("the reply ended without a final message")
        raise ReplyInterrupted(reply)
    return reply


async def send(conv: Conversation, client: httpx.AsyncClient, base_url: str, text: str,
               **kw) -> Message:
    """Add ``text`` as the user's message and stream the reply into ``conv``.

    The request carries the whole conversation so far. Returns the complete reply; if the
    stream breaks, the reply is marked interrupted (text kept) and :class:`ReplyInterrupted`
    raised. ``kw`` goes to :func:`gui.cluster.chat.client.stream_chat` (``max_tokens``, ``seed``…).
    """
    conv.add_user(text)
    return await _stream_into(conv, client, base_url, conv.request_messages(), **kw)


async def retry(conv: Conversation, client: httpx.AsyncClient, base_url: str, **kw) -> Message:
    """Ask again the question whose reply was interrupted (e.g. after a relaunch).

    The interrupted reply stays in the transcript, marked; the new reply follows it.
    """
    if conv.last_interrupted is None:
        raise RuntimeError("the last message is not an interrupted reply")
    return await _stream_into(conv, client, base_url, conv.request_messages(), **kw)


async def resume(conv: Conversation, client: httpx.AsyncClient, base_url: str, **kw) -> Message:
    """Continue the interrupted reply where it stopped (e.g. after a relaunch, #34).

    The server gets the conversation so far with the partial reply as the assistant's prefix;
    the text it adds goes on the same message, marked ``resumed``. ``kw`` as for :func:`send`
    (``max_tokens`` is the whole reply's length: the continuation gets what the cut part left of
    it). A new cut marks it interrupted again and raises
    :class:`ReplyInterrupted`, like :func:`send`.
    """
    messages = conv.continuation_messages()
    reply = conv.resume_reply()
    echo = EchoedPrefix(reply.content)  # llama-server sends the prefix back first

    async def new_text(events):
        async for ev in events:
            if isinstance(ev, ChatDelta):
                text = echo.new_text(ev.text)
                if text:
                    yield ChatDelta(text)
            else:
                yield ev

    kw = await continuation_params(client, base_url, messages, kw)  # what is left of its length
    return await _follow_stream(conv, reply, new_text(stream_chat(client, base_url, messages, **kw)))
