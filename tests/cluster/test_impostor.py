"""A host that copies a paired node's id never gets that node's token: real herd-agent processes,
real zeroconf and real HTTP on loopback. The impostors listen on 127.0.0.2 (another loopback
address) and record every ``Authorization`` header they receive — they must see none."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket

import httpx
import pytest
from aiohttp import web
from cluster.agents import start_agent
from conftest import free_port
from e2e.herd_cli import herd
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

from agent import protocol as P
from agent.client import AgentClient, IdentityNotProven
from gui.cluster.discovery import Discovery
from gui.cluster.nodes import TokenStore

LOOPBACK = ["127.0.0.1"]
ROGUE_IP = "127.0.0.2"


class RogueApi:
    """An impostor of a herd agent's API: answers ``info``/``ping`` as the copied node and either
    relays ``/prove`` challenges to the real agent (``relay=True``) or forges an answer."""

    def __init__(self, real_url: str, relay: bool, ip: str = ROGUE_IP, port: int | None = None,
                 node_id: str = "") -> None:
        self.real_url = real_url
        self.relay = relay
        self.ip = ip
        self.node_id = node_id  # when set, info/ping are answered here (the real agent may be gone)
        self.authorizations: list[str] = []
        self.paths: list[str] = []
        self.port = port or free_port()
        self._runner: web.AppRunner | None = None

    @web.middleware
    async def _record(self, request: web.Request, handler):
        self.paths.append(request.path)
        if "Authorization" in request.headers:
            self.authorizations.append(request.headers["Authorization"])
        return await handler(request)

    async def _copy(self, request: web.Request) -> web.Response:
        if self.node_id:
            return web.json_response({"ok": True, "id": self.node_id, "name": "alpha", "paired": True})
        async with httpx.AsyncClient(base_url=self.real_url) as h:
            r = await h.request(request.method, request.path, content=await request.read(),
                                headers={"Content-Type": "application/json"})
        return web.json_response(r.json(), status=r.status_code)

    async def _prove(self, request: web.Request) -> web.Response:
        if self.relay:
            return await self._copy(request)
        return web.json_response({"mac": secrets.token_hex(32), "address": self.ip, "id": "forged"})

    async def _anything(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def start(self) -> "RogueApi":
        app = web.Application(middlewares=[self._record])
        app.router.add_get(P.PATH_INFO, self._copy)
        app.router.add_get(P.PATH_PING, self._copy)
        app.router.add_post(P.PATH_PROVE, self._prove)
        app.router.add_route("*", "/{tail:.*}", self._anything)  # would take the token if sent
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.ip, self.port).start()
        return self

    @property
    def url(self) -> str:
        return f"http://{self.ip}:{self.port}"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


async def _paired_agent(procs, tmp_path, tokens: TokenStore):
    agent = start_agent(procs.popen, tmp_path, "alpha")
    async with Discovery(LOOPBACK, tokens=tokens) as disc:
        assert await disc.wait_until(lambda n: agent.node_id in n, 10), "agent not browsed"
        await disc.pair(disc.nodes[agent.node_id], agent.pin())
    return agent


async def _advertise_copy(zc: AsyncZeroconf, agent, rogue_port: int) -> AsyncServiceInfo:
    """Advertise the real agent's TXT record (id, fp, ...) as the rogue's, at ROGUE_IP."""
    real_name = f"alpha.{P.SERVICE_TYPE}"
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


async def test_discovery_keeps_the_real_node_and_never_sends_the_token_to_an_impostor(procs, tmp_path):
    tokens = TokenStore(tmp_path / "tokens.json")
    agent = await _paired_agent(procs, tmp_path, tokens)
    rogue = await RogueApi(agent.api_url, relay=True).start()
    zc = AsyncZeroconf(interfaces=LOOPBACK)
    try:
        # A new session (as after a restart): nothing proven yet.
        async with Discovery(LOOPBACK, tokens=tokens) as disc:
            assert await disc.wait_until(lambda n: agent.node_id in n, 10)
            # The real agent proves who it is, so its token is used there.
            async with disc.client(agent.node_id) as c:
                assert (await c.status())["id"] == agent.node_id

            await _advertise_copy(zc, agent, rogue.port)
            assert await disc.wait_until(lambda n: ROGUE_IP in n[agent.node_id].impostor, 15), \
                "impostor not reported"
            node = disc.nodes[agent.node_id]
            assert node.host == "127.0.0.1" and node.api_url == agent.api_url  # not moved
            assert f"{rogue.url} claims to be node {agent.node_id}" in node.impostor
            assert "relayed or forwarded" in node.impostor  # the relayed proof is for 127.0.0.1
            assert node.to_json()["impostor"] == node.impostor
            assert P.PATH_PROVE in rogue.paths  # it was challenged ...
            async with disc.client(node) as c:  # ... and the real node still works
                assert (await c.status())["id"] == agent.node_id

            # The impostor leaves: the report goes, the real node stays.
            await zc.async_unregister_all_services()
            assert await disc.wait_until(lambda n: not n[agent.node_id].impostor, 10)
            assert disc.nodes[agent.node_id].host == "127.0.0.1"
    finally:
        await zc.async_close()
        await rogue.close()
    assert rogue.authorizations == []


@pytest.mark.parametrize("relay", [True, False], ids=["relayed-proof", "forged-proof"])
async def test_a_client_refuses_to_send_the_token_to_an_address_that_fails_the_proof(procs, tmp_path, relay):
    tokens = TokenStore(tmp_path / "tokens.json")
    agent = await _paired_agent(procs, tmp_path, tokens)
    rogue = await RogueApi(agent.api_url, relay=relay).start()
    try:
        async with AgentClient(rogue.url, token=tokens.get(agent.node_id), node_id=agent.node_id) as c:
            assert (await c.info())["id"] == agent.node_id  # public calls: it looks like the node
            for call in (c.status, c.rpc_start, c.rpc_stop, c.rpc_log, c.bandwidth):
                with pytest.raises(IdentityNotProven, match=f"agent at {rogue.url} claims to be node "
                                                            f"{agent.node_id}.*token was not sent there"):
                    await call()
    finally:
        await rogue.close()
    assert rogue.paths.count(P.PATH_PROVE) == 5
    assert rogue.authorizations == []


async def test_a_second_real_agent_with_a_copied_id_fails_the_proof(procs, tmp_path):
    tokens = TokenStore(tmp_path / "tokens.json")
    agent = await _paired_agent(procs, tmp_path, tokens)
    # Copy the paired node's id (but not its pairings: those hashes are the real node's secret).
    state_dir = tmp_path / "agent-copy"
    state_dir.mkdir()
    real_state = json.loads((agent.state_dir / "agent-state.json").read_text())
    (state_dir / "agent-state.json").write_text(json.dumps({**real_state, "masters": []}))
    copy = start_agent(procs.popen, tmp_path, "copy", bind=ROGUE_IP, mdns=False)
    assert copy.node_id == agent.node_id
    async with Discovery(browse=False, tokens=tokens) as disc:
        node = await disc.add_address(copy.api_url)
        assert node.id == agent.node_id and node.host == ROGUE_IP
        async with disc.client(node) as c:
            with pytest.raises(IdentityNotProven, match=f"{copy.api_url} claims.*could not prove the pairing"):
                await c.rpc_start()
    async with AgentClient(copy.api_url) as c:
        assert (await c.info())["rpc_state"] == P.STATE_STOPPED


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
    rogue = await RogueApi(agent.api_url, relay=False).start()
    zc = AsyncZeroconf(interfaces=LOOPBACK)
    try:
        async with Discovery(LOOPBACK, tokens=tokens) as disc:
            fake = _record("impostor", agent.node_id, ROGUE_IP, rogue.port)
            await zc.async_register_service(fake)
            assert await disc.wait_until(lambda n: agent.node_id in n, 10)
            node = disc.nodes[agent.node_id]
            assert node.host == ROGUE_IP and rogue.url in node.impostor  # listed, flagged
            async with disc.client(node) as c:
                with pytest.raises(IdentityNotProven, match=rogue.url):
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
    assert rogue.authorizations == []


async def test_an_address_proves_itself_again_after_its_node_went_silent(procs, tmp_path):
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
        rogue = await RogueApi(agent.api_url, relay=False, ip="127.0.0.1", port=api_port,
                               node_id=agent.node_id).start()
        try:
            assert await disc.wait_until(lambda n: n[agent.node_id].reachable, 10)
            async with disc.client(agent.node_id) as c:
                with pytest.raises(IdentityNotProven, match=rogue.url):
                    await c.status()
        finally:
            await rogue.close()
    assert P.PATH_PROVE in rogue.paths and rogue.authorizations == []


async def test_herd_nodes_warns_about_an_impostor(procs, tmp_path):
    env = {**os.environ, "HERD_CONFIG_DIR": str(tmp_path / "master-config")}
    agent = start_agent(procs.popen, tmp_path, "alpha")
    r = await asyncio.to_thread(herd, ["pair", agent.api_url, "--pin", agent.pin()], env)
    assert r.returncode == 0, r.stderr
    rogue = await RogueApi(agent.api_url, relay=False).start()
    zc = AsyncZeroconf(interfaces=LOOPBACK)
    try:
        await zc.async_register_service(_record("impostor", agent.node_id, ROGUE_IP, rogue.port))
        # herd runs in a thread: this loop keeps serving the impostor and its mDNS record.
        r = await asyncio.to_thread(herd, ["nodes", "--interface", "127.0.0.1", "--timeout", "3"], env)
    finally:
        await zc.async_close()
        await rogue.close()
    assert r.returncode == 0, r.stderr
    assert f"warning: alpha: identity not proven: the agent at {rogue.url} claims to be node " \
           f"{agent.node_id}" in r.stdout, r.stdout
    assert agent.api_url.removeprefix("http://") in r.stdout  # the real node is listed where it is
    assert rogue.authorizations == []
