"""Telemetry: a stream of timestamped samples about the running cluster.

One :class:`Sampler` per kind of measurement, each an asyncio task with its own interval, all
feeding one :class:`Telemetry` hub. Consumers either subscribe a plain callback (the desktop app
bridges it to a Qt signal) or iterate :meth:`Telemetry.stream`. Nothing here blocks the caller:
a slow or dead source only delays its own sampler, and a failed probe becomes a sample with an
``error`` value instead of an exception.

Kinds of sample (``Sample.kind``) and their values:

``metrics`` (:class:`MetricsSampler`)
    llama-server's Prometheus counters turned into rates over the interval: ``decode_tps`` and
    ``prompt_tps`` are Δtokens / Δseconds-spent of the *counters*
    (``llamacpp:tokens_predicted_total`` / ``…_seconds_total``). The ``…_tokens_seconds`` gauges
    are not used: llama-server averages them since the previous scrape, so two scrapers (the app
    and a user's Grafana) would corrupt each other. The counters only move when a request ends,
    so a rate is None in an interval where no request finished. Over one reply of n tokens the
    counter rate is n / t while the reply's ``timings.predicted_per_second`` is (n - 1) / t
    (it leaves the first token out): they differ by 1/n, under 1 % from 100 tokens on.
``server`` (:class:`ServerSampler`)
    llama-server's state (``loading``/``ready``/``down``) from ``/health``, and from ``/slots``
    the tokens decoded so far by busy slots, which gives a live wall-clock ``live_decode_tps``
    while a reply streams.
``link`` (:class:`LinkSampler`)
    round-trip time to one node through its agent's echo: ``rtt_median_ms``, ``rtt_p95_ms``,
    ``lost`` over the interval's probes.
``node`` (:class:`NodeStatusSampler`)
    one node's load and network throughput from the agent's ``status``.
``reply`` (:meth:`Telemetry.record_reply`)
    a finished chat reply's own ``timings`` as llama-server measured them
    (``predicted_per_second``, ``prompt_per_second``, token counts).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx

from agent.protocol import AgentStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sample:
    """One measurement.

    Attributes:
        time: wall-clock time (``time.time()``) when it was taken.
        kind: ``metrics``, ``server``, ``link`` or ``node``.
        source: what was measured: the server URL or the node id.
        values: the numbers (see the module docstring); ``error`` holds a sentence on failure.
    """

    time: float
    kind: str
    source: str
    values: dict = field(default_factory=dict)


# --- llama-server /metrics --------------------------------------------------------------------

def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text format → {metric name: value} (labels are not used by llama-server)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) < 2:
            continue
        name = parts[0].split("{", 1)[0]
        try:
            out[name] = float(parts[1])
        except ValueError:
            continue
    return out


@dataclass(frozen=True)
class MetricsCounters:
    """llama-server's cumulative counters at one moment."""

    prompt_tokens: float
    prompt_seconds: float
    predicted_tokens: float
    predicted_seconds: float
    requests_processing: float = 0.0

    @classmethod
    def from_text(cls, text: str) -> "MetricsCounters":
        """Read the counters from a ``/metrics`` body; raises ValueError if one is missing."""
        m = parse_prometheus(text)
        try:
            return cls(
                prompt_tokens=m["llamacpp:prompt_tokens_total"],
                prompt_seconds=m["llamacpp:prompt_seconds_total"],
                predicted_tokens=m["llamacpp:tokens_predicted_total"],
                predicted_seconds=m["llamacpp:tokens_predicted_seconds_total"],
                requests_processing=m.get("llamacpp:requests_processing", 0.0),
            )
        except KeyError as exc:
            raise ValueError(f"/metrics has no {exc.args[0]} counter") from None


def counter_rates(before: MetricsCounters, after: MetricsCounters) -> dict[str, float | None]:
    """Tokens/s between two readings: Δtokens / Δseconds llama-server spent on them.

    None where nothing happened in between (or a counter went backwards: the server restarted).
    """
    def rate(dt_tokens: float, dt_seconds: float) -> float | None:
        if dt_tokens <= 0 or dt_seconds <= 0:
            return None
        return dt_tokens / dt_seconds

    return {
        "decode_tps": rate(after.predicted_tokens - before.predicted_tokens,
                           after.predicted_seconds - before.predicted_seconds),
        "prompt_tps": rate(after.prompt_tokens - before.prompt_tokens,
                           after.prompt_seconds - before.prompt_seconds),
        "decode_tokens": max(0.0, after.predicted_tokens - before.predicted_tokens),
        "prompt_tokens": max(0.0, after.prompt_tokens - before.prompt_tokens),
    }


