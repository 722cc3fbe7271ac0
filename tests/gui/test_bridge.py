"""The Qt ⇄ asyncio bridge: results arrive on the GUI thread as signals, cancellation works."""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings

import pytest
from PySide6.QtCore import Qt

from gui.bridge import AsyncBridge


async def _answer(value, delay=0.0):
    await asyncio.sleep(delay)
    return value, threading.get_ident()


def test_result_arrives_on_gui_thread(qtbot, bridge):
    call = bridge.submit(_answer(42), "answer")
    with qtbot.waitSignal(call.finished, timeout=5000) as sig:
        pass
    value, loop_thread = sig.args[0]
    assert value == 42
    # The coroutine ran on another thread, the slot on this one.
    assert loop_thread != threading.get_ident()


def test_early_result_is_not_lost(qtbot, bridge):
    # The coroutine finishes before we connect: the queued delivery still reaches the slot.
    call = bridge.submit(_answer("early"), "early")
    call.future.result(timeout=5)
    got = []
    call.finished.connect(lambda r: got.append(r[0]))
    qtbot.waitUntil(lambda: got == ["early"], timeout=5000)


def test_failure_is_reported(qtbot, bridge):
    async def boom():
        raise ValueError("node-a answered 500")

    call = bridge.submit(boom(), "status")
    with qtbot.waitSignal(call.failed, timeout=5000) as sig:
        pass
    assert isinstance(sig.args[0], ValueError)


def test_unhandled_failure_goes_to_bridge_error(qtbot, bridge):
    async def boom():
        raise RuntimeError("pairing refused")

    with qtbot.waitSignal(bridge.error, timeout=5000) as sig:
        bridge.submit(boom(), "pair node-b")
    assert sig.args == ["pair node-b", "pairing refused"]


def test_stream_items_in_order_and_cancel(qtbot, bridge):
    cleaned = threading.Event()

    async def ticks():
        try:
            i = 0
            while True:
                yield i
                i += 1
                await asyncio.sleep(0.001)
        finally:
            cleaned.set()

    call = bridge.stream(ticks(), "ticks")
    seen = []
    call.item.connect(seen.append)
    qtbot.waitUntil(lambda: len(seen) >= 20, timeout=5000)
    with qtbot.waitSignals([call.cancelled, call.done], order="strict", timeout=5000):
        call.cancel()
    assert seen[:20] == list(range(20))
    assert cleaned.wait(2)
    assert not call.running()


def test_close_joins_thread_and_cancels_work(qtbot, qapp):
    b = AsyncBridge()
    started = threading.Event()
    finalised = threading.Event()

    async def forever():
        started.set()
        try:
            await asyncio.sleep(3600)
        finally:
            finalised.set()

    b.submit(forever(), "forever")
    assert started.wait(5)
    b.close()
    assert not b.is_running()
    assert finalised.is_set()
    with pytest.raises(RuntimeError):
        b.submit(_answer(1), "late")


def test_batched_stream_keeps_every_item_in_order(qtbot, bridge):
    async def burst():
        for i in range(2000):
            yield i
            if i % 100 == 0:
                await asyncio.sleep(0.01)  # pauses longer than the batch window flush on time

    call = bridge.stream(burst(), "burst", batch_ms=4.0)
    seen, handovers = [], []
    call.item.connect(seen.append)
    # the hand-overs to the GUI thread (queued events), as the bridge posts them
    call._post.connect(lambda kind, _payload: handovers.append(kind), Qt.ConnectionType.DirectConnection)
    with qtbot.waitSignal(call.done, timeout=10000):
        pass
    assert seen == list(range(2000))
    # batched: about one hand-over per burst of 100, not one per value
    assert "item" not in handovers and 0 < handovers.count("items") <= 200, handovers.count("items")


def test_timeout_fails_the_call_with_its_name(qtbot, bridge):
    call = bridge.submit(asyncio.sleep(30), "pair node-a", timeout=0.1)
    with qtbot.waitSignal(call.failed, timeout=5000) as sig:
        pass
    assert isinstance(sig.args[0], TimeoutError) and "pair node-a" in str(sig.args[0])


@pytest.mark.parametrize("how", ["submit", "submit with timeout", "stream"])
def test_work_cancelled_before_it_started_is_closed_with_the_bridge(qtbot, qapp, how):
    """The window closes while the loop is still busy with one thing and more was asked of it:
    what never started is closed with the bridge, not collected later as "never awaited"."""
    bridge = AsyncBridge()
    busy = threading.Event()
    bridge.call_soon(busy.wait, 5)  # holds the loop thread until the call is cancelled
    if how == "stream":
        async def items():
            yield 1
        call = bridge.stream(items, "items")
    else:
        call = bridge.submit(_answer(1), "answer", timeout=5 if how == "submit with timeout" else None)
    call.cancel()
    busy.set()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bridge.close()
        del call
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
