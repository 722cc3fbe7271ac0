"""A stand-in master, run inside a simulated-LAN namespace by the LAN tests (not a test module).

    python master_script.py browse IP COUNT TIMEOUT   → JSON list of adverts found via mDNS on IP
    python master_script.py pair URL PIN DIR          → pairs by PAKE with the master identity in
                                                        DIR (made if missing), pins the agent's
                                                        certificate there (DIR/agent.pem), starts
                                                        the RPC worker, prints the agent's key
                                                        fingerprint
    python master_script.py probe HOST PORT [DIR]     → "ok <proto>", "refused <how>" (the
                                                        connection was accepted, then closed
                                                        before an answer), "unreachable <error>"
                                                        or "timeout"; anything else is a crash.
                                                        With DIR: through a TLS forwarder with
                                                        the keys in DIR, as a real master does;
                                                        without: plain TCP, as llama-server would
    python master_script.py hold HOST PORT DIR        → connects through a TLS forwarder with the
                                                        keys in DIR, says hello, prints "holding"
                                                        and keeps the connection open (as an idle
                                                        llama-server does) until it is killed
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from zeroconf import IPVersion, ServiceStateChange
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

from agent import protocol as P
from agent.client import AgentClient
from agent.rpc_server import RpcProbeError, probe_rpc


async def browse(ip: str, count: int, timeout: float) -> None:
    zc = AsyncZeroconf(interfaces=[ip], ip_version=IPVersion.V4Only)
    names: list[str] = []

    def on(zeroconf, service_type, name, state_change) -> None:
        if state_change == ServiceStateChange.Added and name not in names:
            names.append(name)

    browser = AsyncServiceBrowser(zc.zeroconf, P.SERVICE_TYPE, handlers=[on])
    start = time.monotonic()
    while len(names) < count and time.monotonic() - start < timeout:
        await asyncio.sleep(0.02)
    found = []
    for name in names:
        info = AsyncServiceInfo(P.SERVICE_TYPE, name)
        if await info.async_request(zc.zeroconf, 2000):
            adv = P.parse_txt(info.properties, name=name, addresses=info.parsed_addresses())
            if adv is not None:
                found.append(asdict(adv))
    await browser.async_cancel()
    await zc.async_close()
    print(json.dumps({"elapsed": time.monotonic() - start, "adverts": found}))


def _identity(folder: str):
    from agent.identity import load_or_create
    return load_or_create(Path(folder), "master", "lan master")


async def pair(url: str, pin: str, folder: str) -> None:
    async with AgentClient(url, identity=_identity(folder)) as c:
        cert = await c.pair(pin, "lan-master")
        (Path(folder) / "agent.pem").write_text(cert)
        await c.rpc_start()
        deadline = time.monotonic() + 15
        while (await c.status())["rpc"]["state"] != P.STATE_READY:
            if time.monotonic() > deadline:
                raise SystemExit("worker not ready")
            await asyncio.sleep(0.05)
    print(c.fingerprint)


async def probe(host: str, port: int, folder: str | None = None) -> None:
    # The relay refuses by closing a connection it accepted; a port where nothing listens, a
    # silent one and a bug in the probe are other outcomes, and must not read as a refusal.
    forwarder = None
    if folder:
        from gui.cluster.nodes.tunnel import Forwarder
        forwarder = await Forwarder(host, port, _identity(folder), (Path(folder) / "agent.pem").read_text()).start()
        host, port = "127.0.0.1", int(forwarder.endpoint.rsplit(":", 1)[1])
    try:
        proto, _ = await probe_rpc(host, port, timeout=3.0)
        print(f"ok {proto}")
    except RpcProbeError as exc:
        if not isinstance(exc.__cause__, asyncio.IncompleteReadError):
            raise  # a malformed answer is not a refusal
        print(f"refused closed: {exc}")
    except (ConnectionResetError, BrokenPipeError) as exc:
        print(f"refused {type(exc).__name__}: {exc}")
    except asyncio.TimeoutError:
        print("timeout")
    except OSError as exc:
        print(f"unreachable {type(exc).__name__}: {exc}")
    if forwarder is not None:
        await forwarder.close()


async def hold(host: str, port: int, folder: str) -> None:
    from agent.rpc_protocol import hello_async
    from gui.cluster.nodes.tunnel import Forwarder
    forwarder = await Forwarder(host, port, _identity(folder), (Path(folder) / "agent.pem").read_text()).start()
    reader, writer = await asyncio.open_connection("127.0.0.1", int(forwarder.endpoint.rsplit(":", 1)[1]))
    print("holding", await hello_async(reader, writer, 5.0), flush=True)
    await asyncio.Event().wait()


def main() -> None:
    cmd, *args = sys.argv[1:]
    if cmd == "browse":
        asyncio.run(browse(args[0], int(args[1]), float(args[2])))
    elif cmd == "pair":
        asyncio.run(pair(args[0], args[1], args[2]))
    elif cmd == "hold":
        asyncio.run(hold(args[0], int(args[1]), args[2]))
    elif cmd == "probe":
        asyncio.run(probe(args[0], int(args[1]), args[2] if len(args) > 2 else None))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
