"""The RPC worker under the agent, with the real ggml-rpc-server and llama-server."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import time

import httpx
import pytest

from agent import protocol as P
from agent.client import AgentError
from agent.rpc_server import probe_rpc
from conftest import free_port

pytestmark = pytest.mark.engine


async def wait_status(client, pred, timeout: float) -> dict:
    """Poll ``/status`` until ``pred(status)`` holds; fail with the last status otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        st = await client.status()
        if pred(st):
            return st
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s; last rpc status: {st['rpc']}")
        await asyncio.sleep(0.05)


def read_reply(sock: socket.socket, n: int) -> bytes:
    """Up to ``n`` bytes, however the reply is split; less (b"" for a refusal) if it closes."""
    got = b""
    while len(got) < n:
        try:
            chunk = sock.recv(n - len(got))
        except ConnectionResetError:
            break
        if not chunk:
            break
        got += chunk
    return got


def banner_devices(lines: list[str]) -> list[str]:
    """The device names the worker printed under ``Devices:`` in its banner, in order.

    The names depend on the build and the machine (``CPU`` for the CPU backend, ``CUDA0``,
    ``Vulkan0``…), so tests compare the agent's report with what this worker said.
    """
    names: list[str] = []
    start = next((i for i, ln in enumerate(lines) if ln.strip() == "Devices:"), len(lines))
    for ln in lines[start + 1:]:
        m = re.match(r"^\s+([^\s:]+): .*\(\d+ MiB, \d+ MiB free\)\s*$", ln)
        if not m:
            break
        names.append(m.group(1))
    return names


def ready(st: dict) -> bool:
    return st["rpc"]["state"] == P.STATE_READY


async def test_start_reports_devices_and_banner(engine, paired):
    agent, client = paired
    await client.rpc_start(threads=1)
    st = await wait_status(client, ready, 15)
    rpc = st["rpc"]
    assert rpc["proto"] == "7.0.0" and rpc["pid"] and rpc["restarts"] == 0
    assert rpc["port"] == agent.rpc_port and rpc["worker_port"] != agent.rpc_port
    assert len(rpc["devices"]) >= 1
    cpu = rpc["devices"][0]
    assert cpu["total_bytes"] > 0 and 0 < cpu["free_bytes"] <= cpu["total_bytes"]
    if os.name == "posix":  # the banner arrives live through the pty
        st = await wait_status(client, lambda s: s["rpc"]["devices"][0]["name"], 5)
    lines = await client.rpc_log(50)
    if os.name == "posix":
        names = banner_devices(lines)
        assert names, lines
        assert [d["name"] for d in st["rpc"]["devices"]] == names
    assert any("Starting RPC server v7.0.0" in ln for ln in lines)
    assert any(" -t 1" in ln and " -c" in ln for ln in lines if ln.startswith("$ "))
    assert P.TXT_STATE not in agent.txt()  # whether it is busy is for its masters only (#25)


async def test_killed_worker_is_back_within_3_s_and_counted(engine, paired, forwarder):
    agent, client = paired
    await client.rpc_start()
    st = await wait_status(client, ready, 15)
    old_pid = st["rpc"]["pid"]
    os.kill(old_pid, signal.SIGKILL)
    killed = time.monotonic()
    st = await wait_status(client, lambda s: ready(s) and s["rpc"]["pid"] != old_pid, 3.0)
    assert time.monotonic() - killed < 3.0
    assert st["rpc"]["restarts"] == 1
    # and the worker answers through the relay again
    proto, devices = await probe_rpc(*await forwarder())
    assert proto == "7.0.0" and devices


async def test_stop_is_not_followed_by_a_restart(engine, paired):
    agent, client = paired
    await client.rpc_start()
    st = await wait_status(client, ready, 15)
    pid = st["rpc"]["pid"]
    rpc = await client.rpc_stop()
    assert rpc["state"] == P.STATE_STOPPED and rpc["pid"] is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped, not just signalled
    # the relay port is closed with the worker
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", agent.rpc_port), timeout=1).close()
    assert (await client.status())["rpc"]["restarts"] == 0


