"""The launch log keeps flowing after llama-server's bounded log deque is full."""

from __future__ import annotations

import asyncio
from collections import deque
from types import SimpleNamespace

from gui.session import ClusterSession


def test_log_pump_survives_a_full_deque(qtbot, bridge):
    session = ClusterSession(bridge)
    # ServerProcess keeps its log in a deque with maxlen; at -lv 5 it fills within seconds.
    server = SimpleNamespace(log=deque(maxlen=100), state="loading", error=None)
    launcher = SimpleNamespace(server=server)
    got: list[str] = []
    session.serverLog.connect(got.extend)

    async def feed():
        pump = asyncio.get_running_loop().create_task(session._pump_log(launcher))
        for i in range(1000):
            server.log.append(f"line {i}")
            if i % 50 == 49:
                await asyncio.sleep(0.3)  # the pump reads every 0.25 s
        await asyncio.sleep(0.6)
        pump.cancel()

    call = bridge.submit(feed(), "feed")
    with qtbot.waitSignal(call.done, timeout=30000):
        pass
    qtbot.waitUntil(lambda: got[-1:] == ["line 999"], timeout=5000)
    assert got == [f"line {i}" for i in range(1000)]
