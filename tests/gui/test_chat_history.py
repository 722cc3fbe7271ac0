"""Past chats in the chat pane (#36 item 5): a chat is kept from its first message against a
real llama-server, the list shows it again after a restart (a new pane on the same database),
opening one shows its messages and sending continues it; rename, delete, search, export."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QLineEdit, QMessageBox

from gui.cluster.chat.conversation import Conversation
from gui.cluster.chat.history import SAVE_EVERY_PIECES, ChatStore
from gui.session import ClusterSession
from gui.widgets.chat_pane import ChatPane

pytestmark = pytest.mark.engine


@pytest.fixture
def session(bridge):
    s = ClusterSession(bridge)
    yield s
    s.close()


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "chats.sqlite3"


@pytest.fixture
def make_pane(qtbot, db_path):
    """``make_pane(send)``: a chat pane keeping its chats in ``db_path`` — each call is the app
    started again on the same database."""
    stores = []

    def make(send=None) -> ChatPane:
        store = ChatStore(db_path)
        stores.append(store)
        pane = ChatPane(send, history=store)
        qtbot.addWidget(pane)
        pane.resize(700, 600)
        pane.show()
        return pane

    yield make
    for store in stores:
        store.close()


def ask(qtbot, pane: ChatPane, text: str) -> None:
    pane.max_tokens.setValue(8)
    pane.input.setPlainText(text)
    with qtbot.waitSignal(pane.replyFinished, timeout=30000):
        qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)


def test_a_chat_is_kept_from_its_first_message_and_listed_after_a_restart(qtbot, session, llama_server,
                                                                          make_pane):
    pane = make_pane(session.chat_sender(llama_server))
    assert pane.history.chats.titles() == []
    pane.input.setPlainText("Name three colours")
    qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)
    with qtbot.waitSignal(pane.replyFinished, timeout=30000):
        # listed from its first message, before the reply has ended
        qtbot.waitUntil(lambda: pane.history.chats.titles() == ["Name three colours"], timeout=30000)
        assert pane.busy()
    reply = pane.conversation.messages[-1].content
    ask(qtbot, pane, "And three animals?")
    pane.new_chat()
    ask(qtbot, pane, "Second chat here")
    qtbot.waitUntil(lambda: pane.history.chats.titles() == ["Second chat here", "Name three colours"])

    again = make_pane()  # the app closed and opened again
    chats = again.history.chats
    assert chats.titles() == ["Second chat here", "Name three colours"]
    assert chats.tree.topLevelItem(1).text(2) == ""  # no model known for a bare URL
    assert again.conversation.messages == [] and again.transcript.toPlainText() == ""
    # opening one shows its messages
    chats.select(chats.store.chats()[1].id)
    qtbot.mouseClick(chats.open_button, Qt.MouseButton.LeftButton)
    assert [m.content for m in again.conversation.messages][:3] == ["Name three colours", reply,
                                                                     "And three animals?"]
    shown = again.transcript.toPlainText()
    assert "Name three colours" in shown and "And three animals?" in shown
    assert reply.split()[0] in shown


def test_continuing_an_opened_chat_appends_to_it(qtbot, session, llama_server, make_pane, db_path):
    first = make_pane(session.chat_sender(llama_server))
    ask(qtbot, first, "Hello there")
    chat_id = first.history.chat_id

    pane = make_pane(session.chat_sender(llama_server))
    assert pane.history.open_chat(chat_id)
    ask(qtbot, pane, "Tell me more")
    kept = ChatStore(db_path)
    try:
        assert len(kept.chats()) == 1
        messages = kept.load(chat_id).messages
        assert [(m.role, m.content) for m in messages][:3] == [
            ("user", "Hello there"), ("assistant", first.conversation.messages[1].content), ("user", "Tell me more")]
        assert messages[3].role == "assistant" and messages[3].content == pane.conversation.messages[3].content
        # what continued was sent the whole conversation: the server saw the earlier turn
        assert pane.request_messages()[0]["content"] == "Hello there"
    finally:
        kept.close()


def kept_chats(db_path) -> ChatStore:
    """A store with two chats written through the core (no server needed)."""
    store = ChatStore(db_path)
    for question, answer in (("What is a llama?", "A camelid."), ("Bake bread", "Flour and water.")):
        conv = Conversation()
        rec = store.record(conv)
        conv.add_user(question)
        conv.begin_reply()
        conv.append(answer)
        conv.finish("stop")
        rec.close()
    store.close()
    return store


@pytest.mark.usefixtures("qapp")
def test_search_rename_delete_and_export_from_the_list(qtbot, make_pane, db_path, tmp_path):
    kept_chats(db_path)
    pane = make_pane()
    chats = pane.history.chats
    qtbot.keyClicks(chats.search, "camel")
    assert chats.titles() == ["What is a llama?"]
    chats.search.clear()
    assert chats.titles() == ["Bake bread", "What is a llama?"]

    # rename: the title cell is edited in place
    chats.tree.setCurrentItem(chats.tree.topLevelItem(1))
    assert chats.rename_action in chats.more_button.menu().actions()
    assert chats.rename_action in chats.tree.actions()  # on a right click too
    chats.rename_action.trigger()
    qtbot.waitUntil(lambda: chats.tree.findChild(QLineEdit) is not None)
    editor = chats.tree.findChild(QLineEdit)  # the cell's editor
    editor.selectAll()
    qtbot.keyClicks(editor, "Llamas")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: chats.titles() == ["Bake bread", "Llamas"])
    assert make_pane().history.chats.titles() == ["Bake bread", "Llamas"]

    # export
    assert chats.export_selected(str(tmp_path / "llamas.json"), "json")
    assert json.loads((tmp_path / "llamas.json").read_text(encoding="utf-8"))["title"] == "Llamas"
    assert chats.export_selected(str(tmp_path / "llamas.md"), "markdown")
    assert (tmp_path / "llamas.md").read_text(encoding="utf-8").startswith("# Llamas\n")

    # delete the chat on screen: asked first, then the pane starts a new chat
    pane.history.open_chat(chats.selected_id())
    assert "A camelid." in pane.transcript.toPlainText()

    def answer_yes():
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            box.button(QMessageBox.StandardButton.Yes).click()
        else:
            QTimer.singleShot(20, answer_yes)

    QTimer.singleShot(0, answer_yes)
    chats.delete_action.trigger()
    qtbot.waitUntil(lambda: chats.titles() == ["Bake bread"])
    assert pane.conversation.messages == [] and pane.transcript.toPlainText() == ""
    assert pane.history.chat_id is None


@pytest.mark.usefixtures("qapp")
def test_an_empty_title_is_refused_in_words(qtbot, make_pane, db_path):
    kept_chats(db_path)
    chats = make_pane().history.chats
    chats.tree.setCurrentItem(chats.tree.topLevelItem(0))
    assert not chats.rename(chats.selected_id(), "   ")
    assert chats.message.isVisible() and "cannot be empty" in chats.message.text()
    qtbot.waitUntil(lambda: chats.titles() == ["Bake bread", "What is a llama?"])


@pytest.mark.usefixtures("qapp")
def test_a_cut_reply_opens_with_its_mark(qtbot, make_pane, db_path):
    store = ChatStore(db_path)
    conv = Conversation()
    rec = store.record(conv)
    conv.add_user("Explain RPC")
    conv.begin_reply()
    conv.append("Remote procedure")
    conv.interrupt("the worker at 10.0.0.2 was lost")
    conv.begin_reply()
    conv.append("Remote procedure calls run code elsewhere.")
    conv.finish("stop")
    rec.close()
    store.close()
    pane = make_pane()
    assert pane.history.open_chat(rec.chat_id)
    shown = pane.transcript.toPlainText()
    assert "Interrupted: the worker at 10.0.0.2 was lost" in shown
    assert shown.index("Interrupted:") < shown.index("Asked again after the interrupted reply above.") \
        < shown.index("calls run code elsewhere")


@pytest.mark.usefixtures("qapp")
def test_an_unreadable_history_is_set_aside_and_said(qtbot, make_pane, db_path):
    db_path.write_bytes(b"this is not a database" * 100)
    chats = make_pane().history.chats
    assert chats.titles() == []
    assert chats.message.isVisible() and "could not be read; it was moved to" in chats.message.text()
    assert ".corrupt-" in chats.message.text()


def test_the_window_lists_the_chats_kept_in_the_data_folder(make_window, tmp_path):
    # (the autouse fixture of tests/gui/conftest.py points the data folder's database here)
    kept_chats(tmp_path / "chats.sqlite3")
    win = make_window(browse=False)
    assert win.chat_store.path == tmp_path / "chats.sqlite3"
    assert win.chat.history.chats.titles() == ["Bake bread", "What is a llama?"]
    assert (tmp_path / "chats.sqlite3-wal").exists()  # open, in WAL mode
    win.close()
    assert not (tmp_path / "chats.sqlite3-wal").exists()  # closed with the window, WAL folded back


def test_a_reply_cut_by_a_lost_worker_is_kept_with_its_mark(qtbot, session, llama_server, make_pane, db_path):
    pane = make_pane(session.chat_sender(llama_server))
    pane.max_tokens.setValue(4000)
    pane.input.setPlainText("Write a long story")
    qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(pane.conversation.messages) == 2 and bool(pane.conversation.messages[1].content),
                    timeout=30000)
    # what the session relays when the failover supervisor confirms a lost worker
    pane.interrupt_reply("the worker at 192.0.2.7 was lost")
    with qtbot.waitSignal(pane.replyFinished, timeout=30000):
        pane.stop()
    kept = ChatStore(db_path)
    try:
        reply = kept.load(pane.history.chat_id).messages[1]
        assert reply.state == "interrupted" and reply.note == "the worker at 192.0.2.7 was lost"
        assert reply.content and pane.conversation.messages[1].content.startswith(reply.content)
    finally:
        kept.close()


def test_a_failed_reply_given_its_reason_later_is_kept_with_both(qtbot, session, make_pane, db_path):
    from conftest import free_port

    # llama-server died with the worker: the stream fails before the loss is confirmed
    pane = make_pane(session.chat_sender(f"http://127.0.0.1:{free_port()}"))
    pane.input.setPlainText("Hello?")
    with qtbot.waitSignal(pane.replyFinished, timeout=30000):
        qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)
    pane.interrupt_reply("the worker at 192.0.2.7 was lost")
    kept = ChatStore(db_path)
    try:
        reply = kept.load(pane.history.chat_id).messages[1]
        assert reply.state == "interrupted"
        assert reply.note.startswith("the worker at 192.0.2.7 was lost (") and reply.note.endswith(")")
    finally:
        kept.close()


@pytest.mark.usefixtures("qapp")
def test_the_list_does_not_make_the_pane_wider(make_pane):
    # the pane sits beside the dashboard; a row of buttons once made the window too wide (#17)
    assert make_pane().minimumSizeHint().width() <= ChatPane().minimumSizeHint().width()


PANE_CHILD = """
import json, sys
from PySide6.QtWidgets import QApplication
app = QApplication([])
from gui.bridge import AsyncBridge
from gui.cluster.chat.history import ChatStore
from gui.session import ClusterSession
from gui.widgets.chat_pane import ChatPane
session = ClusterSession(AsyncBridge())
pane = ChatPane(session.chat_sender(sys.argv[2]), history=ChatStore(sys.argv[1]))
pane.max_tokens.setValue(1000)
def said(index, message):  # every piece of the reply as the pane's conversation has it
    if index == 1:
        print(json.dumps(message.content), flush=True)
pane.conversation.subscribe(said)
pane.send_text("Write a very long story")
app.exec()
"""


def test_the_app_killed_mid_reply_keeps_the_reply_so_far(llama_server, db_path):

    # a chat pane in a process of its own, streaming from the real llama-server, killed by SIGKILL
    child = subprocess.Popen([sys.executable, "-c", PANE_CHILD, str(db_path), llama_server],
                             stdout=subprocess.PIPE, text=True, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    seen: list[str] = []
    try:
        for line in child.stdout:
            seen.append(json.loads(line))
            if len(seen) >= 4 * SAVE_EVERY_PIECES:
                child.kill()
                break
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    assert len(seen) >= 4 * SAVE_EVERY_PIECES, "the reply ended before the kill"
    store = ChatStore(db_path)
    try:
        [summary] = store.chats()
        question, reply = store.load(summary.id).messages
    finally:
        store.close()
    assert question.content == "Write a very long story" and summary.title == question.content
    assert reply.state == "interrupted"
    # what was kept is the reply as it stood at most one throttle window before the last piece
    # the test saw (or later: the child went on until the kill landed)
    assert reply.content in seen[-SAVE_EVERY_PIECES:] or reply.content.startswith(seen[-1])
