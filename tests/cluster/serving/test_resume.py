"""A streamed chat reply cut by llama-server's death goes on through the front door (#34 item 5),
with a real llama-server and the real SmolLM2 weights on loopback.

The test kills llama-server mid-reply (as it dies when a worker is lost) and starts it again on
the same loopback port, as the failover's relaunch does. Between the front door and llama-server
sits a plain byte relay on loopback that keeps a copy of what the front door sends, so the test
can read the continuation request on the wire; it changes nothing that passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess

import httpx
import pytest
from conftest import free_port

from gui.cluster.serving.api_keys import ApiKeyStore
from gui.cluster.serving.front_door import DoorSettings, FrontDoor

pytestmark = [pytest.mark.engine]

QUESTION = [{"role": "user", "content": "Count from 1 to 50, separated by commas."}]


class WireCopy:
    """A loopback TCP relay from ``port`` to ``to_port`` that keeps the bytes sent to it."""

    def __init__(self, to_port: int) -> None:
        self.to_port = to_port
        self.port = free_port()
        self.sent = bytearray()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._pipe, "127.0.0.1", self.port)

    async def stop(self) -> None:
        self._server.close()
        await self._server.wait_closed()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.to_port)
        except OSError:
            writer.close()  # nothing listens there now: the front door sees a refused connection
            return

        async def copy(src, dst, keep: bool) -> None:
            with contextlib.suppress(OSError):
                while data := await src.read(65536):
                    if keep:
                        self.sent += data
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(copy(reader, up_writer, True), copy(up_reader, writer, False))


async def start_llama_server(argv: list[str], url: str, log) -> asyncio.subprocess.Process:
    """Start llama-server and wait (polling its /health) until it serves."""
    proc = await asyncio.create_subprocess_exec(*argv, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL)
    async with httpx.AsyncClient() as c:
        for _ in range(600):
            assert proc.returncode is None, "llama-server exited"
            with contextlib.suppress(httpx.HTTPError):
                if (await c.get(url + "/health", timeout=1)).status_code == 200:
                    return proc
            await asyncio.sleep(0.1)  # polling a process we started for its readiness
    pytest.fail("llama-server did not become ready within 60 s")


async def test_a_stream_cut_by_llama_server_dying_goes_on_after_its_restart(engine, smollm2, tmp_path):
    from gui.cluster.llama.server_command import ServerOptions, ServerSpec
    from gui.cluster.llama.server_start import machine_args

    hidden = free_port()
    spec = ServerSpec(model=smollm2, options=ServerOptions(ctx=2048, port=hidden, extra_args=("--threads", "1")))
    argv = spec.with_extra("--no-webui", *machine_args(engine.llama_server)).argv(engine.llama_server)
    wire = WireCopy(hidden)
    await wire.start()
    door = FrontDoor(f"http://127.0.0.1:{wire.port}", ApiKeyStore(tmp_path / "keys.json"), port=free_port(),
                     settings=DoorSettings(resume_wait=60))
    await door.start()
    log = open(tmp_path / "server.log", "wb")
    server = await start_llama_server(argv, spec.url, log)
    events: list[dict] = []
    try:
        body = {"model": "any", "messages": QUESTION, "max_tokens": 60, "temperature": 0, "stream": True,
                "ignore_eos": True}
        async with httpx.AsyncClient(base_url=door.urls[0], timeout=120) as c:
            async with c.stream("POST", "/v1/chat/completions", json=body) as r:
                assert r.status_code == 200
                async for line in r.aiter_lines():
                    if not line.startswith("data: {"):
                        continue
                    events.append(json.loads(line[6:]))
                    texts = [e for e in events if (e.get("choices") or [{}])[0].get("delta", {}).get("content")]
                    if len(texts) == 8 and server.returncode is None and len(events) < 20:
                        # (read before the kill: the door starts resuming while the test waits on it)
                        cut_at = len(wire.sent)
                        server.kill()  # llama-server aborts when a worker is lost
                        await server.wait()
                        partial = "".join(e["choices"][0]["delta"]["content"] for e in texts)
                        server = await start_llama_server(argv, spec.url, log)  # the relaunch
            # what the partial reply costs in llama-server's own tokens
            spent = len((await c.post(spec.url + "/tokenize", json={"content": partial})).json()["tokens"])
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
        log.close()
        await door.stop()
        await wire.stop()

    assert not any("error" in e for e in events), events[-1]
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    # One reply to the client: the same id and model throughout, ended by the model.
    assert {e["id"] for e in events} == {events[0]["id"]}
    assert {e["model"] for e in events} == {events[0]["model"]}
    assert events[-1]["choices"][0]["finish_reason"] == "length"
    # The text goes on from where it was cut: it starts with the partial text, and what came
    # after it is new text, not the partial text again (llama-server echoes the prefix).
    assert text.startswith(partial) and len(text) > len(partial)
    assert not text[len(partial):].lstrip().startswith(partial.strip()[:6])
    # On the wire: the request after the cut carried the partial reply as the assistant's prefix.
    # (The last one is the one answered: those before it met no llama-server yet.)
    after = bytes(wire.sent[cut_at:])
    answered = after.rindex(b"POST /v1/chat/completions")
    request = after[answered:]
    continued = json.loads(request[request.index(b"\r\n\r\n") + 4:].split(b"POST ")[0].strip())
    assert continued["messages"] == [*QUESTION, {"role": "assistant", "content": partial}]
    # the reply's budget lost what the partial reply spent, as llama-server counts it (asked first)
    tried_before = after.rfind(b"POST /v1/chat/completions", 0, answered)
    assert b"POST /tokenize" in after[max(tried_before, 0):answered]
    assert continued["max_tokens"] == 60 - spent
