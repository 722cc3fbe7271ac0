"""The app's live connection to the cluster core, run on the bridge's asyncio loop.

Widgets send intentions (“chat this”, “pair that node”); :class:`ClusterSession` turns each into
a coroutine of the Qt-free core (``gui.cluster``) submitted through the one
:class:`gui.bridge.AsyncBridge`, and hands back the :class:`gui.bridge.Call` whose signals carry
the outcome. It holds the loop-side objects that must be shared: one ``httpx.AsyncClient``.
"""

from __future__ import annotations

import httpx
from PySide6.QtCore import QObject

from gui.bridge import AsyncBridge, Call
from gui.cluster.chat import stream_chat


class ClusterSession(QObject):
    """Everything the window asks of the cluster, as bridge calls.

    Attributes:
        bridge: the app's :class:`AsyncBridge`.
        server_url: the running llama-server's base URL, or None.
    """

    def __init__(self, bridge: AsyncBridge, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.server_url: str | None = None
        self._http: httpx.AsyncClient | None = None

    async def http(self) -> httpx.AsyncClient:
        """The shared HTTP client (created on the loop thread, where it is used)."""
        if self._http is None:
            # Streaming replies can pause for long; connect fast, read patiently.
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=5.0))
        return self._http

    def chat(self, messages: list[dict], params: dict, url: str | None = None) -> Call:
        """Stream a chat reply from ``url`` (default: the running server)."""
        base = url or self.server_url
        if not base:
            raise RuntimeError(self.tr("No llama-server is running."))

        async def events():
            client = await self.http()
            async for ev in stream_chat(client, base, messages, **params):
                yield ev

        return self.bridge.stream(events, "chat")

    def chat_sender(self, url: str | None = None):
        """A ``send(messages, params)`` function for :class:`gui.widgets.chat_pane.ChatPane`."""
        return lambda messages, params: self.chat(messages, params, url)

    def close(self) -> None:
        """Close the loop-side objects (call before closing the bridge)."""
        if self._http is not None and self.bridge.is_running():
            http, self._http = self._http, None
            call = self.bridge.submit(http.aclose(), "close http")
            try:
                call.future.result(timeout=5)
            except Exception:  # noqa: BLE001 - closing on exit; nothing left to tell
                pass
