"""Network failures become sentences a person can act on (#17), from real failures on loopback."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
from conftest import free_port

from agent.client import AgentClient, AgentError
from gui.cluster.chat.client import stream_chat
from gui.cluster.nodes.network_errors import explain


async def _agent_error(url: str) -> AgentError:
    async with AgentClient(url, timeout=2.0) as c:
        with pytest.raises(AgentError) as exc:
            await c.info()
    return exc.value


async def test_nothing_listening():
    exc = await _agent_error(f"http://127.0.0.1:{free_port()}")
    assert "ConnectError" in str(exc)  # what the library says…
    assert explain(exc).startswith("Nothing answers at that address. Check that herd-agent runs")


async def test_a_name_that_does_not_resolve(monkeypatch):
    # Stand-in: resolving a name would ask this machine's DNS server, which tests must not
    # reach (loopback only); the resolver answers as glibc does for an unknown name.
    def unknown(host, *args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    exc = await _agent_error("http://no-such-pc:50050")
    assert "Name or service not known" in str(exc)
    assert explain(exc).startswith("No computer of that name was found on the network")


async def test_no_reply_in_time():
    async def silent(reader, writer):
        await asyncio.sleep(5)
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with AgentClient(f"http://127.0.0.1:{port}", timeout=0.5) as c:
            with pytest.raises(AgentError) as exc:
                await c.info()
    finally:
        server.close()
    assert explain(exc.value).startswith("No reply in time.")


async def test_a_reply_cut_off_in_the_middle():
    """A chat stream whose server goes away mid-reply (as llama-server does when a worker dies)."""
    async def half(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        chunk = b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
        writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(half, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient() as client:
            with pytest.raises(Exception) as exc:
                async for _ in stream_chat(client, f"http://127.0.0.1:{port}", [{"role": "user", "content": "hi"}],
                                           max_tokens=8):
                    pass
    finally:
        server.close()
    assert "peer closed connection" in str(exc.value) or isinstance(exc.value, httpx.HTTPError)
    assert explain(exc.value) == ("The connection was cut off in the middle of the reply (the server or one of "
                                  "its workers stopped).")


def test_messages_written_on_purpose_stay():
    exc = AgentError("http://x: wrong PIN (HTTP 403); enter the PIN the node shows now", status=403)
    assert explain(exc) == str(exc)
