"""Who uses the cluster and several people at once, through the front door (#34 items 6, 7),
in front of a real llama-server with the real SmolLM2 weights, on loopback: each key's requests
and tokens counted apart (as llama-server itself counts them), the door letting no more requests
through at once than its people and queueing the others in order, a bounded queue answering
503 with Retry-After in words."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from conftest import free_port, llama_server_process

from gui.cluster.serving.api_keys import ApiKeyStore
from gui.cluster.serving.front_door import DoorSettings, FrontDoor
from gui.cluster.serving.usage import THIS_PC

pytestmark = [pytest.mark.engine]

#: llama-server itself could answer this many at once: what holds requests back is the door.
SLOTS = 3


@pytest.fixture(scope="module")
def upstream(engine, smollm2, tmp_path_factory):
    with llama_server_process(engine, smollm2, tmp_path_factory.mktemp("llama"), ctx=SLOTS * 1024,
                              extra_args=("-np", str(SLOTS), "--threads", "1")) as url:
        yield url


async def _door(upstream, tmp_path, people: int, **settings) -> FrontDoor:
    d = FrontDoor(upstream, ApiKeyStore(tmp_path / "api-keys.json"), port=free_port(), people=people,
                  settings=DoorSettings(require_key_on_loopback=True, **settings))
    await d.start()
    return d


def chat(max_tokens: int, stream: bool = False) -> dict:
    # ignore_eos: exactly max_tokens generated, whatever the model would say
    return {"model": "any", "messages": [{"role": "user", "content": "Count from 1 to 50."}],
            "max_tokens": max_tokens, "temperature": 0, "stream": stream, "ignore_eos": True}


async def _stream(c: httpx.AsyncClient, key: str, max_tokens: int) -> tuple[int, str]:
    text = []
    async with c.stream("POST", "/v1/chat/completions", json=chat(max_tokens, stream=True),
                        headers={"Authorization": f"Bearer {key}"}) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                text += [ch["delta"].get("content") or "" for ch in json.loads(line[6:]).get("choices", [])]
    return r.status_code, "".join(text)


async def test_two_keys_requests_and_tokens_are_counted_apart(upstream, tmp_path):
    door = await _door(upstream, tmp_path, people=SLOTS)
    try:
        phone, laptop = door.keys.add("phone"), door.keys.add("laptop")
        async with httpx.AsyncClient(base_url=door.urls[0], timeout=120) as c:
            r = await c.post("/v1/chat/completions", json=chat(7), headers={"Authorization": f"Bearer {phone}"})
            assert r.status_code == 200, r.text
            said = r.json()["usage"]  # what llama-server counted for this reply
            status, text = await _stream(c, phone, 5)
            assert status == 200 and text
            r = await c.post("/v1/chat/completions", json=chat(3), headers={"Authorization": f"Bearer {laptop}"})
            assert r.status_code == 200, r.text
    finally:
        await door.stop()
    rows = {row.name: row for row in door.usage.snapshot()}
    assert set(rows) == {"phone", "laptop"}
    assert rows["phone"].requests == 2 and rows["laptop"].requests == 1
    assert rows["phone"].generated_tokens == 7 + 5 and rows["laptop"].generated_tokens == 3
    # the same prompt each time: counted whole, also when llama-server reused its cached part
    assert said["prompt_tokens"] > 0
    assert rows["phone"].prompt_tokens == 2 * said["prompt_tokens"]
    assert rows["laptop"].prompt_tokens == said["prompt_tokens"]
    assert rows["phone"].tokens_per_s > 0 and rows["laptop"].tokens_per_s > 0
    assert all(row.in_flight == 0 and row.waiting == 0 for row in rows.values())


async def test_with_one_person_at_once_the_others_wait_in_the_queue_and_all_finish(upstream, tmp_path):
    door = await _door(upstream, tmp_path, people=1)
    busiest, waiting_seen = 0, 0
    try:
        key = door.keys.add("phone")
        async with httpx.AsyncClient(base_url=door.urls[0], timeout=300) as c, \
                httpx.AsyncClient(base_url=upstream, timeout=30) as direct:
            replies = asyncio.gather(*(_stream(c, key, 48) for _ in range(3)))
            task = asyncio.ensure_future(replies)
            while not task.done():  # watch llama-server's own slots and the door's table meanwhile
                slots = (await direct.get("/slots")).json()
                busiest = max(busiest, sum(1 for s in slots if s.get("is_processing")))
                waiting_seen = max(waiting_seen, sum(row.waiting for row in door.usage.snapshot()))
                await asyncio.wait([task], timeout=0.05)
            results = task.result()
    finally:
        await door.stop()
    assert [status for status, _ in results] == [200, 200, 200] and all(text for _, text in results)
    assert busiest == 1, f"{busiest} replies were generated at once behind a door for one person"
    assert waiting_seen == 2
    row = door.usage.snapshot()[0]
    assert (row.name, row.requests, row.generated_tokens, row.waiting, row.in_flight) == ("phone", 3, 3 * 48, 0, 0)


async def test_past_the_queue_limit_a_request_gets_503_with_retry_after_in_words(upstream, tmp_path):
    door = await _door(upstream, tmp_path, people=1, queue_limit=1, retry_after=9)
    try:
        key = door.keys.add("phone")
        async with httpx.AsyncClient(base_url=door.urls[0], timeout=300) as c:
            first = asyncio.ensure_future(_stream(c, key, 128))
            second = asyncio.ensure_future(_stream(c, key, 4))
            while door.queued < 1:  # the first holds the place, the second waits for it
                assert not first.done() and not second.done()
                await asyncio.sleep(0.02)
            # a model listing takes no slot: it never waits in the queue
            assert (await c.get("/v1/models", headers={"Authorization": f"Bearer {key}"})).status_code == 200
            r = await c.post("/v1/chat/completions", json=chat(4), headers={"Authorization": f"Bearer {key}"})
            assert r.status_code == 503 and r.headers["Retry-After"] == "9"
            assert r.json()["error"]["message"] == ("the cluster answers 1 requests at once and 1 more are waiting; "
                                                    "try again in a few seconds")
            assert [(await first)[0], (await second)[0]] == [200, 200]
    finally:
        await door.stop()
    assert door.usage.snapshot()[0].requests == 4


async def test_callers_on_this_computer_are_counted_as_this_pc(upstream, tmp_path):
    door = FrontDoor(upstream, ApiKeyStore(tmp_path / "api-keys.json"), port=free_port())
    await door.start()
    try:
        async with httpx.AsyncClient(base_url=door.urls[0], timeout=120) as c:
            assert (await c.post("/v1/chat/completions", json=chat(2))).status_code == 200
    finally:
        await door.stop()
    (row,) = door.usage.snapshot()
    assert (row.name, row.requests, row.generated_tokens) == (THIS_PC, 1, 2)


async def test_the_apps_own_chat_waits_for_a_place_with_the_others(upstream, tmp_path):
    from gui.cluster.chat.client import ChatDone, stream_chat

    door = await _door(upstream, tmp_path, people=1)
    try:
        key = door.keys.add("phone")
        async with httpx.AsyncClient(base_url=door.urls[0], timeout=300) as c, \
                httpx.AsyncClient(timeout=300) as app:
            phone = asyncio.ensure_future(_stream(c, key, 128))
            while not door.usage.snapshot() or door.usage.snapshot()[0].in_flight < 1:
                await asyncio.sleep(0.02)

            async def chat_in_the_app() -> list:
                # the app talks to llama-server on loopback, through the door's queue
                stream = stream_chat(app, upstream, [{"role": "user", "content": "Hello"}], max_tokens=6,
                                     temperature=0, ignore_eos=True)
                return [ev async for ev in door.app_reply(stream)]

            mine = asyncio.ensure_future(chat_in_the_app())
            while not any(row.name == THIS_PC and row.waiting == 1 for row in door.usage.snapshot()):
                assert not phone.done(), "the app's chat did not wait for the phone's place"
                await asyncio.sleep(0.02)
            events = await mine
            assert (await phone)[0] == 200
    finally:
        await door.stop()
    assert isinstance(events[-1], ChatDone)
    rows = {row.name: row for row in door.usage.snapshot()}
    assert (rows[THIS_PC].requests, rows[THIS_PC].generated_tokens, rows[THIS_PC].waiting) == (1, 6, 0)
    assert rows[THIS_PC].prompt_tokens > 0 and rows["phone"].generated_tokens == 128
