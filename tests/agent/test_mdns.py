"""mDNS on real sockets (loopback): an agent is browsed within 1 s of its ready line, its TXT
follows the worker's state, and a clean exit removes it within 3 s."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid

import pytest
from zeroconf import IPVersion, ServiceStateChange
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

from agent import protocol as P
from agent.client import AgentClient
from conftest import free_port


class Browser:
    """A master-side browser on loopback that records (time, change, name)."""

    def __init__(self) -> None:
        self.zc = AsyncZeroconf(interfaces=["127.0.0.1"], ip_version=IPVersion.V4Only)
        self.events: list[tuple[float, ServiceStateChange, str]] = []
        self.browser = AsyncServiceBrowser(self.zc.zeroconf, P.SERVICE_TYPE, handlers=[self._on])

    def _on(self, zeroconf, service_type, name, state_change) -> None:
        self.events.append((time.monotonic(), state_change, name))

    async def first(self, change: ServiceStateChange, timeout: float, name: str | None = None):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, c, n in self.events:
                if c == change and (name is None or n == name):
                    return t, n
            await asyncio.sleep(0.01)
        return None

    async def advert(self, name: str) -> P.NodeAdvert | None:
        info = AsyncServiceInfo(P.SERVICE_TYPE, name)
        if not await info.async_request(self.zc.zeroconf, 2000):
            return None
        return P.parse_txt(info.properties, name=name, addresses=info.parsed_addresses())

    async def close(self) -> None:
        await self.browser.async_cancel()
        await self.zc.async_close()


async def test_agent_is_browsed_tells_no_worker_state_and_says_goodbye(tmp_path, procs, engine, agent_process):
    browser = Browser()
    try:
        api, rpc, echo = free_port(), free_port(), free_port()
        # other agents may be advertising on this loopback too: look for ours by a unique name
        node = f"mdns-node-{uuid.uuid4().hex[:8]}"
        name = f"{node}.{P.SERVICE_TYPE}"
        argv = agent_process.argv(tmp_path, name=node, bind="127.0.0.1", api_port=api,
                                  rpc_port=rpc, echo_port=echo, mdns_ip="127.0.0.1")
        ap = agent_process.start(procs.popen, argv, tmp_path)
        await asyncio.get_running_loop().run_in_executor(None, ap.wait_ready)
        found = await browser.first(ServiceStateChange.Added, 1.0, name)
        assert found is not None, "not browsed within 1 s of the ready line"

        adv = await browser.advert(name)
        assert adv is not None
        assert (adv.node_id, adv.api_port, adv.rpc_port, adv.echo_port) == (ap.node_id, api, rpc, echo)
        assert adv.engine == "11434" and adv.proto == "7.0.0"
        assert "127.0.0.1" in adv.addresses and len(adv.fingerprint) == 16

        # The record never says whether the worker runs or is busy: that is for its masters (#25)
        from agent.identity import load_or_create
        from agent.pairing import PinFile
        pin = PinFile(tmp_path).show()  # what `herd-agent pin` does on the node
        async with AgentClient(ap.api_url, identity=load_or_create(tmp_path / "master", "master", "m")) as c:
            await c.pair(pin)
            await c.rpc_start()
            deadline = time.monotonic() + 10
            while (await c.status()).rpc.state != P.STATE_READY:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
        info = AsyncServiceInfo(P.SERVICE_TYPE, name)
        assert await info.async_request(browser.zc.zeroconf, 2000)
        assert P.TXT_STATE.encode() not in info.properties and P.TXT_ID.encode() in info.properties

        ap.proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        rc = await asyncio.get_running_loop().run_in_executor(None, ap.wait_exit, 3.0)
        assert rc == 0 and time.monotonic() - sent < 3.0
        gone = await browser.first(ServiceStateChange.Removed, 3.0, name)
        assert gone is not None and gone[0] - sent < 3.0, "no goodbye within 3 s"
    finally:
        await browser.close()


async def test_sigint_also_exits_cleanly(tmp_path, procs, agent_process):
    argv = agent_process.argv(tmp_path, name="sigint-node", bind="127.0.0.1", api_port=free_port(),
                                    rpc_port=free_port(), echo_port=free_port(), mdns_ip=None)
    ap = agent_process.start(procs.popen, argv, tmp_path)
    await asyncio.get_running_loop().run_in_executor(None, ap.wait_ready)
    ap.proc.send_signal(signal.SIGINT)
    rc = await asyncio.get_running_loop().run_in_executor(None, ap.wait_exit, 3.0)
    assert rc == 0
    assert any("stopped" in ln for ln in ap.lines)
