"""Streaming chat with llama-server's OpenAI-compatible ``/v1/chat/completions``.

:func:`stream_chat` posts a request with ``"stream": true`` and yields the reply as it comes:
a :class:`ChatDelta` per piece of text, then one :class:`ChatDone` with llama-server's own
``timings`` (tokens/s measured by the server) and the finish reason. The CLI tests and the
desktop app's chat pane both use it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx


class ChatError(RuntimeError):
    """The server refused the request or sent something that is not a chat stream."""


@dataclass(frozen=True)
class ChatDelta:
    """A piece of the reply's text, in arrival order."""

    text: str


@dataclass(frozen=True)
class ChatDone:
    """The end of a reply.

    Attributes:
        text: the whole reply.
        finish_reason: ``stop``, ``length``… as the server said, or None.
        timings: llama-server's ``timings`` object (``predicted_per_second``, ``prompt_n``…),
            empty if the server sent none.
        usage: the OpenAI ``usage`` object, when sent.
    """

    text: str
    finish_reason: str | None
    timings: dict = field(default_factory=dict)
    usage: dict = field(default_factory=dict)

    @property
    def predicted_per_second(self) -> float | None:
        """Decode speed the server measured for this reply (tokens/s)."""
        v = self.timings.get("predicted_per_second")
        return float(v) if v is not None else None


ChatEvent = ChatDelta | ChatDone


async def stream_chat(client: httpx.AsyncClient, base_url: str, messages: list[dict], *,
                      max_tokens: int = 128, timeout: float = 300.0,
                      **params) -> AsyncIterator[ChatEvent]:
    """Send ``messages`` to ``base_url`` and yield the streamed reply.

    ``max_tokens`` is always sent: demo models have no end-of-sequence token, so without a limit
    a reply would run to the context size. Extra keyword arguments (``temperature``, ``seed``…)
    go into the request body as they are.
    """
    body = {"messages": messages, "stream": True, "max_tokens": max_tokens, **params}
    url = base_url.rstrip("/") + "/v1/chat/completions"
    parts: list[str] = []
    finish: str | None = None
    timings: dict = {}
    usage: dict = {}
    async with client.stream("POST", url, json=body, timeout=timeout) as resp:
        if resp.status_code != 200:
            detail = (await resp.aread()).decode("utf-8", "replace")[:300]
            raise ChatError(f"{url} answered {resp.status_code}: {detail}")
        async for line in resp.aiter_lines():
            # Server-sent events: payload lines start with "data: "; blank lines separate events.
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                break
            try:
                chunk = json.loads(payload)
            except ValueError as exc:
                raise ChatError(f"{url} sent a line that is not JSON: {payload[:120]!r}") from exc
            if "error" in chunk:
                raise ChatError(f"{url} reported an error: {chunk['error']}")
            for choice in chunk.get("choices") or []:
                text = (choice.get("delta") or {}).get("content")
                if text:
                    parts.append(text)
                    yield ChatDelta(text)
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
            if chunk.get("timings"):
                timings = chunk["timings"]
            if chunk.get("usage"):
                usage = chunk["usage"]
    yield ChatDone("".join(parts), finish, timings, usage)


async def chat(client: httpx.AsyncClient, base_url: str, messages: list[dict], **kw) -> ChatDone:
    """Run :func:`stream_chat` to the end and return its :class:`ChatDone`."""
    done: ChatDone | None = None
    async for ev in stream_chat(client, base_url, messages, **kw):
        if isinstance(ev, ChatDone):
            done = ev
    assert done is not None  # stream_chat always ends with ChatDone
    return done
