"""A conversation against a real llama-server's context, without Qt: counted by the server's
own tokenizer, the oldest turns left out when it does not fit, and the server's error JSON
turned into words."""

from __future__ import annotations


import httpx
import pytest
from conftest import llama_server_process

from gui.cluster.chat.client import (
    ChatError,
    context_per_slot,
    count_prompt_tokens,
    server_error,
    stream_chat,
)
from gui.cluster.chat.conversation import (
    COMPLETE,
    Conversation,
    ReplyInterrupted,
    check_context,
    reply_room,
    send,
)

CTX, SLOTS = 2048, 2


@pytest.fixture(scope="module")
def server(engine, smollm2, tmp_path_factory):
    """A real llama-server on loopback serving SmolLM2 (a real tokenizer and chat template),
    its context shared by two slots; yields its base URL."""
    with llama_server_process(engine, smollm2, tmp_path_factory.mktemp("llama-server"), ctx=CTX,
                              extra_args=("-np", str(SLOTS), "-t", "1")) as url:
        yield url


def _turns(n: int, words: int) -> list[dict]:
    """``n`` question-and-answer turns of about ``words`` words each, every one different."""
    out = []
    for i in range(n):
        out.append({"role": "user", "content": f"Question {i}: " + " ".join(f"apple{i}x{j}" for j in range(words))})
        out.append({"role": "assistant", "content": f"Answer {i}: " + " ".join(f"pear{i}y{j}" for j in range(words))})
    return out


pytestmark = pytest.mark.engine


async def test_the_count_is_what_the_server_reads_and_the_context_is_one_slots(server):
    messages = [{"role": "system", "content": "Be brief."}, *_turns(2, 20),
                {"role": "user", "content": "And now?"}]
    async with httpx.AsyncClient() as client:
        counted = await count_prompt_tokens(client, server, messages)
        resp = await client.post(server + "/v1/chat/completions",
                                 json={"messages": messages, "max_tokens": 1}, timeout=60)
        assert counted == resp.json()["usage"]["prompt_tokens"]
        # -c is shared by the slots: one conversation gets its share
        assert await context_per_slot(client, server) == CTX // SLOTS


