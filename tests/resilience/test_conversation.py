"""The chat transcript: states, what is resent after a relaunch, saving, and a real
llama-server killed mid-reply (the reply is marked interrupted, its text kept)."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import httpx
import pytest
from conftest import free_port

from agent.files import CorruptFile
from gui.cluster.chat.conversation import COMPLETE, INTERRUPTED, STREAMING, Conversation, ReplyInterrupted, retry, send
from gui.cluster.llama.server_command import ServerOptions, ServerSpec
from gui.cluster.llama.server_process import READY
from gui.cluster.llama.server_start import ServerStart


def test_states_and_what_is_resent():
    conv = Conversation()
    seen = []
    conv.subscribe(lambda i, m: seen.append((i, m.state)))
    conv.add_system("be brief")
    conv.add_user("first question")
    conv.begin_reply()
    conv.append("first ")
    conv.append("answer")
    conv.finish("stop")
    conv.add_user("second question")
    conv.begin_reply()
    conv.append("half an ans")
    with pytest.raises(RuntimeError):
        conv.add_user("typed while streaming")
    assert conv.streaming is conv.messages[-1]
    # While streaming, the partial reply is not part of a request.
    assert [m["content"] for m in conv.request_messages()] == [
        "be brief", "first question", "first answer", "second question"]
    conv.interrupt("the worker beta was lost")
    last = conv.messages[-1]
    assert (last.state, last.content, last.note) == (INTERRUPTED, "half an ans", "the worker beta was lost")
    assert conv.last_interrupted is last and conv.streaming is None
    # Retrying asks the question again: the cut-off reply is not sent as if it were an answer.
    assert conv.request_messages()[-1] == {"role": "user", "content": "second question"}
    # If the user moves on instead, the text they saw is part of the conversation.
    conv.add_user("go on")
    assert conv.request_messages()[-2:] == [{"role": "assistant", "content": "half an ans"},
                                           {"role": "user", "content": "go on"}]
    assert (2, COMPLETE) in seen and (4, STREAMING) in seen and (4, INTERRUPTED) in seen


def test_retried_interrupted_reply_is_kept_but_not_resent():
    conv = Conversation()
    conv.add_user("q")
    conv.begin_reply()
    conv.append("cut")
    conv.interrupt("lost")
    conv.begin_reply()
    conv.append("whole answer")
    conv.finish("length")
    assert [m.state for m in conv.messages] == [COMPLETE, INTERRUPTED, COMPLETE]
    assert conv.request_messages() == [{"role": "user", "content": "q"},
                                       {"role": "assistant", "content": "whole answer"}]


def test_save_load_roundtrip_and_corrupt_file(tmp_path):
    conv = Conversation()
    conv.add_user("hello")
    conv.begin_reply()
    conv.append("hi th")
    path = conv.save(tmp_path / "chat.json")  # saved mid-reply
    assert path.stat().st_mode & 0o777 == 0o600
    back = Conversation.load(path)
    assert [(m.role, m.content, m.state) for m in back.messages] == [
        ("user", "hello", COMPLETE), ("assistant", "hi th", INTERRUPTED)]
    assert "stopped" in back.messages[1].note
    assert Conversation.load(tmp_path / "none.json").messages == []
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "messages": [{"role": "robot", "content": "x"}]}))
    with pytest.raises(CorruptFile, match="robot"):
        Conversation.load(bad)
    assert not bad.exists() and list(tmp_path.glob("bad.json.corrupt-*"))


@pytest.mark.engine
async def test_real_server_killed_mid_reply_marks_it_and_a_new_server_continues(engine, demo_model):
    port = free_port()
    spec = ServerSpec(model=demo_model, verbosity=3, options=ServerOptions(ctx=2048, port=port, extra_args=["-np", "1"]))
    conv = Conversation()
    first_start = ServerStart(engine.llama_server, spec)
    again_start = ServerStart(engine.llama_server, spec)
    try:
        server = await first_start.run(120)
        async with httpx.AsyncClient() as client:
            first = await send(conv, client, spec.url, "Hello there.", max_tokens=8)
            assert first.state == COMPLETE and first.finish_reason == "length"
            unsubscribe = conv.subscribe(lambda i, m: m.state == STREAMING and len(m.content) > 20
                           and server.pid and os.kill(server.pid, signal.SIGKILL))
            with pytest.raises(ReplyInterrupted):
                await send(conv, client, spec.url, "Tell me a long story.", max_tokens=1500)
            unsubscribe()
            cut = conv.messages[-1]
            assert cut.state == INTERRUPTED and len(cut.content) > 20 and cut.note
            await server.wait_exit()
            # Same endpoint, new process: the conversation continues from where it was.
            again = await again_start.run(120)
            assert again.state == READY
            reply = await retry(conv, client, spec.url, max_tokens=8)
            assert reply.state == COMPLETE
            assert [m.state for m in conv.messages] == [COMPLETE, COMPLETE, COMPLETE, INTERRUPTED, COMPLETE]
    finally:
        await first_start.stop()
        await again_start.stop()
        await asyncio.sleep(0)
