"""The chat history store on a real SQLite file (#36 item 5): saved as it goes, survives a
``kill -9`` mid-reply, search, rename, delete, export, and the marks of cut replies."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap

import pytest

from gui.cluster.chat.conversation import COMPLETE, INTERRUPTED, Conversation
from gui.cluster.chat.history import (
    SAVE_EVERY_PIECES,
    SAVE_EVERY_SECONDS,
    SCHEMA_VERSION,
    ChatRecorder,
    ChatStore,
    HistoryError,
)


class Clock:
    """The recorder's throttle clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "data" / "chats.sqlite3"


def reopened(path) -> ChatStore:
    """A second store on the same file: what another process (or the next run) reads."""
    return ChatStore(path)


def chat_with_reply(store: ChatStore, question="What is a llama?", reply="A camelid.") -> int:
    conv = Conversation()
    rec = store.record(conv, details=lambda: ("tiny.gguf", "Be brief."))
    conv.add_user(question)
    conv.begin_reply()
    conv.append(reply)
    conv.finish("stop")
    rec.close()
    return rec.chat_id


def test_nothing_is_written_until_the_first_message(db_path):
    store = ChatStore(db_path)
    conv = Conversation()
    store.record(conv)
    assert store.chats() == [] and not db_path.exists()
    conv.add_user("Hello")
    assert db_path.exists()
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600  # chats are private
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_saved_as_it_goes_with_the_reply_throttled(db_path):
    store, clock = ChatStore(db_path), Clock()
    conv = Conversation()
    rec = ChatRecorder(store, conv, details=lambda: ("tiny.gguf", ""), clock=clock)
    conv.add_user("Count for me\nplease")
    other = reopened(db_path)
    [summary] = other.chats()
    assert (summary.title, summary.model, summary.messages) == ("Count for me", "tiny.gguf", 1)
    conv.begin_reply()
    for i in range(SAVE_EVERY_PIECES - 1):
        conv.append(f"{i} ")
    seen = other.load(rec.chat_id).messages[-1]
    assert seen.content == ""  # held back: fewer pieces than the throttle, no time passed
    conv.append("x ")  # the SAVE_EVERY_PIECES-th piece writes
    assert other.load(rec.chat_id).messages[-1].content == conv.messages[-1].content
    conv.append("late ")
    clock.now += SAVE_EVERY_SECONDS  # time passing writes too
    conv.append("later ")
    assert other.load(rec.chat_id).messages[-1].content.endswith("late later ")
    conv.append("end")
    conv.finish("stop")
    back = other.load(rec.chat_id).messages[-1]
    assert (back.content, back.state, back.finish_reason) == (conv.messages[-1].content, COMPLETE, "stop")


CHILD = textwrap.dedent("""
    import sys, time
    from gui.cluster.chat.conversation import Conversation
    from gui.cluster.chat.history import ChatStore
    store = ChatStore(sys.argv[1])
    conv = Conversation()
    store.record(conv, details=lambda: ("tiny.gguf", ""))
    conv.add_user("Tell me a long story")
    conv.begin_reply()
    i = 0
    while True:
        conv.append(f"t{i} ")
        i += 1
        print(i, flush=True)
        time.sleep(0.004)  # the pace of a streamed reply, not a wait for anything
""")


def test_kill_9_mid_reply_loses_at_most_the_throttle_window(db_path):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db_path)], stdout=subprocess.PIPE, text=True)
    try:
        appended = 0
        for line in child.stdout:
            appended = int(line)
            if appended >= 300:
                break
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store = reopened(db_path)
    [summary] = store.chats()
    question, reply = store.load(summary.id).messages
    assert question.content == "Tell me a long story"
    saved = reply.content.split()
    assert saved == [f"t{i}" for i in range(len(saved))]  # a clean prefix of what streamed
    assert len(saved) >= appended - (SAVE_EVERY_PIECES - 1)
    # it never finished: it comes back marked, not as a complete answer
    assert reply.state == INTERRUPTED and "stopped while this reply was arriving" in reply.note


def test_search_finds_a_chat_by_a_word_of_its_text(db_path):
    store = ChatStore(db_path)
    llama = chat_with_reply(store, "What is a llama?", "A camelid from the Andes.")
    chat_with_reply(store, "How do I bake bread?", "Flour, water, salt, yeast.")
    chinese = chat_with_reply(store, "你好", "羊驼是一种骆驼科动物。")
    assert [c.id for c in store.chats("andes")] == [llama]  # in a reply, any case
    assert [c.id for c in store.chats("LLAMA")] == [llama]  # in the title
    assert [c.id for c in store.chats("羊驼")] == [chinese]  # a two-character Chinese word
    assert store.chats("100%") == []  # LIKE's wildcards are searched as text
    assert len(store.chats("")) == 3


def test_rename_and_delete(db_path):
    store = ChatStore(db_path)
    first = chat_with_reply(store, "First question")
    second = chat_with_reply(store, "Second question")
    store.rename(first, "  Llamas  ")
    assert reopened(db_path).chat(first).title == "Llamas"
    with pytest.raises(HistoryError, match="cannot be empty"):
        store.rename(first, "   ")
    store.delete(second)
    assert [c.id for c in reopened(db_path).chats()] == [first]
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("SELECT COUNT(*) FROM messages WHERE chat_id = ?", (second,)).fetchone()[0] == 0
    with pytest.raises(HistoryError, match=f"no chat number {second}"):
        store.load(second)


