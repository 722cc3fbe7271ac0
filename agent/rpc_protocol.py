"""The few pieces of llama.cpp's RPC wire protocol (ggml-rpc.cpp, protocol 7) that herd speaks.

A request is ``cmd u8 | size u64 | payload``, a reply ``size u64 | payload`` (little endian).
herd only ever asks three things, all of them cheap and answered at once by an idle worker:

* ``HELLO`` — the worker's protocol version (must be the first command on a connection);
* ``DEVICE_COUNT`` — how many devices it exposes (also the smallest request/reply pair, which
  the link probe times);
* ``GET_DEVICE_MEMORY`` — free and total bytes of one device.

The worker serves one client at a time, so these answer only while no llama-server holds it.
Sync helpers work on a blocking :class:`socket.socket`, async ones on an asyncio stream pair;
both share the packing and the reply checks below.
"""

from __future__ import annotations

import asyncio
import socket
import struct

CMD_GET_DEVICE_MEMORY = 11
CMD_HELLO = 14
CMD_DEVICE_COUNT = 15

#: Size of the HELLO request payload (``rpc_msg_hello_req``: the client's transport caps).
HELLO_REQ_SIZE = 24
#: Size of the HELLO reply: major, minor, patch, one pad byte, then the server's caps.
HELLO_REPLY_SIZE = 4 + HELLO_REQ_SIZE
#: No reply to the commands above is anywhere near this; a bigger size means a confused peer.
MAX_REPLY = 1024
#: Devices asked about at most (a worker reporting more is not one we understand).
MAX_DEVICES = 64


class RpcProtocolError(Exception):
    """The worker's reply does not have the shape the protocol promises."""


def pack_request(cmd: int, payload: bytes = b"") -> bytes:
    """One request on the wire: command byte, payload size, payload."""
    return struct.pack("<BQ", cmd, len(payload)) + payload


def parse_hello(body: bytes) -> str:
    """``"major.minor.patch"`` from a HELLO reply."""
    if len(body) != HELLO_REPLY_SIZE:
        raise RpcProtocolError(f"HELLO reply has {len(body)} bytes, expected {HELLO_REPLY_SIZE}")
    return f"{body[0]}.{body[1]}.{body[2]}"


def parse_device_count(body: bytes) -> int:
    """The device count from a DEVICE_COUNT reply."""
    if len(body) != 4:
        raise RpcProtocolError(f"DEVICE_COUNT reply has {len(body)} bytes, expected 4")
    return struct.unpack("<I", body)[0]


def device_memory_payload(index: int) -> bytes:
    """The GET_DEVICE_MEMORY request payload for device ``index``."""
    return struct.pack("<I", index)


def parse_device_memory(body: bytes) -> tuple[int, int]:
    """``(free, total)`` bytes from a GET_DEVICE_MEMORY reply."""
    if len(body) != 16:
        raise RpcProtocolError(f"GET_DEVICE_MEMORY reply has {len(body)} bytes, expected 16")
    return struct.unpack("<QQ", body)


def _reply_size(header: bytes, cmd: int) -> int:
    size = struct.unpack("<Q", header)[0]
    if size > MAX_REPLY:
        raise RpcProtocolError(f"reply of {size} bytes to command {cmd}")
    return size


# --------------------------------------------------------------------------------------------
# blocking sockets


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from ``sock``; :class:`ConnectionError` if the peer closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the RPC worker closed the connection")
        buf += chunk
    return bytes(buf)


def request(sock: socket.socket, cmd: int, payload: bytes = b"") -> bytes:
    """Send one command and return its reply payload."""
    sock.sendall(pack_request(cmd, payload))
    return recv_exact(sock, _reply_size(recv_exact(sock, 8), cmd))


def hello(sock: socket.socket) -> str:
    """HELLO on a fresh connection; the worker's protocol version."""
    return parse_hello(request(sock, CMD_HELLO, bytes(HELLO_REQ_SIZE)))


def device_memory(sock: socket.socket) -> list[tuple[int, int]]:
    """``(free, total)`` bytes of every device, in the worker's order (after :func:`hello`)."""
    count = parse_device_count(request(sock, CMD_DEVICE_COUNT))
    return [parse_device_memory(request(sock, CMD_GET_DEVICE_MEMORY, device_memory_payload(i)))
            for i in range(min(count, MAX_DEVICES))]


# --------------------------------------------------------------------------------------------
# asyncio streams


async def request_async(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cmd: int,
                        payload: bytes = b"", timeout: float = 2.0) -> bytes:
    """Send one command and return its reply payload; each read waits at most ``timeout`` s.

    Raises :class:`asyncio.IncompleteReadError` when the worker closes the connection.
    """
    writer.write(pack_request(cmd, payload))
    await writer.drain()
    size = _reply_size(await asyncio.wait_for(reader.readexactly(8), timeout), cmd)
    return await asyncio.wait_for(reader.readexactly(size), timeout)


async def hello_async(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      timeout: float = 2.0) -> str:
    """:func:`hello` over asyncio streams."""
    return parse_hello(await request_async(reader, writer, CMD_HELLO, bytes(HELLO_REQ_SIZE), timeout))


async def device_memory_async(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                              timeout: float = 2.0) -> list[tuple[int, int]]:
    """:func:`device_memory` over asyncio streams."""
    count = parse_device_count(await request_async(reader, writer, CMD_DEVICE_COUNT, b"", timeout))
    return [parse_device_memory(await request_async(reader, writer, CMD_GET_DEVICE_MEMORY,
                                                    device_memory_payload(i), timeout))
            for i in range(min(count, MAX_DEVICES))]