async def test_second_agent_on_a_taken_rpc_port_reports_the_conflict(engine, paired, make_agent):
    first, first_client = paired
    await first_client.rpc_start()
    await wait_status(first_client, ready, 15)
    second = await make_agent()
    from agent.client import AgentClient
    async with AgentClient(second.api_url, identity=first_client.identity) as c2:
        await c2.pair(second.show_pin())
        with pytest.raises(AgentError, match="port conflict") as info:
            await c2.rpc_start(port=first.rpc_port)
        assert info.value.status == 409
        rpc = (await c2.status())["rpc"]
        assert rpc["state"] == P.STATE_CRASHED and rpc["conflict"] is True
        assert str(first.rpc_port) in rpc["error"]
    assert (await first_client.status())["rpc"]["state"] == P.STATE_READY


async def test_worker_that_cannot_bind_is_a_conflict_not_ready(engine, make_agent):
    """In ``open`` exposure the worker binds the port itself; it exits 0 when it can't."""
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        port = blocker.getsockname()[1]
        agent = await make_agent(exposure="open", rpc_port=port)
        await agent.start_rpc()
        state = await agent.supervisor.wait_for((P.STATE_CRASHED, P.STATE_READY), 15)
        assert state == P.STATE_CRASHED
        assert agent.supervisor.conflict and "port conflict" in agent.supervisor.error
        assert agent.supervisor.restarts == 0
        assert any("Failed to create server socket" in ln for ln in agent.supervisor.lines)


async def test_relay_admits_only_a_paired_masters_key(engine, paired, forwarder, tmp_path):
    """Plain TCP (the paired master's own address, but no TLS) and TLS with a key that never
    paired both get nothing; the paired master's key through the forwarder gets the worker."""
    from agent.identity import client_context, load_or_create
    agent, client = paired
    await client.rpc_start()
    await wait_status(client, ready, 15)
    loop = asyncio.get_running_loop()
    hello = bytes([14]) + (24).to_bytes(8, "little") + bytes(24)

    def plain_reads() -> bytes:
        with socket.socket() as s:
            s.settimeout(3)
            s.connect(("127.0.0.1", agent.rpc_port))
            s.sendall(hello)
            return read_reply(s, 8 + 28)

    def stranger_reads() -> bytes:
        import ssl
        ctx = client_context(load_or_create(tmp_path / "stranger", "master", "stranger"), client.pinned)
        with socket.create_connection(("127.0.0.1", agent.rpc_port), timeout=3) as raw:
            try:
                with ctx.wrap_socket(raw) as s:
                    s.sendall(hello)
                    return read_reply(s, 8 + 28)
            except (ssl.SSLError, OSError):
                return b""

    assert await loop.run_in_executor(None, plain_reads) == b""
    assert await loop.run_in_executor(None, stranger_reads) == b""
    proto, _ = await probe_rpc(*await forwarder())  # the paired master's key gets through
    assert proto == "7.0.0"


async def test_llama_server_generates_through_the_tunnel(engine, demo_model, paired, procs, forwarder):
    agent, client = paired
    await client.rpc_start()
    await wait_status(client, ready, 15)
    port = free_port()
    fhost, fport = await forwarder()
    srv = procs.popen([engine.llama_server, "--rpc", f"{fhost}:{fport}", "--fit", "off",
                       "-ngl", "99", "-m", demo_model, "-c", "256", "--host", "127.0.0.1",
                       "--port", port], stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"))
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base, timeout=30) as h:
        deadline = time.monotonic() + 120
        while True:
            assert srv.poll() is None, "llama-server exited"
            try:
                if (await h.get("/health")).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "llama-server not healthy in 120 s"
            await asyncio.sleep(0.2)
        st = await client.status()
        assert st["rpc"]["state"] == P.STATE_BUSY and st["rpc"]["client"] == "127.0.0.1"
        r = await h.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8})
        assert r.status_code == 200
        body = r.json()
        assert body["usage"]["completion_tokens"] == 8
        assert body["timings"]["predicted_n"] == 8
    srv.terminate()
    # wait off the loop: llama-server says goodbye to the worker through the relay on this loop
    await asyncio.get_running_loop().run_in_executor(None, srv.wait, 30)
    st = await wait_status(client, ready, 5)
    assert st["rpc"]["client"] is None
    assert agent.relay.bytes_to_worker > 1_000_000  # the weights went through the relay


