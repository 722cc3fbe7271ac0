"""The front door in front of a real llama-server with the real SmolLM2 weights (#34), on
loopback: keys (asked of loopback callers too, by the setting), plain and streamed replies passed
through as they come, a client's cancel reaching llama-server, 503 with Retry-After while
llama-server is away. What other hosts may not reach is tested on the simulated LAN
(tests/e2e/test_front_door_lan.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

import httpx
import pytest
from conftest import free_port, llama_server_process

from gui.cluster.serving.api_keys import ApiKeyStore
from gui.cluster.serving.front_door import DoorSettings, FrontDoor, FrontDoorError, is_loopback

pytestmark = [pytest.mark.engine]


@pytest.fixture(scope="module")
def upstream(engine, smollm2, tmp_path_factory):
    with llama_server_process(engine, smollm2, tmp_path_factory.mktemp("llama"), ctx=4096,
                              extra_args=("-np", "2", "--threads", "1")) as url:
        yield url


@pytest.fixture
async def door(upstream, tmp_path):
    keys = ApiKeyStore(tmp_path / "api-keys.json")
    d = FrontDoor(upstream, keys, port=free_port(), settings=DoorSettings(require_key_on_loopback=True))
    await d.start()
    yield d
    await d.stop()


def chat(max_tokens: int = 8, stream: bool = False, **more) -> dict:
    return {"model": "any", "messages": [{"role": "user", "content": "Count from 1 to 50."}],
            "max_tokens": max_tokens, "temperature": 0, "stream": stream, **more}


async def busy_slots(upstream: str) -> int:
    async with httpx.AsyncClient() as c:
        return sum(1 for s in (await c.get(upstream + "/slots")).json() if s.get("is_processing"))


async def wait_until(check, timeout: float, what: str) -> None:
    """Poll llama-server's own state (``check``) until it holds; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        await asyncio.sleep(0.05)


async def test_plain_and_streamed_replies_need_a_known_key(door, upstream):
    key = door.keys.add("phone")
    url = door.urls[0]
    async with httpx.AsyncClient(base_url=url, timeout=60) as c:
        r = await c.post("/v1/chat/completions", json=chat())
        assert r.status_code == 401 and "herd keys add NAME" in r.json()["error"]["message"]
        assert r.headers["WWW-Authenticate"] == "Bearer"
        r = await c.post("/v1/chat/completions", json=chat(), headers={"Authorization": "Bearer herd-wrong"})
        assert r.status_code == 401 and "not known here" in r.json()["error"]["message"]
        assert (await c.get("/health")).status_code == 200  # no key for "is it there?"

        auth = {"Authorization": f"Bearer {key}"}
        r = await c.post("/v1/chat/completions", json=chat(), headers=auth)
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"].strip()
        models = (await c.get("/v1/models", headers=auth)).json()
        direct = (await c.get(upstream + "/v1/models")).json()  # what is served, as llama-server says
        assert [m["id"] for m in models["data"]] == [m["id"] for m in direct["data"]]

        events = []
        async with c.stream("POST", "/v1/chat/completions", json=chat(16, stream=True), headers=auth) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            async for line in r.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    events.append(json.loads(line[6:]))
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    assert len(events) > 8 and text.strip()
    assert door.served["phone"] == 3


async def test_a_stream_arrives_while_it_is_generated_and_a_cancel_stops_it(door, upstream):
    key = door.keys.add("laptop")
    async with httpx.AsyncClient(base_url=door.urls[0], timeout=60) as c:
        async with c.stream("POST", "/v1/chat/completions", json=chat(1800, stream=True, ignore_eos=True),
                            headers={"Authorization": f"Bearer {key}"}) as r:
            async for line in r.aiter_lines():
                # the first generated token (the first event, the role, comes before the slot starts)
                if line.startswith("data: {") and any(c.get("delta", {}).get("content")
                                                       for c in json.loads(line[6:]).get("choices", [])):
                    break
            # The first token came through while llama-server still generates the other 1799
            # (seconds of work): nothing waited for the whole reply.
            assert await busy_slots(upstream) == 1
        # Leaving the block closed the client's connection: the front door cancels upstream.
    await wait_until(lambda: _idle(upstream), 15.0, "llama-server stopping the cancelled reply")


async def _true(value: bool) -> bool:
    return value


async def _idle(upstream: str) -> bool:
    return await busy_slots(upstream) == 0


async def test_a_key_revoked_while_serving_fails_and_one_added_works(door):
    cli = ApiKeyStore(door.keys.path)  # `herd keys` runs in another process with the same file
    old = cli.add("phone")
    async with httpx.AsyncClient(base_url=door.urls[0], timeout=60) as c:
        assert (await c.get("/v1/models", headers={"Authorization": f"Bearer {old}"})).status_code == 200
        cli.revoke("phone")
        new = cli.add("tablet")
        revoked_at = time.monotonic()
        r = await c.get("/v1/models", headers={"Authorization": f"Bearer {old}"})
        assert r.status_code == 401 and time.monotonic() - revoked_at < 2.0
        assert (await c.get("/v1/models", headers={"Authorization": f"Bearer {new}"})).status_code == 200


async def test_loopback_reaches_the_dashboard_routes_without_a_key_by_default(upstream, tmp_path):
    d = FrontDoor(upstream, ApiKeyStore(tmp_path / "api-keys.json"), port=free_port())
    await d.start()
    try:
        async with httpx.AsyncClient(base_url=d.urls[0], timeout=30) as c:
            assert (await c.get("/slots")).status_code == 200
            assert (await c.get("/v1/models")).status_code == 200
    finally:
        await d.stop()


