"""The pure pieces of resuming a cut stream (#34): cutting bytes into whole SSE events, reading
the reply so far, the continuation request, and rewriting the continuation's events (the echoed
prefix taken off, the first reply's id kept). The whole, with a real llama-server, is in
test_resume.py."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from gui.cluster.chat.continuation import EchoedPrefix, continuation_messages
from gui.cluster.serving.resume import ContinuationEvents, ReplySoFar, SseEvents, continuation_body

QUESTION = [{"role": "user", "content": "Count."}]


def event(content: str | None = None, finish: str | None = None, **fields) -> bytes:
    delta = {} if content is None else {"content": content}
    chunk = {"id": fields.get("id", "chatcmpl-A"), "model": fields.get("model", "m"), "created": 1,
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


@given(st.lists(st.integers(min_value=1, max_value=40), max_size=12))
def test_events_come_whole_however_the_bytes_are_cut(cuts):
    stream = event("1,") + b": a comment\n\n" + event(" 2,") + event(None, "length") + b"data: [DONE]\n\n"
    events, got, at = SseEvents(), [], 0
    for size in [*cuts, len(stream)]:
        got += events.feed(stream[at:at + size])
        at += size
    assert b"".join(got) == stream and len(got) == 5


def test_the_reply_so_far_keeps_the_first_fields_and_the_text():
    reply = ReplySoFar()
    for e in (event(id="chatcmpl-A"), event("1,"), event(" 2,", id="other")):
        reply.observe(e)
    assert (reply.fields["id"], reply.text, reply.chunks, reply.finished) == ("chatcmpl-A", "1, 2,", 2, False)
    reply.observe(event(None, "stop"))
    assert reply.finished


def test_the_continuation_carries_the_partial_reply_as_the_assistants_prefix():
    reply = ReplySoFar()
    reply.observe(event("1, 2,"))
    body = json.dumps({"messages": QUESTION, "stream": True, "max_tokens": 10, "temperature": 0}).encode()
    again = json.loads(continuation_body(body, reply))
    assert again["messages"] == continuation_messages(QUESTION, "1, 2,") == [
        *QUESTION, {"role": "assistant", "content": "1, 2,"}]
    assert again["max_tokens"] == 9 and again["temperature"] == 0 and again["stream"] is True


def test_what_cannot_be_continued_is_said():
    reply = ReplySoFar()
    reply.observe(event("1,"))
    assert continuation_body(b"not json", reply) is None
    assert continuation_body(json.dumps({"messages": QUESTION, "stream": False}).encode(), reply) is None
    assert continuation_body(json.dumps({"messages": QUESTION, "stream": True, "n": 2}).encode(), reply) is None
    assert continuation_body(json.dumps({"messages": QUESTION, "stream": True}).encode(), ReplySoFar()) is None


def test_the_continuations_events_are_the_rest_of_the_first_reply():
    reply = ReplySoFar()
    reply.observe(event("1, 2,", id="chatcmpl-A", model="first"))
    rewrite = ContinuationEvents(reply)
    role = event(None, id="chatcmpl-B", model="second").replace(b'"delta": {}', b'"delta": {"role": "assistant"}')
    assert rewrite.rewrite(role) is None  # a new role announcement says nothing to this client
    first = json.loads(rewrite.rewrite(event("1, 2, 3", id="chatcmpl-B", model="second"))[6:])
    assert first["id"] == "chatcmpl-A" and first["model"] == "first"
    assert first["choices"][0]["delta"] == {"content": " 3"}  # the echo taken off
    last = json.loads(rewrite.rewrite(event(None, "length", id="chatcmpl-B"))[6:])
    assert last["choices"][0]["finish_reason"] == "length" and last["id"] == "chatcmpl-A"
    assert rewrite.rewrite(b"data: [DONE]\n\n") == b"data: [DONE]\n\n"


def test_an_echo_that_differs_from_the_prefix_keeps_what_is_new():
    echo = EchoedPrefix("1, 2,")
    assert [echo.new_text(t) for t in ("1, ", "2", ", 3", " 4")] == ["", "", " 3", " 4"]
    echo = EchoedPrefix("1, 2,")
    assert echo.new_text("1,  2, 3") == " 2, 3"  # re-tokenised differently: from where it differs
    assert EchoedPrefix("").new_text("x") == "x"


def test_the_budget_loses_the_tokens_spent_not_the_chunks():
    """A chunk can hold several tokens (llama-server holds back a character's bytes until it is
    whole: an emoji, a Chinese character), so the tokens spent are counted where known."""
    reply = ReplySoFar()
    for piece in ("你好", "，", "世界"):
        reply.observe(event(piece))
    body = json.dumps({"messages": QUESTION, "stream": True, "max_tokens": 60}).encode()
    assert json.loads(continuation_body(body, reply))["max_tokens"] == 60 - 3  # (not known: the chunks)
    assert json.loads(continuation_body(body, reply, spent_tokens=7))["max_tokens"] == 60 - 7
    assert json.loads(continuation_body(body, reply, spent_tokens=80))["max_tokens"] == 1  # (never below one)
