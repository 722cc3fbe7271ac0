"""The conversation owns its changes and tells them (#33): what is added, text arriving, a reply
finished, cut by a lost worker, continued; the chat pane's state (the reply in progress, its
stats, the settings) lives beside it, Qt-free. No QApplication here."""

from __future__ import annotations

import pytest

from gui.cluster.chat import conversation as conv
from gui.cluster.chat.chat_state import ChatState
from gui.cluster.chat.client import ChatDelta, ChatDone
from gui.cluster.chat.continuation import resume_request
from gui.cluster.chat.conversation import Change, Conversation


def _watched(c: Conversation) -> list[Change]:
    seen: list[Change] = []
    c.watch(seen.append)
    return seen


def _kinds(seen: list[Change]) -> list[tuple[str, int, str]]:
    return [(ch.kind, ch.index, ch.text) for ch in seen]


def test_a_question_and_its_streamed_reply_are_told_in_order():
    c = Conversation()
    seen = _watched(c)
    c.add_user("Count to three")
    reply = c.begin_reply()
    c.append("1, ")
    c.append("2, 3")
    c.finish("stop")
    assert _kinds(seen) == [(conv.ADDED, 0, ""), (conv.ADDED, 1, ""), (conv.TEXT, 1, "1, "),
                            (conv.TEXT, 1, "2, 3"), (conv.FINISHED, 1, "")]
    assert seen[-1].message is reply and reply.content == "1, 2, 3" and reply.finish_reason == "stop"


def test_a_reply_cut_by_a_lost_worker_is_marked_on_the_model_and_may_go_on():
    c = Conversation()
    c.add_user("Count to fifty")
    reply = c.begin_reply()
    c.append("1, 2, 3,")
    seen = _watched(c)
    assert c.mark_cut("the worker at 192.0.2.7 was lost") is reply
    assert _kinds(seen) == [(conv.CUT, 1, "")]
    assert reply.interrupted and reply.note == "the worker at 192.0.2.7 was lost"
    assert c.cut is reply and c.resumable is reply
    # the resume reads the mark from the model: the conversation with the partial reply as prefix
    assert resume_request(c) == [{"role": "user", "content": "Count to fifty"},
                                 {"role": "assistant", "content": "1, 2, 3,"}]
    assert c.resume_reply() is reply
    assert seen[-1].kind == conv.RESUMED and reply.resumed and c.resumable is None
    c.append(" 4")
    assert _kinds(seen)[-1] == (conv.TEXT, 1, " 4") and reply.content == "1, 2, 3, 4"
    # continuing failed (the server not back yet): it may be continued again
    c.fail("the connection to the server was lost during this reply")
    assert c.resumable is reply


def test_a_reply_the_person_stopped_is_not_continued():
    c = Conversation()
    c.add_user("Count to fifty")
    c.begin_reply()
    c.append("1, 2,")
    c.interrupt("stopped")
    assert c.resumable is None and resume_request(c) is None
    # a loss confirmed after a stop does not make the stopped reply one to continue
    assert c.mark_cut("the worker at 192.0.2.7 was lost") is None and c.resumable is None


def test_a_loss_confirmed_after_the_stream_failed_is_marked_on_the_failed_reply():
    c = Conversation()
    c.add_user("Count to fifty")
    reply = c.begin_reply()
    c.append("1, 2,")
    c.fail("the connection to the server was lost during this reply")
    seen = _watched(c)
    assert c.mark_cut("the worker at 192.0.2.7 was lost") is reply
    assert _kinds(seen) == [(conv.NOTED, 1, "")]
    assert reply.note == ("the worker at 192.0.2.7 was lost "
                          "(the connection to the server was lost during this reply)")
    assert c.resumable is reply


def test_leaving_out_clearing_and_opening_are_told():
    c = Conversation()
    told: list[tuple[int, str]] = []
    c.subscribe(lambda i, m: told.append((i, m.role)))
    seen = _watched(c)
    for q in ("one", "two"):
        c.add_user(q)
        c.begin_reply()
        c.finish("stop")
    assert c.leave_out_turns(1) == 2
    assert [ch.kind for ch in seen[-2:]] == [conv.LEFT_OUT, conv.LEFT_OUT]
    kept = list(c.messages)
    told.clear()
    c.clear()
    c.open(kept)
    assert [ch.kind for ch in seen[-2:]] == [conv.CLEARED, conv.OPENED]
    assert seen[-1].message is None and c.messages == kept
    assert told == []  # the index-and-message subscribers (the history) are told of messages only


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_chat_state_streams_a_reply_into_the_conversation_and_measures_it():
    clock = _Clock()
    chat = ChatState(clock=clock)
    chat.settings.system = "Be brief."
    seen = _watched(chat.conversation)
    messages = chat.ask("Hi")
    assert messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert chat.reply is not None and chat.reply.message is chat.conversation.streaming
    for t, piece in ((100.25, "Hel"), (100.5, "lo"), (101.0, "!")):
        clock.now = t
        chat.take(ChatDelta(piece))
    chat.take(ChatDone("", "stop", {"predicted_per_second": 4.5}))
    st = chat.end_reply()
    assert chat.reply is None and chat.last_stats is st
    assert st.ttft_ms() == pytest.approx(250.0) and st.seen_tps() == pytest.approx(2 / 0.75)
    assert st.pieces == 3 and st.server_tps == 4.5
    assert [ch.kind for ch in seen] == [conv.ADDED, conv.ADDED, conv.TEXT, conv.TEXT, conv.TEXT, conv.FINISHED]
    assert chat.conversation.messages[-1].content == "Hello!"
    assert chat.stats == [{"tokens": 3, "ttft_ms": pytest.approx(250.0), "seen_tps": pytest.approx(2 / 0.75),
                           "server_tps": 4.5, "stopped": False, "error": None}]
    assert chat.settings.params() == {"temperature": 0.8, "max_tokens": 256}


def test_the_chat_state_continues_only_a_cut_reply_and_takes_the_echo_off():
    chat = ChatState()
    chat.ask("Count")
    chat.take(ChatDelta("1, 2,"))
    assert chat.resume() is None  # a reply streams: nothing to continue
    chat.conversation.mark_cut("the computer b was lost")
    chat.take(ChatDelta(" 3,"))  # text after the cut is not the conversation's any more
    st = chat.end_reply(error="the connection was cut off")
    assert st is not None and chat.conversation.messages[-1].note == "the computer b was lost"
    assert chat.conversation.messages[-1].content == "1, 2,"

    messages = chat.resume()
    assert messages == [{"role": "user", "content": "Count"}, {"role": "assistant", "content": "1, 2,"}]
    chat.take(ChatDelta("1, 2, 3"))  # llama-server sends the prefix back first (#34)
    chat.take(ChatDelta(", 4"))
    chat.take(ChatDone("", "stop", {}))
    chat.end_reply()
    last = chat.conversation.messages[-1]
    assert last.content == "1, 2, 3, 4" and last.resumed and not last.interrupted
    assert chat.resume() is None  # it ran to its end


def test_a_stopped_reply_is_kept_marked_and_not_continued():
    chat = ChatState()
    chat.ask("Count")
    chat.take(ChatDelta("1,"))
    chat.end_reply(stopped=True)
    last = chat.conversation.messages[-1]
    assert last.interrupted and last.note == "stopped" and last.content == "1,"
    assert chat.resume() is None and chat.stats[-1]["stopped"] is True