@pytest.mark.skipif(not os.uname().sysname == "Linux", reason="parent-death signal is Linux only")
async def test_worker_does_not_outlive_a_killed_agent(engine, tmp_path, procs, agent_process):
    argv = agent_process.argv(tmp_path, name="doomed", bind="127.0.0.1", api_port=free_port(),
                              rpc_port=free_port(), echo_port=free_port(), mdns_ip=None)
    ap = agent_process.start(procs.popen, argv, tmp_path)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, ap.wait_ready)
    from agent.client import AgentClient
    from agent.identity import load_or_create
    from agent.pairing import PinFile
    pin = PinFile(tmp_path).show()  # what `herd-agent pin` does on the node
    async with AgentClient(ap.api_url, identity=load_or_create(tmp_path / "master", "master", "m")) as c:
        await c.pair(pin)
        await c.rpc_start()
        st = await wait_status(c, ready, 15)
    worker = st["rpc"]["pid"]
    ap.proc.kill()
    await loop.run_in_executor(None, ap.proc.wait, 5)
    killed = time.monotonic()

    def running(pid: int) -> bool:  # a zombie waiting for init to reap it counts as gone
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    try:
        while running(worker):
            assert time.monotonic() - killed < 3, "worker outlived its agent"
            await asyncio.sleep(0.05)
    finally:
        if running(worker):  # don't leave the orphan behind when the test fails
            os.kill(worker, signal.SIGKILL)


async def test_start_with_the_same_options_keeps_the_worker(engine, paired):
    agent, client = paired
    await client.rpc_start(threads=1)
    pid = (await wait_status(client, ready, 15))["rpc"]["pid"]
    await client.rpc_start(threads=1)  # e.g. a master re-launching: must not cut a session
    assert (await client.status())["rpc"]["pid"] == pid
    await client.rpc_start(threads=2)  # different options: a new worker
    st = await wait_status(client, lambda s: ready(s) and s["rpc"]["pid"] != pid, 15)
    assert st["rpc"]["restarts"] == 0
    log = await client.rpc_log(500)
    assert any(" -t 2" in ln for ln in log if ln.startswith("$ ")), log


async def test_status_refreshes_device_memory_while_idle(engine, paired):
    agent, client = paired
    await client.rpc_start()
    await wait_status(client, ready, 15)
    before = agent.supervisor._probed_at
    await agent.supervisor.refresh_devices(max_age=0)
    assert agent.supervisor._probed_at > before
    assert agent.supervisor.devices and agent.supervisor.devices[0].free_bytes > 0
    if os.name == "posix":  # the names come from the banner, through the pty
        names = banner_devices(await client.rpc_log(500))
        assert names and [d.name for d in agent.supervisor.devices] == names
    else:
        assert all(d.name == "" for d in agent.supervisor.devices)


async def test_relay_admits_a_paired_master_by_key_from_any_address(engine, paired):
    """A master whose address changed (new DHCP lease) is admitted at once, by its key: the
    address plays no part (no API call from the new address is needed first)."""
    from agent.identity import client_context
    agent, client = paired
    await client.rpc_start()
    await wait_status(client, ready, 15)
    loop = asyncio.get_running_loop()
    ctx = client_context(client.identity, client.pinned)

    def hello_from(source: str) -> bytes:
        with socket.socket() as raw:
            raw.settimeout(3)
            raw.bind((source, 0))
            raw.connect(("127.0.0.1", agent.rpc_port))
            with ctx.wrap_socket(raw) as s:
                s.sendall(bytes([14]) + (24).to_bytes(8, "little") + bytes(24))
                return read_reply(s, 8 + 28)

    reply = await loop.run_in_executor(None, hello_from, "127.0.0.3")
    assert len(reply) == 8 + 28 and reply[8:11] == bytes([7, 0, 0])
