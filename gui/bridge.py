"""The one bridge between Qt's event loop and asyncio.

A single :class:`AsyncBridge` owns a ``QThread`` that runs a stock asyncio event loop. The GUI
submits coroutines with :meth:`AsyncBridge.submit` (``asyncio.run_coroutine_threadsafe`` under
the hood) and gets back a :class:`Call`, a QObject living in the GUI thread whose signals carry
the result. Because the signals are emitted from the loop thread and the ``Call`` lives in the
GUI thread, Qt delivers them *queued*: slots always run on the GUI thread, and widgets never
touch sockets, processes or the loop themselves.

Why not QtAsyncio or qasync: QtAsyncio (a technical preview) hangs on httpx and zeroconf, and
qasync needs a special event-loop setup in every test. A plain thread with a plain loop works
with ``qtbot.waitSignal`` as is.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from PySide6.QtCore import QMetaMethod, QObject, QThread, Qt, Signal

log = logging.getLogger(__name__)


class Call(QObject):
    """One coroutine running on the bridge's loop, seen from the GUI thread.

    The loop thread never emits the public signals itself: it posts each outcome to the Call
    through a queued connection and the Call re-emits it on the GUI thread. So a caller can
    connect to the signals right after :meth:`AsyncBridge.submit` returns without missing a
    result that was ready early.

    Signals:
        item(object): one value of a streamed call (:meth:`AsyncBridge.stream`), in order.
        finished(object): the coroutine's result.
        failed(object): the exception that ended it (never emitted for a cancellation).
        cancelled(): the call was cancelled before it finished.
        done(): emitted last, whatever the outcome.

    Attributes:
        future: the ``concurrent.futures.Future`` of the running coroutine.
        label: a short description used in error reports.
    """

    item = Signal(object)
    finished = Signal(object)
    failed = Signal(object)
    cancelled = Signal()
    done = Signal()
    _post = Signal(str, object)

    def __init__(self, label: str, bridge: "AsyncBridge") -> None:
        super().__init__()
        self.label = label
        self.future: concurrent.futures.Future | None = None
        self._bridge = bridge
        self._reported = False
        # The coroutines this call was given and wrapped in: one that never started (the call was
        # cancelled before the loop reached it) is closed when the bridge closes, not collected
        # later with a "never awaited" warning.
        self._coroutines: list[Awaitable[Any]] = []
        self._post.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    def cancel(self) -> None:
        """Ask the coroutine to stop (it sees ``CancelledError`` at its next await)."""
        if self.future is not None:
            self.future.cancel()

    def running(self) -> bool:
        """True until the coroutine has finished, failed or been cancelled."""
        return self.future is not None and not self.future.done()

    def _deliver(self, kind: str, value: object) -> None:
        # Runs on the GUI thread.
        if kind == "item":
            self.item.emit(value)
            return
        if kind == "items":
            for v in value:
                self.item.emit(v)
            return
        if kind == "finished":
            self.finished.emit(value)
        elif kind == "cancelled":
            self.cancelled.emit()
        elif kind == "failed":
            if self.isSignalConnected(QMetaMethod.fromSignal(self.failed)):
                self.failed.emit(value)
            else:
                # Nobody listens for this failure: report it app-wide rather than lose it.
                self._bridge.error.emit(self.label, describe_error(value))
        self.done.emit()


def describe_error(exc: object) -> str:
    """A one-line description of an exception for the user."""
    if isinstance(exc, BaseException):
        text = str(exc).strip()
        return text if text else type(exc).__name__
    return str(exc)


class _LoopThread(QThread):
    """The QThread that runs the asyncio loop until asked to stop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        super().__init__()
        self.setObjectName("herd-asyncio")
        self.loop = loop
        self._ready = ready

    def run(self) -> None:  # noqa: D401 - Qt override
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            # Cancel what is left so every coroutine's cleanup (closing clients, stopping
            # processes) runs before the loop closes.
            pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()