async def test_while_llama_server_is_away_a_request_waits_then_gets_503_with_retry_after(tmp_path):
    keys = ApiKeyStore(tmp_path / "api-keys.json")
    key = keys.add("phone")
    nobody = f"http://127.0.0.1:{free_port()}"  # llama-server being relaunched: its port is closed
    d = FrontDoor(nobody, keys, port=free_port(), settings=DoorSettings(upstream_wait=0.6, retry_after=7,
                                                                         require_key_on_loopback=True))
    await d.start()
    try:
        async with httpx.AsyncClient(base_url=d.urls[0], timeout=30) as c:
            t0 = time.monotonic()
            r = await c.post("/v1/chat/completions", json=chat(), headers={"Authorization": f"Bearer {key}"})
            waited = time.monotonic() - t0
            assert r.status_code == 503 and r.headers["Retry-After"] == "7"
            assert "try again in a few seconds" in r.json()["error"]["message"]
            assert waited >= 0.6
            r = await c.get("/health")  # says at once how it is
            assert r.status_code == 503 and r.headers["Retry-After"] == "7"
    finally:
        await d.stop()


async def test_a_body_over_the_limit_is_refused_in_words(tmp_path):
    d = FrontDoor("http://127.0.0.1:9", ApiKeyStore(tmp_path / "k.json"), port=free_port(),
                  settings=DoorSettings(max_body=1 << 20))
    await d.start()
    try:
        async with httpx.AsyncClient(base_url=d.urls[0], timeout=30) as c:
            r = await c.post("/v1/embeddings", content=b"x" * (2 << 20), headers={"Content-Type": "application/json"})
        assert r.status_code == 413 and r.json()["error"]["message"] == "the request is larger than 1 MiB"
    finally:
        await d.stop()


async def test_a_port_in_use_is_refused_in_words(tmp_path):
    first = FrontDoor("http://127.0.0.1:9", ApiKeyStore(tmp_path / "k.json"), port=free_port())
    await first.start()
    try:
        second = FrontDoor("http://127.0.0.1:9", ApiKeyStore(tmp_path / "k.json"), port=first.port)
        with pytest.raises(FrontDoorError, match=rf"cannot listen on 127.0.0.1:{first.port} .*--port"):
            await second.start()
    finally:
        await first.stop()


@pytest.mark.parametrize(("remote", "loopback"), [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True),
                                                  ("::ffff:127.0.0.1", True), ("10.0.0.2", False),
                                                  ("192.168.1.5", False), ("fe80::1%eth0", False), (None, False),
                                                  ("not-an-address", False)])
def test_loopback_callers_are_told_by_address(remote, loopback):
    assert is_loopback(remote) is loopback


async def test_the_port_outlives_llama_server_a_cut_stream_says_so_and_a_waiting_request_is_served(
        engine, smollm2, tmp_path):
    """A relaunch as the failover does it, with a real llama-server: the front door is up before
    llama-server, a request waits for it and is served; when llama-server dies mid-stream (as
    when a worker is lost) the stream ends with an error event; while it is away the port still
    answers, with 503 and Retry-After."""
    from gui.cluster.llama.server_command import ServerOptions, ServerSpec
    from gui.cluster.llama.server_start import machine_args

    hidden = free_port()
    spec = ServerSpec(model=smollm2, options=ServerOptions(ctx=2048, port=hidden, extra_args=("--threads", "1")))
    argv = spec.with_extra("--no-webui", *machine_args(engine.llama_server)).argv(engine.llama_server)
    keys = ApiKeyStore(tmp_path / "api-keys.json")
    # resume_wait=1: llama-server is not restarted here, so the cut reply cannot go on (#34)
    d = FrontDoor(f"http://127.0.0.1:{hidden}", keys, port=free_port(),
                  settings=DoorSettings(upstream_wait=60, resume_wait=1))
    await d.start()
    server = None
    try:
        async with httpx.AsyncClient(base_url=d.urls[0], timeout=120) as c:
            waiting = asyncio.create_task(c.post("/v1/chat/completions", json=chat()))
            # The request waits at the door, not refused, while llama-server is not there yet.
            await wait_until(lambda: _true(d.waiting == 1), 10.0, "the request waiting for llama-server")
            assert not waiting.done()
            with open(tmp_path / "server.log", "wb") as log:
                server = await asyncio.create_subprocess_exec(*argv, stdout=log, stderr=subprocess.STDOUT,
                                                              stdin=subprocess.DEVNULL)
            r = await waiting
            assert r.status_code == 200, r.text

            events = []
            async with c.stream("POST", "/v1/chat/completions",
                                json=chat(1500, stream=True, ignore_eos=True)) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: {"):
                        events.append(json.loads(line[6:]))
                        if len(events) == 5:
                            server.kill()  # llama-server aborts when a worker is lost
            assert len(events) < 1500 and "choices" in events[0]
            assert "the reply was cut" in events[-1]["error"]["message"]
            await server.wait()

            d.settings = DoorSettings(upstream_wait=0.5, retry_after=3)
            r = await c.post("/v1/chat/completions", json=chat())
            assert r.status_code == 503 and r.headers["Retry-After"] == "3"
    finally:
        if server is not None and server.returncode is None:
            server.kill()
            await server.wait()
        await d.stop()
