"""A stand-in master, run inside a simulated-LAN namespace by the LAN tests (not a test module).

    python master_script.py browse IP COUNT TIMEOUT   → JSON list of adverts found via mDNS on IP
    python master_script.py pair URL PIN              → pairs, starts the RPC worker, prints the token
    python master_script.py probe HOST PORT           → "ok <proto>", "refused <how>" (the
                                                        connection was accepted, then closed
                                                        before an answer), "unreachable <error>"
                                                        or "timeout"; anything else is a crash
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import asdict

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


async def pair(url: str, pin: str) -> None:
    async with AgentClient(url) as c:
        token = await c.pair(pin, "lan-master")
        await c.rpc_start()
        deadline = time.monotonic() + 15
        while (await c.status())["rpc"]["state"] != P.STATE_READY:
            if time.monotonic() > deadline:
                raise SystemExit("worker not ready")
            await asyncio.sleep(0.05)
    print(token)


async def probe(host: str, port: int) -> None:
    # The relay refuses by closing a connection it accepted; a port where nothing listens, a
    # silent one and a bug in the probe are other outcomes, and must not read as a refusal.
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


def main() -> None:
    cmd, *args = sys.argv[1:]
    if cmd == "browse":
        asyncio.run(browse(args[0], int(args[1]), float(args[2])))
    elif cmd == "pair":
        asyncio.run(pair(args[0], args[1]))
    elif cmd == "probe":
        asyncio.run(probe(args[0], int(args[1])))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
