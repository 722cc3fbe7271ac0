"""Who uses the cluster (#34 item 6): the front door's counts per key, Qt-free.

The front door (:mod:`gui.cluster.serving.front_door`) tells a :class:`UsageTable` when a
request waits for a free place, when llama-server starts on it and what the reply says it cost
(:func:`reply_usage` reads llama-server's ``timings``/``usage``). The dashboard and ``herd up``
read :meth:`UsageTable.snapshot`: one :class:`KeyUsage` per key name, the callers on this
computer without a key under :data:`THIS_PC`. Nothing of a request's text is kept.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from gui.cluster.nodes.telemetry import Sampler

#: The name the table uses for callers on this computer that need no key (the app, local scripts).
THIS_PC = ""
#: How many of a key's latest replies its tokens/s averages (a moving figure, not one reply's).
RECENT_REPLIES = 5

# llama-server's reply, last bytes: ``timings`` in every reply (the last event of a stream), the
# OpenAI ``usage`` in non-streamed ones (and the only count of /v1/embeddings). Checked on b11434:
# a stream's ``timings`` says ``cache_n`` (prompt tokens reused from the slot's cache) and
# ``prompt_n`` (evaluated), which together are the prompt.
_NUMBER = rb'"%s"\s*:\s*([0-9.eE+-]+)'
_FIELDS = {name: re.compile(_NUMBER % name.encode()) for name in (
    "cache_n", "prompt_n", "predicted_n", "predicted_per_second", "prompt_tokens", "completion_tokens")}


@dataclass(frozen=True)
class ReplyUsage:
    """What one reply cost, as llama-server says it.

    Attributes:
        prompt_tokens: tokens of the request's prompt (cached ones included).
        generated_tokens: tokens generated.
        tokens_per_s: generation speed of this reply (llama-server's ``predicted_per_second``,
            which leaves out the first token), or None when it does not say.
    """

    prompt_tokens: int = 0
    generated_tokens: int = 0
    tokens_per_s: float | None = None


def reply_usage(tail: bytes) -> ReplyUsage | None:
    """The :class:`ReplyUsage` in the last bytes of a reply (plain JSON or an SSE stream), or None
    when they say nothing of tokens (an error, ``/v1/models``)."""
    found = {}
    for name, pattern in _FIELDS.items():
        values = pattern.findall(tail)
        if values:
            try:
                found[name] = float(values[-1])
            except ValueError:
                continue
    return usage_of(found)


def usage_of(found: dict) -> ReplyUsage | None:
    """The :class:`ReplyUsage` of llama-server's ``timings`` and/or ``usage`` fields (one dict of
    both, e.g. a chat client's), or None when they say nothing of tokens."""
    found = {k: float(v) for k, v in found.items()
             if k in _FIELDS and isinstance(v, (int, float)) and not isinstance(v, bool)}
    if "prompt_n" in found or "predicted_n" in found:
        prompt = found.get("cache_n", 0) + found.get("prompt_n", 0)
        return ReplyUsage(int(prompt), int(found.get("predicted_n", 0)), found.get("predicted_per_second"))
    if "prompt_tokens" in found or "completion_tokens" in found:
        return ReplyUsage(int(found.get("prompt_tokens", 0)), int(found.get("completion_tokens", 0)))
    return None


@dataclass(frozen=True)
class KeyUsage:
    """One key's row of the table.

    Attributes:
        name: the key's name (:data:`THIS_PC` for callers on this computer without a key).
        requests: requests answered so far.
        prompt_tokens, generated_tokens: tokens read and written for it so far.
        tokens_per_s: mean generation speed of its last :data:`RECENT_REPLIES` replies, or None
            before its first reply that said.
        in_flight: its requests llama-server works on now.
        waiting: its requests waiting now (for a free place, or for llama-server to come back).
    """

    name: str
    requests: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    tokens_per_s: float | None = None
    in_flight: int = 0
    waiting: int = 0


@dataclass
class _Counts:
    requests: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    in_flight: int = 0
    waiting: int = 0
    speeds: deque = field(default_factory=lambda: deque(maxlen=RECENT_REPLIES))


class UsageTable:
    """Counts per key name of the requests through the front door (module docstring).

    All methods run on the front door's event loop; :meth:`snapshot` returns frozen rows that
    another thread may keep.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, _Counts] = {}

    def _of(self, name: str) -> _Counts:
        return self._by_name.setdefault(name, _Counts())

    def waiting(self, name: str, delta: int) -> None:
        """``delta`` (+1, -1) more of ``name``'s requests wait now."""
        self._of(name).waiting += delta

    def in_flight(self, name: str, delta: int) -> None:
        """``delta`` (+1, -1) more of ``name``'s requests are being answered now."""
        self._of(name).in_flight += delta

    def answered(self, name: str, usage: ReplyUsage | None) -> None:
        """One of ``name``'s requests was answered, at the cost ``usage`` (None: not said)."""
        counts = self._of(name)
        counts.requests += 1
        if usage is not None:
            counts.prompt_tokens += usage.prompt_tokens
            counts.generated_tokens += usage.generated_tokens
            if usage.tokens_per_s is not None and usage.generated_tokens > 1:
                counts.speeds.append(usage.tokens_per_s)

    def requests(self) -> dict[str, int]:
        """Requests answered so far, by key name."""
        return {name: c.requests for name, c in self._by_name.items() if c.requests}

    def snapshot(self) -> list[KeyUsage]:
        """Every key seen so far, one :class:`KeyUsage` each, :data:`THIS_PC` first, then by name."""
        rows = [KeyUsage(name, c.requests, c.prompt_tokens, c.generated_tokens,
                         sum(c.speeds) / len(c.speeds) if c.speeds else None, c.in_flight, c.waiting)
                for name, c in self._by_name.items()]
        return sorted(rows, key=lambda r: (r.name != THIS_PC, r.name.casefold()))


class UsageSampler(Sampler):
    """The front door's :meth:`UsageTable.snapshot` as ``usage`` telemetry samples (``{"rows":
    [KeyUsage, …]}``), for the dashboard's *Who uses the cluster*; on the front door's loop."""

    kind = "usage"

    def __init__(self, table: UsageTable, interval: float = 1.0) -> None:
        super().__init__("front door", interval)
        self.table = table

    async def sample(self) -> dict:
        return {"rows": self.table.snapshot()}
