"""A reply cut by llama-server's death is continued where it stopped, on the same message, marked
resumed (#34 item 5), with a real llama-server and the real SmolLM2 weights. The test kills
llama-server mid-reply (as it dies when a worker is lost) and starts it again on the same loopback
port, as the failover's relaunch does."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess

import httpx
import pytest
from conftest import free_port

from gui.cluster.chat.client import count_text_tokens
from gui.cluster.chat.conversation import COMPLETE, Conversation, ReplyInterrupted, resume, send

pytestmark = [pytest.mark.engine]


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


async def test_a_cut_reply_is_continued_on_the_same_message_after_a_restart(engine, smollm2, tmp_path):
    from gui.cluster.llama.server_command import ServerOptions, ServerSpec
    from gui.cluster.llama.server_start import machine_args

    spec = ServerSpec(model=smollm2, options=ServerOptions(ctx=2048, port=free_port(), extra_args=("--threads", "1")))
    argv = spec.with_extra("--no-webui", *machine_args(engine.llama_server)).argv(engine.llama_server)
    log = open(tmp_path / "server.log", "wb")
    server = await start_llama_server(argv, spec.url, log)
    conv = Conversation()
    pieces = []

    def on_change(_index, message):
        if message.role == "assistant" and message.content:
            pieces.append(message.content)
            if len(pieces) == 8:
                server.kill()  # llama-server aborts when a worker is lost

    conv.subscribe(on_change)
    params = {"max_tokens": 60, "temperature": 0, "ignore_eos": True}
    try:
        async with httpx.AsyncClient(timeout=120) as client:
            with pytest.raises(ReplyInterrupted):
                await send(conv, client, spec.url, "Count from 1 to 50, separated by commas.", **params)
            await server.wait()
            partial = conv.messages[-1].content
            assert conv.messages[-1].interrupted and partial
            server = await start_llama_server(argv, spec.url, log)  # the relaunch
            reply = await resume(conv, client, spec.url, **params)
            whole_tokens = await count_text_tokens(client, spec.url, reply.content)
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
        log.close()

    # The same message goes on: no second reply, marked resumed, complete.
    assert [m.role for m in conv.messages] == ["user", "assistant"] and reply is conv.messages[-1]
    assert reply.resumed and reply.state == COMPLETE
    # The text continues the partial one, without the prefix llama-server echoes.
    assert reply.content.startswith(partial) and len(reply.content) > len(partial)
    assert not reply.content[len(partial):].lstrip().startswith(partial.strip()[:6])
    # It is one reply of max_tokens in all: the continuation got what the cut part (8 tokens or
    # more) left, not 60 again (the whole text counted anew may split a token boundary otherwise).
    assert reply.finish_reason == "length" and whole_tokens <= 60 + 2, whole_tokens
    # The mark is kept in the saved conversation.
    assert Conversation.load(conv.save(tmp_path / "chat.json")).messages[-1].resumed
