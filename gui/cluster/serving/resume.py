"""A streamed reply that llama-server cut resumes, for the client of the front door (#34).

When a worker is lost mid-reply llama-server dies and the failover relaunches it on the
remaining workers. A client streaming ``/v1/chat/completions`` through the front door then sees
its stream pause and go on: the front door keeps the client's stream open, waits for the new
llama-server and asks it to continue the reply (the original messages plus the text sent so far
as the assistant's prefix, :mod:`gui.cluster.chat.continuation`). The new events are passed on in
the same SSE format, with the ``id``, ``model`` and ``created`` the client saw, so its text is one
reply. Where that cannot happen within the limit, the stream ends with a clear error event.

Pieces:

* :class:`SseEvents` cuts the byte stream into whole events, so a client never gets half an
  event before a cut;
* :class:`ReplySoFar` reads the events passed to the client (id, model, text so far);
* :func:`continuation_body` builds the request that continues it;
* :class:`ContinuationEvents` rewrites the continuation's events for the client;
* :func:`resume_stream` does it all after a cut (waiting, retrying, passing events on).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable

import aiohttp

from gui.cluster.chat.continuation import EchoedPrefix, continuation_messages, remaining_budget

#: Seconds between SSE comments sent while the client waits, so it and any proxy see a live stream.
KEEPALIVE_S = 5.0


class SseEvents:
    """Cuts arriving bytes into whole SSE events (each ends with a blank line)."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[bytes]:
        """The whole events completed by ``data`` (each with its closing blank line)."""
        self._pending += data.replace(b"\r\n", b"\n")
        *events, self._pending = self._pending.split(b"\n\n")
        return [e + b"\n\n" for e in events]


def _payload(event: bytes) -> dict | str | None:
    """The JSON of an event's ``data:`` line, ``"[DONE]"``, or None (a comment, no data)."""
    for line in event.splitlines():
        if line.startswith(b"data:"):
            text = line[5:].strip().decode("utf-8", "replace")
            if text == "[DONE]":
                return text
            try:
                parsed = json.loads(text)
            except ValueError:
                return None
            return parsed if isinstance(parsed, dict) else None
    return None


class ReplySoFar:
    """What the client has been sent of a streamed chat reply.

    The events are kept as they were passed on and read only when asked (after a cut, or at the
    stream's end): parsing each token's event as it passes would cost the master's CPU, which
    llama-server shares, on every token of every reply (#34).

    Attributes:
        fields: ``id``, ``model``, ``created`` of the first chunk (kept on continued events).
        text: the reply's text so far.
        chunks: text chunks so far (about one token each).
        finished: the reply had its end (a ``finish_reason`` or ``[DONE]``).
    """

    def __init__(self) -> None:
        self._unread: list[bytes] = []
        self._fields: dict = {}
        self._text = ""
        self._chunks = 0
        self._finished = False

    def observe(self, event: bytes) -> None:
        """Note an event passed on to the client."""
        self._unread.append(event)

    @property
    def fields(self) -> dict:
        self._read()
        return self._fields

    @property
    def text(self) -> str:
        self._read()
        return self._text

    @property
    def chunks(self) -> int:
        self._read()
        return self._chunks

    @property
    def finished(self) -> bool:
        # A reply ends with its finish_reason, then [DONE]: its last two events tell.
        if not self._finished:
            self._finished = any(_ends_reply(_payload(e)) for e in self._unread[-2:])
        return self._finished

    def _read(self) -> None:
        for event in self._unread:
            chunk = _payload(event)
            self._finished = self._finished or _ends_reply(chunk)
            if not isinstance(chunk, dict):
                continue
            for key in ("id", "model", "created"):
                if key in chunk and key not in self._fields:
                    self._fields[key] = chunk[key]
            for choice in chunk.get("choices") or []:
                content = (choice.get("delta") or {}).get("content")
                if content:
                    self._text += content
                    self._chunks += 1
        self._unread.clear()


def _ends_reply(chunk: dict | str | None) -> bool:
    """Whether an event's payload ends the reply: ``[DONE]``, or a choice's ``finish_reason``."""
    if chunk == "[DONE]":
        return True
    return isinstance(chunk, dict) and any(c.get("finish_reason") for c in chunk.get("choices") or []
                                           if isinstance(c, dict))


