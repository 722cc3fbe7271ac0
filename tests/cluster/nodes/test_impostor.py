"""A host that copies a paired node's id gets nothing from the master: real herd-agent processes,
real zeroconf and real HTTPS on loopback. The impostors listen on 127.0.0.2 (another loopback
address) with a key of their own, relay the public calls to the real agent, and record every
request that reaches them: no protected call may, since the master pins the node's key and the
TLS handshake with any other key fails before a request is sent."""

from __future__ import annotations

import asyncio
import json
import os
import socket

import httpx
import pytest
from aiohttp import web
from cluster.agents import start_agent
from conftest import free_port
from e2e.herd_cli import herd
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

from agent import protocol as P
from agent.client import AgentClient, KeyMismatch
from agent.identity import client_context, load_or_create, server_context
from gui.cluster.nodes.discovery import Discovery
from gui.cluster.nodes.records import TokenStore

LOOPBACK = ["127.0.0.1"]
ROGUE_IP = "127.0.0.2"
PUBLIC = {P.PATH_INFO, P.PATH_PING}


class RogueApi:
    """An impostor of a herd agent's API over TLS with its own key: answers ``info``/``ping`` as
    the copied node (relayed to the real agent, or by itself when ``node_id`` is set) and takes
    every other request it gets."""

    def __init__(self, real_url: str, folder, ip: str = ROGUE_IP, port: int | None = None,
                 node_id: str = "") -> None:
        self.real_url = real_url
        self.ip = ip
        self.node_id = node_id
        self.paths: list[str] = []
        self.port = port or free_port()
        self.identity = load_or_create(folder, "rogue", "rogue")
        self._runner: web.AppRunner | None = None

    @web.middleware
    async def _record(self, request: web.Request, handler):
        self.paths.append(request.path)
        return await handler(request)

    async def _copy(self, request: web.Request) -> web.Response:
        if self.node_id:
            return web.json_response({"ok": True, "id": self.node_id, "name": "alpha", "paired": True})
        async with httpx.AsyncClient(base_url=self.real_url, verify=client_context()) as h:
            r = await h.request(request.method, request.path, content=await request.read(),
                                headers={"Content-Type": "application/json"})
        return web.json_response(r.json(), status=r.status_code)

    async def _anything(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def start(self) -> "RogueApi":
        app = web.Application(middlewares=[self._record])
        app.router.add_get(P.PATH_INFO, self._copy)
        app.router.add_get(P.PATH_PING, self._copy)
        app.router.add_route("*", "/{tail:.*}", self._anything)  # would take any call sent here
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.ip, self.port, ssl_context=server_context(self.identity)).start()
        return self

    @property
    def url(self) -> str:
        return f"https://{self.ip}:{self.port}"

    @property
    def protected_calls(self) -> list[str]:
        return [p for p in self.paths if p not in PUBLIC]

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


#: The real agent's mDNS name: one no other agent on this machine has (an agent of an earlier
#: test may still be announced for a moment, and two agents named alike get renamed).
AGENT_NAME = f"alpha-{os.getpid()}"


async def _paired_agent(procs, tmp_path, tokens: TokenStore):
    agent = start_agent(procs.popen, tmp_path, AGENT_NAME)
    async with Discovery(LOOPBACK, tokens=tokens) as disc:
        assert await disc.wait_until(lambda n: agent.node_id in n, 10), "agent not browsed"
        await disc.pair(disc.nodes[agent.node_id], agent.pin())
    return agent


async def _advertise_copy(zc: AsyncZeroconf, agent, rogue_port: int) -> AsyncServiceInfo:
    """Advertise the real agent's TXT record (id, fp, ...) as the rogue's, at ROGUE_IP."""
    real_name = f"{AGENT_NAME}.{P.SERVICE_TYPE}"
    real = AsyncServiceInfo(P.SERVICE_TYPE, real_name)
    assert await real.async_request(zc.zeroconf, 3000), "real agent's record not found"
    props = {k.decode(): (v.decode() if v is not None else None) for k, v in real.properties.items()}
    assert props[P.TXT_ID] == agent.node_id
    props[P.TXT_API] = str(rogue_port)
    info = AsyncServiceInfo(P.SERVICE_TYPE, f"impostor.{P.SERVICE_TYPE}", port=rogue_port,
                            properties=props, addresses=[socket.inet_aton(ROGUE_IP)],
                            server="impostor.local.")
    await zc.async_register_service(info)
    return info