def test_continuing_an_opened_chat_appends_to_it(db_path):
    store = ChatStore(db_path)
    chat_id = chat_with_reply(store, "What is a llama?", "A camelid.")
    conv = reopened(db_path).load(chat_id)
    rec = store.record(conv, chat_id)
    conv.add_user("And an alpaca?")
    conv.begin_reply()
    conv.append("A smaller camelid.")
    conv.finish("stop")
    rec.close()
    texts = [m.content for m in reopened(db_path).load(chat_id).messages]
    assert texts == ["What is a llama?", "A camelid.", "And an alpaca?", "A smaller camelid."]
    assert len(store.chats()) == 1


def failover_chat(store: ChatStore) -> int:
    """A reply cut by a lost worker, then the same question answered after the relaunch."""
    conv = Conversation()
    rec = store.record(conv, details=lambda: ("tiny.gguf", "Be brief."))
    conv.add_user("Explain RPC")
    conv.begin_reply()
    conv.append("Remote procedure")
    conv.interrupt("the worker at 10.0.0.2 was lost")
    conv.set_note(conv.messages[-1], "the worker at 10.0.0.2 was lost (connection reset)")
    conv.begin_reply()
    conv.append("Remote procedure calls run code elsewhere.")
    conv.finish("stop")
    rec.close()
    return rec.chat_id


def test_cut_reply_marks_survive_a_round_trip(db_path):
    store = ChatStore(db_path)
    chat_id = failover_chat(store)
    _, cut, again = reopened(db_path).load(chat_id).messages
    assert (cut.state, cut.content) == (INTERRUPTED, "Remote procedure")
    assert cut.note == "the worker at 10.0.0.2 was lost (connection reset)"
    assert (again.state, again.finish_reason) == (COMPLETE, "stop")


def test_a_resumed_reply_keeps_its_mark(db_path, tmp_path):
    """A reply cut by a lost worker and continued on the same message after the relaunch (#34)
    comes back marked resumed, with why it was cut, and the export says so (#36)."""
    store = ChatStore(db_path)
    conv = Conversation()
    rec = store.record(conv, details=lambda: ("tiny.gguf", ""))
    conv.add_user("Explain RPC")
    conv.begin_reply()
    conv.append("Remote procedure")
    conv.interrupt("the worker at 10.0.0.2 was lost")
    conv.resume_reply()
    conv.append(" calls run code elsewhere.")
    conv.finish("stop")
    rec.close()
    _, reply = reopened(db_path).load(rec.chat_id).messages
    assert (reply.content, reply.state, reply.resumed) == ("Remote procedure calls run code elsewhere.", COMPLETE, True)
    assert reply.note == "the worker at 10.0.0.2 was lost"
    md = store.export(rec.chat_id, tmp_path / "chat.md", "markdown").read_text(encoding="utf-8")
    assert ("Remote procedure calls run code elsewhere.\n\n> Cut by a lost worker and continued where it "
            "stopped (the worker at 10.0.0.2 was lost).") in md


def test_export_markdown_and_json(db_path, tmp_path):
    store = ChatStore(db_path)
    chat_id = failover_chat(store)
    md = store.export(chat_id, tmp_path / "out" / "chat.md", "markdown").read_text(encoding="utf-8")
    assert md.startswith("# Explain RPC\n")
    assert "model: tiny.gguf" in md and "## System prompt\n\nBe brief." in md
    assert md.index("## You\n\nExplain RPC") < md.index("Remote procedure\n\n> Interrupted: the worker at "
                                                        "10.0.0.2 was lost (connection reset)")
    assert "> Asked again after the interrupted reply above.\n\nRemote procedure calls run code elsewhere." in md
    path = store.export(chat_id, tmp_path / "chat.json", "json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = json.loads(path.read_text(encoding="utf-8"))
    assert (data["title"], data["model"], data["system"]) == ("Explain RPC", "tiny.gguf", "Be brief.")
    assert [(m["role"], m["state"]) for m in data["messages"]] == [
        ("user", COMPLETE), ("assistant", INTERRUPTED), ("assistant", COMPLETE)]
    # the JSON is a transcript the app reads back
    assert [m.content for m in Conversation.load(path).messages] == [
        "Explain RPC", "Remote procedure", "Remote procedure calls run code elsewhere."]
    with pytest.raises(HistoryError, match="Markdown or JSON"):
        store.export(chat_id, tmp_path / "chat.pdf", "pdf")
    assert not (tmp_path / "chat.pdf").exists()


def test_a_file_that_is_not_a_database_is_set_aside(db_path):
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"not a database at all, just some bytes" * 200)
    store = ChatStore(db_path)
    assert store.chats() == []
    assert store.set_aside_to is not None and store.set_aside_to.read_bytes().startswith(b"not a database")
    chat_with_reply(store)
    assert len(reopened(db_path).chats()) == 1


def test_a_newer_schema_is_refused_in_words(db_path):
    db_path.parent.mkdir(parents=True)
    with sqlite3.connect(db_path) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(HistoryError, match="newer herd.*update herd"):
        ChatStore(db_path)


def test_a_change_that_cannot_be_saved_is_reported_in_words(db_path):
    store = ChatStore(db_path)
    conv = Conversation()
    heard = []
    rec = store.record(conv, failed=heard.append)
    conv.add_user("First")
    reopened(db_path).delete(rec.chat_id)  # deleted from another window while it is open
    conv.add_user("Second")  # the conversation goes on
    assert [m.content for m in conv.messages] == ["First", "Second"]
    assert heard and heard[0].startswith(f"Could not save this chat to {db_path} (")
    assert "it stays on screen" in heard[0]


def test_a_folder_in_the_way_is_an_error_in_words_and_kept(db_path):
    db_path.mkdir(parents=True)  # not a file: nothing to set aside
    with pytest.raises(HistoryError, match="Cannot open the chat history .*folder can be written"):
        ChatStore(db_path)
    assert db_path.is_dir()