def continuation_body(body: bytes, reply: ReplySoFar, spent_tokens: int | None = None) -> bytes | None:
    """The request body that continues ``reply`` of the request ``body``, or None when it cannot
    be continued (not a streamed chat request of one choice, or nothing of the reply arrived).
    ``spent_tokens``: the tokens of the reply so far, which its budget (``max_tokens``) loses;
    without it, its chunks (one token each, or more: llama-server holds back the bytes of a
    character that is not whole yet, so an emoji or a Chinese character can come as one chunk)."""
    try:
        request = json.loads(body)
    except ValueError:
        return None
    if (not isinstance(request, dict) or not isinstance(request.get("messages"), list) or not request.get("stream")
            or request.get("n", 1) != 1 or not reply.text):
        return None
    request["messages"] = continuation_messages(request["messages"], reply.text)
    for key in ("max_tokens", "max_completion_tokens"):  # what is left of the reply's budget
        if isinstance(request.get(key), int) and request[key] > 0:
            request[key] = remaining_budget(request[key], spent_tokens if spent_tokens is not None else reply.chunks)
    return json.dumps(request).encode("utf-8")


class ContinuationEvents:
    """Rewrites the continuation's events as the rest of the reply the client was receiving:
    the echoed prefix taken off, the first reply's ``id``/``model``/``created`` kept, and events
    left with nothing to say (the new role announcement, the echo) dropped."""

    def __init__(self, reply: ReplySoFar) -> None:
        self._fields = dict(reply.fields)
        self._prefix = EchoedPrefix(reply.text)

    def rewrite(self, event: bytes) -> bytes | None:
        """The event to pass on for ``event``, or None to drop it."""
        chunk = _payload(event)
        if not isinstance(chunk, dict):
            return event  # [DONE] and comments pass as they are
        if "error" in chunk:
            return event
        chunk.update(self._fields)
        says_more = bool(chunk.get("timings") or chunk.get("usage"))
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            delta.pop("role", None)
            if delta.get("content"):
                delta["content"] = self._prefix.new_text(delta["content"])
            if delta.get("content") or choice.get("finish_reason"):
                says_more = True
            if not delta.get("content"):
                delta.pop("content", None)
        if not says_more:
            return None
        return b"data: " + json.dumps(chunk, ensure_ascii=False).encode("utf-8") + b"\n\n"


async def tokens_in(session: aiohttp.ClientSession, target, text: str) -> int | None:
    """How many tokens llama-server at ``target`` (a yarl URL on it) makes of ``text``, by its
    ``/tokenize``; None when it cannot say (not listening yet, an answer of another form)."""
    try:
        async with session.post(target.with_path("/tokenize").with_query(None), json={"content": text}) as r:
            if r.status != 200:
                return None
            tokens = (await r.json(content_type=None)).get("tokens")
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, AttributeError):
        return None
    return len(tokens) if isinstance(tokens, list) else None


async def resume_stream(session: aiohttp.ClientSession, target, headers: dict, body: bytes, reply: ReplySoFar,
                        write: Callable[[bytes], Awaitable[None]], wait_s: float) -> bool:
    """After a cut, continue ``reply`` from the relaunched llama-server at ``target`` and pass
    the rest on with ``write``. Tries until ``wait_s`` seconds have passed without the reply
    going on (a second cut starts a new wait). Returns whether the reply reached its end."""
    deadline = time.monotonic() + wait_s
    next_keepalive = time.monotonic() + KEEPALIVE_S
    while time.monotonic() < deadline:
        # the reply's budget loses what it spent: counted by llama-server, whose tokens they were
        again = continuation_body(body, reply, await tokens_in(session, target, reply.text) if reply.text else None)
        if again is None:
            return False
        upstream = None
        try:
            upstream = await session.post(target, headers=headers, data=again)
            if 400 <= upstream.status < 500:  # refused (e.g. now too long): asking again will not help
                return False
            if upstream.status == 200 and upstream.content_type == "text/event-stream":
                rewrite, events = ContinuationEvents(reply), SseEvents()
                async for data in upstream.content.iter_any():
                    for event in events.feed(data):
                        out = rewrite.rewrite(event)
                        if out is not None:
                            reply.observe(out)
                            await write(out)
                            deadline = time.monotonic() + wait_s  # it goes on: a new cut waits anew
                if reply.finished:
                    return True
        except (aiohttp.ClientError, asyncio.TimeoutError):
            pass  # not listening yet, or cut again: wait and try again
        finally:
            if upstream is not None:
                upstream.close()
        if time.monotonic() >= next_keepalive:  # an SSE comment: the client sees the stream alive
            await write(b": the cluster is relaunching; the reply will go on\n\n")
            next_keepalive = time.monotonic() + KEEPALIVE_S
        await asyncio.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
    return False