class AsyncBridge(QObject):
    """The app's asyncio loop in its own QThread, and the way in and out of it.

    Signals:
        error(str, str): a submitted call failed and nobody handled ``failed`` — (label, message).

    Usage::

        call = bridge.submit(client.status(), "status of node-a")
        call.finished.connect(card.show_status)
        call.failed.connect(card.show_error)
    """

    error = Signal(str, str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = _LoopThread(self._loop, ready)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the asyncio thread did not start")
        self._calls: set[Call] = set()
        self._closed = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop (only for code that runs *on* it; the GUI uses :meth:`submit`)."""
        return self._loop

    def is_running(self) -> bool:
        """True while the loop thread runs."""
        return self._thread.isRunning()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called: nothing more may be submitted."""
        return self._closed

    def submit(self, coro: Awaitable[Any], label: str = "background task",
               timeout: float | None = None) -> Call:
        """Run ``coro`` on the loop; its outcome comes back through the returned :class:`Call`.

        With ``timeout`` (seconds) a call that takes longer fails with a ``TimeoutError`` that
        names it, so no request can leave a widget waiting forever.
        """
        if self._closed:
            getattr(coro, "close", lambda: None)()
            raise RuntimeError("the bridge is closed")
        call = Call(label, self)
        call._coroutines.append(coro)
        if timeout is not None:
            coro = _bounded(coro, timeout, label)
            call._coroutines.append(coro)
        call.future = asyncio.run_coroutine_threadsafe(self._run(call, coro), self._loop)
        self._track(call)
        return call

    def stream(self, agen: AsyncIterator[Any] | Callable[[], AsyncIterator[Any]],
               label: str = "stream", batch_ms: float = 0.0) -> Call:
        """Iterate an async generator on the loop; each value arrives as ``Call.item``, in order.

        With ``batch_ms`` > 0, values that arrive within that many milliseconds of each other
        cross to the GUI thread together (one queued event instead of one per value): a model
        streaming thousands of tokens a second then costs the GUI a few events per frame, not
        thousands of thread hand-overs. ``item`` still fires once per value.
        """
        if self._closed:
            raise RuntimeError("the bridge is closed")
        call = Call(label, self)

        async def pump() -> None:
            it = agen() if callable(agen) else agen
            loop = asyncio.get_running_loop()
            pending: list[Any] = []
            timer: list[asyncio.TimerHandle] = []

            def flush() -> None:
                if timer:
                    timer.pop().cancel()
                if pending:
                    call._post.emit("items", pending.copy())
                    pending.clear()

            try:
                async for value in it:
                    if batch_ms <= 0:
                        call._post.emit("item", value)
                        continue
                    pending.append(value)
                    if not timer:
                        timer.append(loop.call_later(batch_ms / 1000.0, flush))
            finally:
                flush()
                aclose = getattr(it, "aclose", None)
                if aclose is not None:
                    await aclose()

        pumping = pump()
        call._coroutines.append(pumping)
        call.future = asyncio.run_coroutine_threadsafe(self._run(call, pumping), self._loop)
        self._track(call)
        return call

    def _track(self, call: Call) -> None:
        self._calls.add(call)
        call.done.connect(lambda c=call: self._calls.discard(c))

        def on_future_done(fut: concurrent.futures.Future) -> None:
            # A call cancelled before its coroutine ever ran would otherwise report nothing.
            if fut.cancelled() and not call._reported:
                call._reported = True
                call._post.emit("cancelled", None)

        call.future.add_done_callback(on_future_done)

    async def _run(self, call: Call, coro: Awaitable[Any]) -> Any:
        # Runs on the loop thread. Every outcome is reported; nothing dies silently.
        try:
            result = await coro
        except asyncio.CancelledError:
            call._reported = True
            call._post.emit("cancelled", None)
            raise
        except Exception as exc:  # noqa: BLE001 - reported to the GUI, never swallowed
            log.debug("%s failed:\n%s", call.label, traceback.format_exc())
            call._reported = True
            call._post.emit("failed", exc)
            return None
        call._reported = True
        call._post.emit("finished", result)
        return result

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run a plain function on the loop thread (e.g. to set an asyncio.Event)."""
        self._loop.call_soon_threadsafe(fn, *args)

    def close(self, timeout_ms: int = 10000) -> None:
        """Cancel every call, let their cleanup run, stop the loop and join the thread."""
        if self._closed:
            return
        self._closed = True
        calls = list(self._calls)
        for call in calls:
            call.cancel()
        if self._thread.isRunning():
            self._loop.call_soon_threadsafe(self._loop.stop)
            if not self._thread.wait(timeout_ms):
                log.error("the asyncio thread did not stop within %d ms", timeout_ms)
                return
        for call in calls:  # (the loop is gone: nothing can start them any more)
            for coro in call._coroutines:
                if inspect.iscoroutine(coro) and inspect.getcoroutinestate(coro) == inspect.CORO_CREATED:
                    coro.close()


async def in_background_thread(fn: Callable[..., Any], *args: Any, name: str = "herd-background") -> Any:
    """Run ``fn(*args)`` in a daemon thread of its own and await its result.

    Like ``asyncio.to_thread``, except that nothing waits for the thread: the loop's default
    executor is joined when the process exits, so a window closed while a model file of a
    quarter-million-token vocabulary was read stayed in the process list until the read ended
    (15 s on 2 cores). Here a cancelled await abandons the work, and a result that arrives after
    the loop has closed goes nowhere: it never reaches a window that is gone. For work that only
    reads (a file's header, a folder listing): a daemon thread is stopped mid-way at exit."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(outcome: Callable[[Any], None], value: Any) -> None:
        if not future.done():  # (cancelled meanwhile: nobody wants it)
            outcome(value)

    def work() -> None:
        try:
            outcome, value = future.set_result, fn(*args)
        except Exception as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            outcome, value = future.set_exception, exc
        try:
            loop.call_soon_threadsafe(settle, outcome, value)
        except RuntimeError:  # the loop is closed (the app closed): the result is dropped
            log.debug("%s ended after the loop closed; its result is dropped", name)

    threading.Thread(target=work, name=name, daemon=True).start()
    return await future


async def _bounded(coro: Awaitable[Any], timeout: float, label: str) -> Any:
    try:
        return await asyncio.wait_for(coro, timeout)
    except asyncio.TimeoutError:
        raise TimeoutError(f"{label} took longer than {timeout:g} s") from None