async def test_too_long_a_request_is_said_in_words_with_the_servers_numbers(server):
    messages = [{"role": "user", "content": "x" * 30000}]  # a 30k-character paste
    async with httpx.AsyncClient() as client:
        counted = await count_prompt_tokens(client, server, messages)
        with pytest.raises(ChatError) as err:
            async for _ in stream_chat(client, server, messages, max_tokens=8):
                pass
    e = err.value
    assert e.status == 400 and e.too_long
    assert (e.prompt_tokens, e.context) == (counted, CTX // SLOTS)
    text = str(e)
    assert "{" not in text and "error" not in text.lower()
    assert str(counted) in text and str(CTX // SLOTS) in text and "new chat" in text


async def test_other_server_errors_are_said_in_words(server):
    async with httpx.AsyncClient() as client:
        with pytest.raises(ChatError) as bad_request:  # llama-server's 400 for a malformed request
            async for _ in stream_chat(client, server, "not a list", max_tokens=8):  # type: ignore[arg-type]
                pass
        with pytest.raises(ChatError) as not_found:  # an address that is not the chat endpoint
            async for _ in stream_chat(client, server + "/no/such/path", [{"role": "user", "content": "hi"}]):
                pass
    for err, status in ((bad_request.value, 400), (not_found.value, 404)):
        assert err.status == status and not err.too_long
        text = str(err)
        assert '{"' not in text and f"HTTP {status}" in text and "start a new chat" in text
    assert "messages" in str(bad_request.value)  # llama-server's own reason is kept, as words


async def test_the_fewest_oldest_turns_are_left_out_and_the_rest_is_answered(server):
    conv = Conversation()
    conv.add_system("Be brief.")
    for m in _turns(8, 40):
        if m["role"] == "user":
            conv.add_user(m["content"])
        else:
            conv.begin_reply()
            conv.append(m["content"])
            conv.finish("stop")
    new = {"role": "user", "content": "Sum it up."}
    messages = conv.request_messages() + [new]
    max_tokens = 64
    async with httpx.AsyncClient() as client:
        fit = await check_context(client, server, messages, max_tokens)
        context = CTX // SLOTS
        assert (fit.context, fit.room) == (context, reply_room(context, max_tokens))
        assert fit.tokens == await count_prompt_tokens(client, server, messages) > fit.limit
        assert fit.drop_turns is not None and 0 < fit.drop_turns < 8
        words = fit.describe()
        assert str(fit.tokens) in words and str(fit.limit) in words and str(fit.drop_turns) in words
        left = conv.leave_out_turns(fit.drop_turns)
        assert left == 2 * fit.drop_turns
        kept = conv.request_messages() + [new]
        assert kept[0] == {"role": "system", "content": "Be brief."}
        assert kept[1]["content"].startswith(f"Question {fit.drop_turns}:")
        assert await count_prompt_tokens(client, server, kept) == fit.tokens_after <= fit.limit
        # the fewest: one turn fewer left out would still be too long
        one_more = [{"role": "system", "content": "Be brief."}, *_turns(8, 40)[2 * fit.drop_turns - 2:], new]
        assert await count_prompt_tokens(client, server, one_more) > fit.limit
        # and the server answers what is now sent
        reply = await send(conv, client, server, new["content"], max_tokens=8)
        assert reply.state == COMPLETE


async def test_a_message_too_long_on_its_own_cannot_be_fitted_by_leaving_turns_out(server):
    messages = [{"role": "system", "content": "Be brief."}, *_turns(2, 10),
                {"role": "user", "content": "word " * 6000}]
    async with httpx.AsyncClient() as client:
        fit = await check_context(client, server, messages, 64)
    assert fit.drop_turns is None and not fit.fits and fit.tokens > fit.limit
    assert "alone does not fit" in fit.describe()


async def test_a_refused_request_marks_the_reply_with_the_words(server):
    conv = Conversation()
    async with httpx.AsyncClient() as client:
        with pytest.raises(ReplyInterrupted):
            await send(conv, client, server, "y" * 30000, max_tokens=8)
    note = conv.messages[-1].note
    assert conv.messages[-1].interrupted and "too long for the server" in note and "connection" not in note


def test_error_bodies_of_every_shape_become_words():
    # older builds carried the numbers only in the message; a proxy may answer with plain text
    old = server_error(400, '{"error":{"code":400,"message":"request (6342 tokens) exceeds the '
                            'available context size (4096 tokens), try increasing it"}}')
    assert old.too_long and (old.prompt_tokens, old.context) == (6342, 4096) and "{" not in str(old)
    bare = server_error(400, '{"error":{"code":400,"message":"too long","type":"exceed_context_size_error"}}')
    assert bare.too_long and bare.prompt_tokens is None and "too long for the server's context" in str(bare)
    plain = server_error(502, "<html>Bad Gateway</html>")
    assert not plain.too_long and "HTTP 502" in str(plain) and "launch log" in str(plain)
    loading = server_error(503, '{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}')
    assert "not ready" in str(loading) and "Loading model" in str(loading)


def test_left_out_messages_stay_in_the_file_and_are_not_sent(tmp_path):
    conv = Conversation()
    conv.add_system("sys")
    for q in ("one", "two", "three"):
        conv.add_user(q)
        conv.begin_reply()
        conv.append(q.upper())
        conv.finish("stop")
    assert conv.leave_out_turns(2) == 4
    assert [m["content"] for m in conv.request_messages()] == ["sys", "three", "THREE"]
    back = Conversation.load(conv.save(tmp_path / "chat.json"))
    assert [m.left_out for m in back.messages] == [False, True, True, True, True, False, False]
    assert back.request_messages() == conv.request_messages()
    # the turns already left out are not counted again
    assert conv.leave_out_turns(1) == 2 and [m["content"] for m in conv.request_messages()] == ["sys"]
