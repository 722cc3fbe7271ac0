"""Start-up progress by the byte: how far each worker's slice of the weights has travelled.

Each agent's relay counts what llama-server sends its RPC worker (``rpc.transfer`` in the
agent's status, see :mod:`agent.rpc_stream`): weight bytes as they arrive, and the bytes its
``-c`` cache supplied instead. :func:`read_transfer` is the one place the master reads those
counters; :class:`TransferTracker` turns successive polls into :class:`TransferEvent` s — per
worker the bytes against the slice the plan gives it, the rate, the ETA, "from cache", and a
stall named with its node. :func:`watch_launch` polls the workers of a
:class:`~gui.cluster.launching.launcher.ClusterLauncher` while llama-server loads and hands each event to
the launcher's ``on_transfer`` callback.

llama.cpp sends the weights in file order, one tensor after the other, so workers fill one after
another: a worker that waits its turn is *queued*, not stalled. A stall is a load in which no
worker received a byte for :data:`STALL_AFTER` seconds before all slices arrived; it is named
after the worker that was receiving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agent.i18n import translate

log = logging.getLogger("herd.transfer")

#: Seconds without a byte to any worker, mid-load, before the load counts as stalled.
STALL_AFTER = 10.0
#: Seconds of history the rate is measured over.
RATE_WINDOW = 3.0
#: A slice counts as complete at this fraction (alignment and llama.cpp's own rounding aside,
#: the bytes sent match the slice to well under 1 %).
DONE_AT = 0.995
#: Seconds between polls of the agents while llama-server loads.
POLL_INTERVAL = 0.5


def read_transfer(status) -> dict | None:
    """The relay's load counters from an agent's status (``rpc.transfer``), or None when the
    agent has no relay or predates them. The only reader of that part of the status."""
    rpc = status.get("rpc") if isinstance(status, Mapping) else getattr(status, "rpc", None)
    if rpc is None:
        return None
    t = rpc.get("transfer") if isinstance(rpc, Mapping) else getattr(rpc, "transfer", None)
    if t is None:
        return None
    if not isinstance(t, Mapping):
        t = vars(t)
    try:
        return {"session": int(t.get("session") or 0),
                "session_age_s": None if t.get("session_age_s") is None else float(t["session_age_s"]),
                "idle_s": None if t.get("idle_s") is None else float(t["idle_s"]),
                "bytes_received": int(t.get("bytes_received") or 0),
                "tensor_bytes": int(t.get("tensor_bytes") or 0),
                "cached_bytes": int(t.get("cached_bytes") or 0),
                "hash_hits": int(t.get("hash_hits") or 0),
                "hash_misses": int(t.get("hash_misses") or 0)}
    except (TypeError, ValueError):
        return None


def slice_bytes(plan, model) -> dict[str, int]:
    """{RPC endpoint: bytes of the weights the plan puts on that worker} (all its devices)."""
    out: dict[str, int] = {}
    for i, (dev, count) in enumerate(plan.assignments):
        if dev.endpoint is None or not count:
            continue
        slots = plan.slots_of(i)
        out[dev.endpoint] = out.get(dev.endpoint, 0) + model.block_bytes(slots.start, count)
    return out


@dataclass(frozen=True)
class WorkerProgress:
    """One worker's slice, as far as it has arrived.

    Attributes:
        node: the node's name.
        endpoint: its RPC endpoint.
        received_bytes: weight bytes in place on the worker (sent plus supplied by its cache).
        slice_bytes: the bytes the plan gives it.
        cached_bytes: of ``received_bytes``, those its ``-c`` cache supplied.
        rate_bps: bytes per second over the last few seconds (None before two polls).
        eta_s: seconds left at that rate (None when unknown or done).
        idle_s: seconds since its relay last received a byte (None before the first).
    """

    node: str
    endpoint: str
    received_bytes: int
    slice_bytes: int
    cached_bytes: int = 0
    rate_bps: float | None = None
    eta_s: float | None = None
    idle_s: float | None = None

    @property
    def fraction(self) -> float:
        """Share of the slice in place, 0…1."""
        return 1.0 if self.slice_bytes <= 0 else min(1.0, self.received_bytes / self.slice_bytes)

    @property
    def done(self) -> bool:
        return self.fraction >= DONE_AT

    @property
    def from_cache(self) -> bool:
        """The worker's cache supplied most of what arrived (a second start)."""
        return self.cached_bytes > 0 and self.cached_bytes * 2 >= self.received_bytes

    def describe(self) -> str:
        """``b: 812 / 1,640 MiB · 112 MiB/s · 7 s left · from cache`` (translated)."""
        mib = 1 << 20
        parts = [translate("Transfer", "{node}: {got} / {total} MiB").format(
            node=self.node, got=f"{self.received_bytes / mib:,.0f}", total=f"{self.slice_bytes / mib:,.0f}")]
        if self.done:
            parts.append(translate("Transfer", "done"))
        else:
            if self.rate_bps:
                parts.append(translate("Transfer", "{rate} MiB/s").format(rate=f"{self.rate_bps / mib:,.1f}"))
            if self.eta_s is not None:
                parts.append(translate("Transfer", "{seconds} s left").format(seconds=f"{self.eta_s:.0f}"))
        if self.cached_bytes:
            parts.append(translate("Transfer", "from cache") if self.from_cache else
                         translate("Transfer", "{cached} MiB from cache").format(cached=f"{self.cached_bytes / mib:,.0f}"))
        return " · ".join(parts)


