"""Streaming chat with llama-server's OpenAI-compatible ``/v1/chat/completions``.

:func:`stream_chat` posts a request with ``"stream": true`` and yields the reply as it comes:
a :class:`ChatDelta` per piece of text, then one :class:`ChatDone` with llama-server's own
``timings`` (tokens/s measured by the server) and the finish reason. The CLI tests and the
desktop app's chat pane both use it.

Before a request is sent, :func:`count_prompt_tokens` and :func:`context_per_slot` ask the
server itself how long the conversation is in its tokens and how much context each slot holds
(the chat pane warns before sending what would not fit). When the server refuses a request, its
JSON error is turned into words with what to do (:func:`describe_server_error`): the person
chatting never sees ``{"error":{"code":400,…}}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx

from agent.i18n import translate


class ChatError(RuntimeError):
    """The server refused the request or sent something that is not a chat stream.

    The message is in words (see :func:`describe_server_error`).

    Attributes:
        status: the HTTP status the server answered, or None (an error inside the stream).
        too_long: the conversation is longer than the server's context.
        prompt_tokens, context: then its length and the context per slot, in tokens, as the
            server reported them (None when it did not say).
    """

    def __init__(self, message: str, status: int | None = None, *, too_long: bool = False,
                 prompt_tokens: int | None = None, context: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.too_long = too_long
        self.prompt_tokens = prompt_tokens
        self.context = context


_TOO_LONG = re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)")


def server_error(status: int | None, body: str | dict) -> ChatError:
    """The :class:`ChatError` for llama-server's error answer ``body`` (its JSON text or the
    parsed ``error`` object), worded by :func:`describe_server_error`."""
    error: dict = {}
    if isinstance(body, dict):
        error = body
    else:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            inner = parsed.get("error", parsed)
            error = inner if isinstance(inner, dict) else {"message": str(inner)}
        else:
            error = {"message": " ".join(body.split())[:200]}
    message = str(error.get("message") or "")
    tokens, ctx = error.get("n_prompt_tokens"), error.get("n_ctx")
    if not (isinstance(tokens, int) and isinstance(ctx, int)):
        # builds before the error carried its numbers say them only in the message
        m = _TOO_LONG.search(message)
        tokens, ctx = (int(m.group(1)), int(m.group(2))) if m else (None, None)
    if error.get("type") == "exceed_context_size_error" or tokens is not None:
        return ChatError(describe_too_long(tokens, ctx), status, too_long=True, prompt_tokens=tokens,
                         context=ctx)
    return ChatError(describe_server_error(status, message), status)


def describe_too_long(tokens: int | None, context: int | None) -> str:
    """The conversation does not fit the server's context, in words with what to do."""
    if tokens is None or context is None:
        return translate("ChatErrors", "The conversation is too long for the server's context. Start a new chat, "
                         "shorten your message, or start the cluster with a larger context.")
    return translate("ChatErrors", "The conversation is too long for the server: it is {tokens} tokens and the "
                     "server holds {context} per conversation. Start a new chat, shorten your message, or start "
                     "the cluster with a larger context.").format(tokens=tokens, context=context)


def describe_server_error(status: int | None, message: str) -> str:
    """llama-server's error ``message`` (answered with HTTP ``status``) as a sentence with what
    to do. llama-server's own message is kept, as it wrote it, after what it means."""
    detail = message.strip() or translate("ChatErrors", "no details")
    if status == 503:
        return translate("ChatErrors", "The server is not ready yet (it may still be loading the model). Try again "
                         "in a moment. ({detail})").format(detail=detail)
    if status is not None and 400 <= status < 500:
        return translate("ChatErrors", "The server did not accept the request (HTTP {status}: {detail}). Check the "
                         "chat's settings, or start a new chat.").format(status=status, detail=detail)
    if status is not None:
        return translate("ChatErrors", "The server failed while answering (HTTP {status}: {detail}). Try again; if "
                         "it happens again, look at the launch log.").format(status=status, detail=detail)
    return translate("ChatErrors", "The server stopped the reply with an error ({detail}). Try again; if it "
                     "happens again, look at the launch log.").format(detail=detail)


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
            detail = (await resp.aread()).decode("utf-8", "replace")[:2000]
            raise server_error(resp.status_code, detail)
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
                raise ChatError(translate("ChatErrors", "The server sent something that is not a chat reply "
                                          "({line}). Is the address that of a llama-server?")
                                .format(line=repr(payload[:120]))) from exc
            if "error" in chunk:
                err = chunk["error"]
                raise server_error(None, err if isinstance(err, dict) else {"message": str(err)})
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


async def context_per_slot(client: httpx.AsyncClient, base_url: str, timeout: float = 10.0) -> int:
    """How many tokens one conversation may hold on this server: the context of one slot.

    ``/props`` reports it as ``default_generation_settings.n_ctx`` (its top-level ``n_ctx`` is
    absent in build b11434). The server works it out from ``-c`` and the slots: ``-c 2048
    -np 2`` → 1024; with a unified KV cache (``-kvu``, and the default ``-np`` auto, which is
    what herd starts) every slot may use all 2048 — and the server accepts requests up to that.
    """
    resp = await client.get(base_url.rstrip("/") + "/props", timeout=timeout)
    resp.raise_for_status()
    props = resp.json()
    n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
    if not isinstance(n_ctx, int) or n_ctx <= 0:
        raise ChatError(translate("ChatErrors", "The server did not say how much context it holds."))
    return n_ctx


async def count_prompt_tokens(client: httpx.AsyncClient, base_url: str, messages: list[dict],
                              timeout: float = 30.0) -> int:
    """How many tokens ``messages`` take as the server will read them.

    The server's own chat template (``/apply-template``) and tokenizer (``/tokenize``, with the
    special tokens the template writes): the same count llama-server reports as the prompt's
    length when the request is sent.
    """
    base = base_url.rstrip("/")
    resp = await client.post(base + "/apply-template", json={"messages": messages}, timeout=timeout)
    if resp.status_code != 200:
        raise server_error(resp.status_code, resp.text)
    prompt = resp.json()["prompt"]
    resp = await client.post(base + "/tokenize", json={"content": prompt, "add_special": True,
                                                       "parse_special": True}, timeout=timeout)
    if resp.status_code != 200:
        raise server_error(resp.status_code, resp.text)
    return len(resp.json()["tokens"])


async def count_text_tokens(client: httpx.AsyncClient, base_url: str, text: str, timeout: float = 30.0) -> int:
    """How many tokens the server makes of ``text`` alone (no template, no special tokens): what
    a reply of that text spent of its ``max_tokens``."""
    resp = await client.post(base_url.rstrip("/") + "/tokenize", json={"content": text}, timeout=timeout)
    if resp.status_code != 200:
        raise server_error(resp.status_code, resp.text)
    return len(resp.json()["tokens"])


async def chat(client: httpx.AsyncClient, base_url: str, messages: list[dict], **kw) -> ChatDone:
    """Run :func:`stream_chat` to the end and return its :class:`ChatDone`."""
    done: ChatDone | None = None
    async for ev in stream_chat(client, base_url, messages, **kw):
        if isinstance(ev, ChatDone):
            done = ev
    assert done is not None  # stream_chat always ends with ChatDone
    return done