async def test_discovery_keeps_the_real_node_and_never_calls_an_impostor(procs, tmp_path):
    tokens = TokenStore(tmp_path / "tokens.json")
    agent = await _paired_agent(procs, tmp_path, tokens)
    rogue = await RogueApi(agent.api_url, tmp_path / "rogue").start()
    zc = AsyncZeroconf(interfaces=LOOPBACK)
    try:
        # A new session (as after a restart).
        async with Discovery(LOOPBACK, tokens=tokens) as disc:
            assert await disc.wait_until(lambda n: agent.node_id in n, 10)
            # The real agent has the pinned key, so calls go there.
            async with disc.client(agent.node_id) as c:
                assert (await c.status())["id"] == agent.node_id

            await _advertise_copy(zc, agent, rogue.port)
            assert await disc.wait_until(lambda n: ROGUE_IP in n[agent.node_id].impostor, 15), \
                "impostor not reported"
            node = disc.nodes[agent.node_id]
            assert node.host == "127.0.0.1" and node.api_url == agent.api_url  # not moved
            assert f"{rogue.url} claims to be node {agent.node_id}" in node.impostor
            assert "not the one pinned at pairing" in node.impostor
            assert node.to_json()["impostor"] == node.impostor
            async with disc.client(node) as c:  # the real node still works
                assert (await c.status())["id"] == agent.node_id

            # The impostor leaves: the report goes, the real node stays.
            await zc.async_unregister_all_services()
            assert await disc.wait_until(lambda n: not n[agent.node_id].impostor, 10)
            assert disc.nodes[agent.node_id].host == "127.0.0.1"
    finally:
        await zc.async_close()
        await rogue.close()
    assert rogue.protected_calls == []


async def test_a_pinned_client_sends_nothing_to_an_address_with_another_key(procs, tmp_path):
    tokens = TokenStore(tmp_path / "tokens.json")
    agent = await _paired_agent(procs, tmp_path, tokens)
    rogue = await RogueApi(agent.api_url, tmp_path / "rogue").start()
    me = load_or_create(tmp_path, "master", "x")  # the identity Discovery made beside the store
    try:
        async with AgentClient(rogue.url) as c:  # unpinned, public: it looks like the node
            assert (await c.info())["id"] == agent.node_id
        async with AgentClient(rogue.url, identity=me, pinned=tokens.get(agent.node_id),
                               node_id=agent.node_id) as c:
            for call in (c.info, c.status, c.rpc_start, c.rpc_stop, c.rpc_log, c.bandwidth, c.unpair):
                with pytest.raises(KeyMismatch, match=f"{rogue.url}: the key of whoever answers there "
                                                      "is not the key pinned"):
                    await call()
    finally:
        await rogue.close()
    assert rogue.paths == [P.PATH_INFO]  # only the unpinned public call reached it


async def test_a_second_real_agent_with_a_copied_id_and_pairings_fails_the_key_check(procs, tmp_path):
    tokens = TokenStore(tmp_path / "tokens.json")
    agent = await _paired_agent(procs, tmp_path, tokens)
    # Copy the paired node's id and its pairings (but not its private key).
    state_dir = tmp_path / "agent-copy"
    state_dir.mkdir()
    real_state = json.loads((agent.state_dir / "agent-state.json").read_text())
    (state_dir / "agent-state.json").write_text(json.dumps(real_state))
    copy = start_agent(procs.popen, tmp_path, "copy", bind=ROGUE_IP, mdns=False)
    assert copy.node_id == agent.node_id
    async with Discovery(browse=False, tokens=tokens) as disc:
        node = await disc.add_address(copy.api_url)
        assert node.id == agent.node_id and node.host == ROGUE_IP
        async with disc.client(node) as c:
            with pytest.raises(KeyMismatch, match=f"{copy.api_url}: the key .* is not the key pinned"):
                await c.rpc_start()
    async with AgentClient(copy.api_url) as c:
        assert (await c.info())["id"] == agent.node_id  # it answers in public as the node


def _record(name: str, node_id: str, ip: str, api_port: int) -> AsyncServiceInfo:
    props = P.build_txt(node_id=node_id, version="1", api_port=api_port, rpc_port=0, echo_port=0,
                        state=P.STATE_STOPPED)
    return AsyncServiceInfo(P.SERVICE_TYPE, f"{name}.{P.SERVICE_TYPE}", port=api_port, properties=props,
                            addresses=[socket.inet_aton(ip)], server=f"{name}.local.")


