"""Continuing a cut reply: the one place that builds the request and reads its answer (#34).

When a lost worker cuts a reply, the relaunched llama-server has none of it. It can go on where
the reply stopped when it gets the conversation so far with the partial reply as a last
``assistant`` message: the pinned build (b11434) renders that message without its end-of-turn
mark, so the model continues the same turn ("assistant prefill"). Checked with SmolLM2 at
temperature 0: the prefix "1, 2, 3, 4, 5," went on with " 6, 7, …".

That build streams the prefix back first, as the start of the reply's text: the first text chunk
is the prefix plus the first new token. :class:`EchoedPrefix` takes the echo off, so the caller
gets only the new text. Both the front door (a streaming client of another app,
``gui.cluster.serving.resume``) and the chat pane (:func:`gui.cluster.chat.conversation.resume`)
use these two. :func:`resume_request` reads from a conversation which reply may go on: the one a
lost worker cut, as the failover marked it on the model (#33).

A continuation is the rest of the same reply, so it gets what is left of the reply's
``max_tokens`` (:func:`remaining_budget`), not the whole budget again: the tokens the partial reply
spent are counted by the server whose tokens they were (:func:`continuation_params`).
"""

from __future__ import annotations

from typing import Protocol

import httpx

from gui.cluster.chat.client import count_text_tokens


class CutConversation(Protocol):
    """What :func:`resume_request` reads of a conversation (a
    :class:`~gui.cluster.chat.conversation.Conversation`, which imports this module: it is not
    imported back, the package's modules import one another one way only)."""

    @property
    def resumable(self) -> object | None: ...

    def continuation_messages(self) -> list[dict]: ...


def continuation_messages(messages: list[dict], partial: str) -> list[dict]:
    """``messages`` (the request whose reply was cut) followed by the cut reply's text as the
    assistant's prefix, for llama-server to continue."""
    return [*messages, {"role": "assistant", "content": partial}]


class EchoedPrefix:
    """Takes the echo of the prefix off the start of a continuation's text.

    Feed each arriving piece of text to :meth:`new_text`; it returns what is new (possibly "").
    Where the echo differs from the prefix (the server re-tokenised it differently), what follows
    the longest common start is treated as new.
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._echo = ""  # text seen while it could still be the echo
        self._past = not prefix

    def new_text(self, text: str) -> str:
        """The part of ``text`` that continues the prefix (not its echo)."""
        if self._past:
            return text
        self._echo += text
        if len(self._echo) <= len(self.prefix) and self.prefix.startswith(self._echo):
            return ""  # still inside the echo
        self._past = True
        same = 0
        for a, b in zip(self._echo, self.prefix):
            if a != b:
                break
            same += 1
        new, self._echo = self._echo[same:], ""
        return new


def resume_request(conversation: CutConversation) -> list[dict] | None:
    """What continues the reply a lost worker cut in ``conversation``
    (:meth:`~gui.cluster.chat.conversation.Conversation.mark_cut`): the conversation so far with
    that reply's text as the assistant's prefix. None when there is nothing to continue: no reply
    cut that way, one the person stopped, one without text, or one left out (#33)."""
    if conversation.resumable is None:
        return None
    return conversation.continuation_messages()


def remaining_budget(max_tokens: int, spent_tokens: int) -> int:
    """What is left of a reply's ``max_tokens`` once its cut part spent ``spent_tokens`` (at
    least 1: a request asks for something)."""
    return max(1, max_tokens - spent_tokens)


async def continuation_params(client: httpx.AsyncClient, base_url: str, messages: list[dict],
                              params: dict) -> dict:
    """``params`` for sending ``messages``: when they continue a reply (the last one is the
    assistant's partial reply, :func:`continuation_messages`), ``max_tokens`` less the tokens that
    partial reply spent, as the server at ``base_url`` counts them; otherwise ``params`` as given."""
    budget = params.get("max_tokens")
    if not messages or messages[-1].get("role") != "assistant" or not isinstance(budget, int):
        return params
    spent = await count_text_tokens(client, base_url, messages[-1].get("content") or "")
    return {**params, "max_tokens": remaining_budget(budget, spent)}