async def read_counters(client: httpx.AsyncClient, base_url: str, timeout: float = 5.0) -> MetricsCounters:
    """Scrape ``/metrics`` once. Raises ValueError with a sentence when it cannot be read."""
    try:
        resp = await client.get(base_url.rstrip("/") + "/metrics", timeout=timeout)
    except httpx.HTTPError as exc:
        raise ValueError(f"cannot reach {base_url}/metrics: {exc}") from exc
    if resp.status_code == 501:
        raise ValueError("llama-server was started without --metrics")
    if resp.status_code != 200:
        raise ValueError(f"{base_url}/metrics answered {resp.status_code}")
    return MetricsCounters.from_text(resp.text)


# --- samplers ---------------------------------------------------------------------------------

class Sampler:
    """Takes one kind of sample every ``interval`` seconds until stopped.

    Subclasses implement :meth:`sample`. Exceptions from it are caught and turned into a sample
    with ``{"error": "..."}``: a sampler never dies silently and never raises into the hub.
    """

    kind = "sample"

    def __init__(self, source: str, interval: float = 1.0) -> None:
        if interval <= 0:
            raise ValueError("a sampler's interval must be positive")
        self.source = source
        self._interval = interval
        self._wake = asyncio.Event()

    @property
    def interval(self) -> float:
        return self._interval

    @interval.setter
    def interval(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError("a sampler's interval must be positive")
        self._interval = seconds
        self._wake.set()  # start the next interval now rather than after the old, longer wait

    async def sample(self) -> dict | None:
        """Take one measurement; None means "nothing to report this time"."""
        raise NotImplementedError

    async def run(self, emit: Callable[[Sample], None]) -> None:
        """The sampler's loop; ``emit`` receives every sample. Cancel the task to stop it."""
        next_at = time.monotonic()
        while True:
            try:
                values = await self.sample()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # reported as a sample; the loop goes on
                values = {"error": f"{type(exc).__name__}: {exc}"}
            if values is not None:
                emit(Sample(time.time(), self.kind, self.source, values))
            next_at += self._interval
            delay = next_at - time.monotonic()
            if delay < 0:  # sampling took longer than the interval: don't try to catch up
                next_at = time.monotonic()
                delay = 0
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
                next_at = time.monotonic()


class MetricsSampler(Sampler):
    """Decode and prompt tokens/s of llama-server from its ``/metrics`` counters."""

    kind = "metrics"

    def __init__(self, client: httpx.AsyncClient, base_url: str, interval: float = 1.0) -> None:
        super().__init__(base_url, interval)
        self.client = client
        self.base_url = base_url
        self._last: MetricsCounters | None = None

    async def sample(self) -> dict | None:
        now = await read_counters(self.client, self.base_url)
        before, self._last = self._last, now
        if before is None:
            return None  # a rate needs two readings
        values: dict = dict(counter_rates(before, now))
        values["requests_processing"] = now.requests_processing
        values["predicted_tokens_total"] = now.predicted_tokens
        values["predicted_seconds_total"] = now.predicted_seconds
        return values


class ServerSampler(Sampler):
    """llama-server's state, and the live decode rate of busy slots (from ``/slots``)."""

    kind = "server"

    def __init__(self, client: httpx.AsyncClient, base_url: str, interval: float = 1.0) -> None:
        super().__init__(base_url, interval)
        self.client = client
        self.base_url = base_url.rstrip("/")
        self._last: tuple[float, int] | None = None

    async def sample(self) -> dict | None:
        try:
            resp = await self.client.get(self.base_url + "/health", timeout=3.0)
        except httpx.HTTPError as exc:
            self._last = None
            return {"state": "down", "error": str(exc) or type(exc).__name__}
        if resp.status_code == 503:
            return {"state": "loading"}
        if resp.status_code != 200:
            return {"state": "error", "error": f"/health answered {resp.status_code}"}
        values: dict = {"state": "ready"}
        try:
            slots = (await self.client.get(self.base_url + "/slots", timeout=3.0)).json()
        except (httpx.HTTPError, ValueError):
            return values
        busy = [s for s in slots if isinstance(s, dict) and s.get("is_processing")]
        decoded = sum(_slot_decoded(s) for s in busy)
        now = time.monotonic()
        values["busy_slots"] = len(busy)
        values["decoded"] = decoded
        if busy and self._last is not None and decoded >= self._last[1] and now > self._last[0]:
            values["live_decode_tps"] = (decoded - self._last[1]) / (now - self._last[0])
        self._last = (now, decoded) if busy else None
        return values


def _slot_decoded(slot: dict) -> int:
    # The field moved between builds: top level in some, under next_token in others.
    if isinstance(slot.get("n_decoded"), int):
        return slot["n_decoded"]
    nt = slot.get("next_token")
    if isinstance(nt, list) and nt and isinstance(nt[0], dict):
        nt = nt[0]
    if isinstance(nt, dict) and isinstance(nt.get("n_decoded"), int):
        return nt["n_decoded"]
    return 0


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0–100) by linear interpolation between closest ranks."""
    if not values:
        raise ValueError("percentile of no values")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


class LinkSampler(Sampler):
    """Round-trip time to one node: ``probes`` echo exchanges per interval.

    ``measure(count)`` is an async callable that times ``count`` echo round trips to the node
    and returns the ones that came back, in seconds — e.g.
    ``lambda n: agent.client.measure_echo_rtt(host, echo_port, n)``; it may raise when none did.
    """

    kind = "link"

    def __init__(self, node_id: str, measure: Callable[[int], Awaitable[list[float]]],
                 interval: float = 1.0, probes: int = 10) -> None:
        super().__init__(node_id, interval)
        self.measure = measure
        self.probes = probes

    async def sample(self) -> dict | None:
        rtts = list(await self.measure(self.probes))
        values: dict = {"probes": self.probes, "lost": self.probes - len(rtts)}
        if rtts:
            ms = [r * 1000.0 for r in rtts]
            values["rtt_median_ms"] = statistics.median(ms)
            values["rtt_p95_ms"] = percentile(ms, 95)
            values["rtt_min_ms"] = min(ms)
        else:
            values["error"] = "no echo answered"
        return values


class NodeStatusSampler(Sampler):
    """One node's load and link throughput, from its agent's ``status``.

    ``fetch_status`` is an async callable returning the agent's status JSON; :meth:`sample`
    keeps the load and network figures the graphs use and passes the rest under ``status``.
    """

    kind = "node"

    def __init__(self, node_id: str, fetch_status: Callable[[], Awaitable[dict]],
                 interval: float = 2.0) -> None:
        super().__init__(node_id, interval)
        self.fetch_status = fetch_status

    async def sample(self) -> dict | None:
        status = await self.fetch_status()
        load = status.get("load") or {}
        values = {
            "cpu_percent": load.get("cpu_percent"),
            "ram_used_bytes": load.get("ram_used_bytes"),
            "ram_free_bytes": load.get("ram_free_bytes"),
            "net_rx_bytes_per_s": load.get("net_rx_bytes_per_s"),
            "net_tx_bytes_per_s": load.get("net_tx_bytes_per_s"),
            "rpc_state": AgentStatus.of(status).rpc.state.value,
            "status": status,
        }
        return values


class SampleStream:
    """An async iterator over one :class:`Telemetry` subscriber queue."""

    def __init__(self, queue: asyncio.Queue, close: Callable[[], None]) -> None:
        self._queue = queue
        self._close = close

    def __aiter__(self) -> "SampleStream":
        return self

    async def __anext__(self) -> Sample:
        return await self._queue.get()

    async def aclose(self) -> None:
        """Stop receiving samples."""
        self._close()


# --- the hub ----------------------------------------------------------------------------------

class Telemetry:
    """Runs samplers and fans their samples out to subscribers.

    Use inside a running asyncio loop::

        tele = Telemetry()
        tele.add(MetricsSampler(client, url))
        unsubscribe = tele.subscribe(print)
        tele.start()
        ...
        await tele.stop()
    """

    def __init__(self, history: int = 600) -> None:
        self._samplers: list[Sampler] = []
        self._tasks: dict[Sampler, asyncio.Task] = {}
        self._callbacks: list[Callable[[Sample], None]] = []
        self._queues: list[asyncio.Queue] = []
        self.history_size = history
        self.history: list[Sample] = []

    @property
    def samplers(self) -> list[Sampler]:
        return list(self._samplers)

    def add(self, sampler: Sampler) -> Sampler:
        """Add a sampler; it starts at once if the hub is running."""
        self._samplers.append(sampler)
        if self._tasks:
            self._start_one(sampler)
        return sampler

    async def remove(self, sampler: Sampler) -> None:
        """Stop and forget one sampler (e.g. a node that left)."""
        if sampler in self._samplers:
            self._samplers.remove(sampler)
        task = self._tasks.pop(sampler, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def set_interval(self, kind: str, seconds: float) -> None:
        """Change the interval of every sampler of ``kind``."""
        for s in self._samplers:
            if s.kind == kind:
                s.interval = seconds

    def subscribe(self, callback: Callable[[Sample], None]) -> Callable[[], None]:
        """Call ``callback(sample)`` for every sample; returns the function that unsubscribes.

        Callbacks run on the event loop and must return quickly; an exception in one is logged
        and does not reach the sampler or other subscribers.
        """
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback) if callback in self._callbacks else None

    def record_reply(self, source: str, timings: dict) -> Sample:
        """Emit a ``reply`` sample from a finished reply's ``timings`` (see ``gui.cluster.chat.client``);
        ``ttft_ms``, when given, is the client's own wait for the first token."""
        keys = ("prompt_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms",
                "predicted_per_second", "ttft_ms", "draft_n", "draft_n_accepted")  # (drafts: #35)
        sample = Sample(time.time(), "reply", source, {k: timings[k] for k in keys if k in timings})
        self._emit(sample)
        return sample

    def stream(self, maxsize: int = 1000) -> "SampleStream":
        """Samples from now on, as an async iterator (``async for s in tele.stream()``).

        The stream is registered at once, so no sample taken after this call is missed. A slow
        reader loses the oldest samples beyond ``maxsize``. Call ``aclose()`` when done.
        """
        q: asyncio.Queue = asyncio.Queue(maxsize)
        self._queues.append(q)
        return SampleStream(q, lambda: self._queues.remove(q) if q in self._queues else None)

    def start(self) -> None:
        """Start every sampler (idempotent)."""
        for s in self._samplers:
            if s not in self._tasks:
                self._start_one(s)

    def _start_one(self, sampler: Sampler) -> None:
        self._tasks[sampler] = asyncio.get_running_loop().create_task(
            sampler.run(self._emit), name=f"sampler-{sampler.kind}-{sampler.source}")

    async def stop(self) -> None:
        """Stop every sampler and wait until they have."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t

    def _emit(self, sample: Sample) -> None:
        self.history.append(sample)
        if len(self.history) > self.history_size:
            del self.history[: len(self.history) - self.history_size]
        for cb in list(self._callbacks):
            try:
                cb(sample)
            except Exception:
                log.exception("telemetry subscriber %r failed", cb)
        for q in self._queues:
            if q.full():
                q.get_nowait()
            q.put_nowait(sample)


async def recording_replies(events, telemetry: Telemetry, source: str):
    """Pass a :func:`gui.cluster.chat.client.stream_chat` stream through unchanged and, at its
    ``ChatDone``, :meth:`Telemetry.record_reply` its timings with the client's own time to
    first token (``ttft_ms``: from the request to the first piece of text)."""
    from gui.cluster.chat.client import ChatDelta, ChatDone  # noqa: PLC0415 - chat imports nothing of ours
    began, first = time.monotonic(), None
    async for ev in events:
        if first is None and isinstance(ev, ChatDelta):
            first = time.monotonic()
        if isinstance(ev, ChatDone):
            timings = dict(ev.timings)
            if first is not None:
                timings["ttft_ms"] = (first - began) * 1000.0
            telemetry.record_reply(source, timings)
        yield ev