async def test_an_impostor_seen_first_is_flagged_then_the_real_node_takes_over(procs, tmp_path):
    # The real agent does not advertise itself here; the test announces it (at its real address)
    # only after the impostor, to see the order "impostor first".
    agent = start_agent(procs.popen, tmp_path, "alpha", mdns=False)
    tokens = TokenStore(tmp_path / "tokens.json")
    async with Discovery(browse=False, tokens=tokens) as disc:
        await disc.pair(await disc.add_address(agent.api_url), agent.pin())
    api_port = int(agent.api_url.rsplit(":", 1)[1])
    rogue = await RogueApi(agent.api_url, tmp_path / "rogue").start()
    zc = AsyncZeroconf(interfaces=LOOPBACK)
    try:
        async with Discovery(LOOPBACK, tokens=tokens) as disc:
            fake = _record("impostor", agent.node_id, ROGUE_IP, rogue.port)
            await zc.async_register_service(fake)
            assert await disc.wait_until(lambda n: agent.node_id in n, 10)
            node = disc.nodes[agent.node_id]
            assert node.host == ROGUE_IP and rogue.url in node.impostor  # listed, flagged
            async with disc.client(node) as c:
                with pytest.raises(KeyMismatch, match=rogue.url):
                    await c.status()

            await zc.async_register_service(_record("alpha", agent.node_id, "127.0.0.1", api_port))
            assert await disc.wait_until(lambda n: n[agent.node_id].host == "127.0.0.1", 10)
            assert rogue.url in disc.nodes[agent.node_id].impostor  # still reported
            async with disc.client(agent.node_id) as c:
                assert (await c.status())["id"] == agent.node_id

            # The impostor's goodbye clears the report and does not take the real node with it.
            await zc.async_unregister_service(fake)
            assert await disc.wait_until(lambda n: not n[agent.node_id].impostor, 10)
            assert disc.nodes[agent.node_id].host == "127.0.0.1"
    finally:
        await zc.async_close()
        await rogue.close()
    assert rogue.protected_calls == []


async def test_an_address_is_checked_again_after_its_node_went_silent(procs, tmp_path):
    agent = start_agent(procs.popen, tmp_path, "alpha", mdns=False)
    tokens = TokenStore(tmp_path / "tokens.json")
    api_port = int(agent.api_url.rsplit(":", 1)[1])
    async with Discovery(browse=False, tokens=tokens, ping_interval=0.5, ping_timeout=0.5) as disc:
        await disc.pair(await disc.add_address(agent.api_url), agent.pin())
        node = disc.nodes[agent.node_id]
        async with disc.client(node) as c:
            assert (await c.status())["id"] == agent.node_id  # proven at 127.0.0.1:port
        agent.proc.kill()
        agent.proc.wait(timeout=5)
        assert await disc.wait_until(lambda n: not n[agent.node_id].reachable, 10)
        # Someone else takes over the very address and answers as the node.
        rogue = await RogueApi(agent.api_url, tmp_path / "rogue", ip="127.0.0.1", port=api_port,
                               node_id=agent.node_id).start()
        try:
            # It answers the public ping as the node, but the master pings a paired node with
            # the pinned key (#25): the node stays unreachable, and no call goes there.
            await disc.ping_all()
            await disc.ping_all()
            assert not disc.nodes[agent.node_id].reachable
            assert rogue.paths == []  # the pinned handshake failed before any request
            async with disc.client(agent.node_id) as c:
                with pytest.raises(KeyMismatch, match=rogue.url):
                    await c.status()
        finally:
            await rogue.close()
    assert rogue.protected_calls == []


async def test_herd_nodes_warns_about_an_impostor(procs, tmp_path):
    env = {**os.environ, "HERD_CONFIG_DIR": str(tmp_path / "master-config")}
    agent = start_agent(procs.popen, tmp_path, "alpha")
    r = await asyncio.to_thread(herd, ["pair", agent.api_url, "--pin", agent.pin()], env)
    assert r.returncode == 0, r.stderr
    rogue = await RogueApi(agent.api_url, tmp_path / "rogue").start()
    zc = AsyncZeroconf(interfaces=LOOPBACK)
    try:
        await zc.async_register_service(_record("impostor", agent.node_id, ROGUE_IP, rogue.port))
        # herd runs in a thread: this loop keeps serving the impostor and its mDNS record.
        r = await asyncio.to_thread(herd, ["nodes", "--interface", "127.0.0.1", "--timeout", "3"], env)
    finally:
        await zc.async_close()
        await rogue.close()
    assert r.returncode == 0, r.stderr
    assert f"warning: alpha: wrong key: the agent at {rogue.url} claims to be node " \
           f"{agent.node_id}" in r.stdout, r.stdout
    assert agent.api_url.removeprefix("https://") in r.stdout  # the real node is listed where it is
    assert rogue.protected_calls == []