@dataclass(frozen=True)
class TransferEvent:
    """Every worker's progress at one poll.

    Attributes:
        workers: per worker, in ``--rpc`` order.
        elapsed_s: seconds since the load was first seen.
        stall: "no bytes from NODE for N s" (translated) while the load is stalled, else None.
        stalled_node: the name of that node.
    """

    workers: tuple[WorkerProgress, ...]
    elapsed_s: float
    stall: str | None = None
    stalled_node: str | None = None

    @property
    def received_bytes(self) -> int:
        return sum(w.received_bytes for w in self.workers)

    @property
    def slice_bytes(self) -> int:
        return sum(w.slice_bytes for w in self.workers)

    @property
    def fraction(self) -> float:
        total = self.slice_bytes
        return 1.0 if total <= 0 else min(1.0, self.received_bytes / total)

    @property
    def done(self) -> bool:
        return all(w.done for w in self.workers)


class TransferTracker:
    """Turns polls of the workers' counters into :class:`TransferEvent` s.

    Args:
        slices: {endpoint: slice bytes} (:func:`slice_bytes`).
        names: {endpoint: node name}.
        clock: ``time.monotonic`` (a test may pass its own).

    Only counters of a load that began after the tracker was made count (``session_age_s`` is
    measured on the agent's own clock, so the comparison needs no synchronised clocks); an
    older load's counters read as nothing received yet.
    """

    def __init__(self, slices: Mapping[str, int], names: Mapping[str, str], *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.slices = dict(slices)
        self.names = dict(names)
        self._clock = clock
        self._began = clock()
        self._history: dict[str, deque[tuple[float, int]]] = {ep: deque() for ep in self.slices}
        self._last: dict[str, WorkerProgress] = {}
        self._best: dict[str, int] = {}

    def update(self, counters: Mapping[str, dict | None]) -> TransferEvent:
        """One poll: {endpoint: :func:`read_transfer` result (None if the agent did not
        answer)}; returns the event for it. A worker missing from ``counters`` keeps its last
        figures."""
        now = self._clock()
        since = now - self._began
        workers = []
        for ep, total in self.slices.items():
            name = self.names.get(ep, ep)
            t = counters.get(ep)
            if t is None:
                workers.append(self._last.get(ep) or WorkerProgress(name, ep, 0, total))
                continue
            fresh = t["session"] > 0 and t["session_age_s"] is not None and t["session_age_s"] <= since + 1.0
            got = t["tensor_bytes"] + t["cached_bytes"] if fresh else 0
            got = max(got, self._best.get(ep, 0))  # never backwards (a late, reordered answer)
            self._best[ep] = got
            hist = self._history[ep]
            hist.append((now, got))
            while len(hist) > 2 and now - hist[1][0] >= RATE_WINDOW:
                hist.popleft()
            rate = None
            if len(hist) >= 2 and hist[-1][0] > hist[0][0]:
                rate = (hist[-1][1] - hist[0][1]) / (hist[-1][0] - hist[0][0])
            left = max(0, total - got)
            eta = left / rate if rate and rate > 0 and left else None
            w = WorkerProgress(name, ep, got, total, cached_bytes=t["cached_bytes"] if fresh else 0,
                               rate_bps=rate, eta_s=eta, idle_s=t["idle_s"] if fresh else None)
            self._last[ep] = w
            workers.append(w)
        ev = TransferEvent(tuple(workers), since)
        return self._named_stall(ev)

    def _named_stall(self, ev: TransferEvent) -> TransferEvent:
        if ev.done:
            return ev
        started = [w for w in ev.workers if w.idle_s is not None]
        if not started or any(w.idle_s < STALL_AFTER for w in started):
            return ev  # not begun yet, or some worker is receiving: moving
        # the worker that received last is the one the load waits on (unless it is full; then
        # the next one llama.cpp should have started on)
        receiving = min(started, key=lambda w: w.idle_s)
        if receiving.done:
            receiving = next((w for w in ev.workers if not w.done), receiving)
        idle = min(w.idle_s for w in started)
        msg = translate("Transfer", "no bytes from {node} for {seconds} s").format(
            node=receiving.node, seconds=f"{idle:.0f}")
        return TransferEvent(ev.workers, ev.elapsed_s, msg, receiving.node)


class LaunchWatch:
    """Polls a launch's workers while llama-server loads (made by :func:`watch_launch`)."""

    def __init__(self, plan, model, nodes, workers: list, server_started: Callable[[], bool],
                 callback: Callable[[TransferEvent], None], interval: float) -> None:
        self.plan, self.model, self.nodes = plan, model, nodes
        self.workers = workers
        self.server_started = server_started
        self.callback = callback
        self.interval = interval
        self.tracker: TransferTracker | None = None
        self.last: TransferEvent | None = None
        self._task = asyncio.get_running_loop().create_task(self._run(), name="transfer-watch")

    def _ensure_tracker(self) -> TransferTracker | None:
        if self.tracker is None:
            names = {n.rpc_endpoint: n.name for n in self.nodes}
            self.tracker = TransferTracker(slice_bytes(self.plan, self.model), names, clock=self._clock)
        return self.tracker

    _clock = staticmethod(time.monotonic)

    async def poll(self) -> TransferEvent | None:
        """Ask every worker's agent once and report the event (None before llama-server runs)."""
        tracker = self._ensure_tracker()
        if tracker is None:
            return None
        counters: dict[str, dict | None] = {}

        async def one(ep, h):
            try:
                counters[ep] = read_transfer(await h.client.status())
            except Exception as exc:  # an agent that misses a poll keeps its last figures
                log.debug("transfer poll of %s failed: %s", ep, exc)

        handles = {h.node.rpc_endpoint: h for h in list(self.workers)}
        await asyncio.gather(*(one(ep, h) for ep, h in handles.items()))
        if not self.server_started():
            return None
        ev = tracker.update(counters)
        self.last = ev
        try:
            self.callback(ev)
        except Exception:
            log.exception("transfer callback failed")
        return ev

    async def _run(self) -> None:
        # made before the workers start, so the tracker's start precedes llama-server's connect
        self._ensure_tracker()
        while True:
            ev = await self.poll()
            if ev is not None and ev.done:
                return  # every slice arrived: nothing left to show
            await asyncio.sleep(self.interval)

    async def stop(self, final: bool = False) -> TransferEvent | None:
        """End the polling; with ``final``, poll once more so that the last event shows the
        load as it ended. Returns the last event."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
        if final and not (self.last is not None and self.last.done):
            with contextlib.suppress(Exception):
                await self.poll()
        return self.last


def watch_launch(plan, model, nodes, workers: list, server_started: Callable[[], bool],
                 callback: Callable[[TransferEvent], None] | None,
                 interval: float | None = None) -> LaunchWatch | None:
    """While a launch starts, poll its workers' agents and pass a :class:`TransferEvent` to
    ``callback`` after each poll; returns the :class:`LaunchWatch` (stop it once llama-server is
    up, see :func:`stop_watch`), or None when nobody listens (``callback`` None).

    ``plan`` and ``model`` (its :class:`~gui.cluster.llama.model.ModelInfo`) give each worker's
    slice; ``nodes`` name the workers; ``workers`` is the launch's list of worker handles (read
    at each poll: it fills as the workers start); ``server_started()`` says whether llama-server
    runs yet (no event before it does)."""
    if callback is None:
        return None
    return LaunchWatch(plan, model, list(nodes), workers, server_started, callback,
                       POLL_INTERVAL if interval is None else interval)


async def stop_watch(watch: LaunchWatch | None, final: bool = False) -> None:
    """Stop a :func:`watch_launch` watch (None: nothing to do); ``final``: report once more."""
    if watch is not None:
        await watch.stop(final)
