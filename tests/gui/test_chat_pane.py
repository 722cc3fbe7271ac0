"""The chat pane against a real llama-server: a reply streams in, Stop stops it."""

from __future__ import annotations

import json
import stat

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextFormat
from PySide6.QtWidgets import QApplication

from gui.cluster.chat.conversation import Conversation
from gui.session import ClusterSession
from gui.widgets.chat_pane import ChatPane

pytestmark = pytest.mark.engine


@pytest.fixture
def session(bridge):
    s = ClusterSession(bridge)
    yield s
    s.close()


@pytest.fixture
def pane(qtbot, session, llama_server):
    p = ChatPane(session.chat_sender(llama_server))
    qtbot.addWidget(p)
    p.resize(600, 500)
    p.show()
    return p


def test_reply_streams_in_with_stats(qtbot, pane):
    pane.max_tokens.setValue(40)
    pane.input.setPlainText("Hello there")
    qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)
    assert pane.busy() and pane.stop_button.isEnabled()
    with qtbot.waitSignal(pane.replyFinished, timeout=30000) as sig:
        pass
    st = sig.args[0]
    assert st.pieces == 40  # demo models have no end token: the reply runs to max_tokens
    assert st.server_tps and st.server_tps > 0
    assert st.ttft_ms() is not None and st.ttft_ms() > 0
    text = pane.transcript.toPlainText()
    reply = pane.conversation.messages[-1]
    assert reply.role == "assistant" and reply.state == "complete" and reply.content.split()[0] in text
    assert "40 tokens" in text and "tok/s" in text and "first token after" in text
    assert not pane.busy() and pane.send_button.isEnabled() and not pane.stop_button.isEnabled()


def test_stop_stops_the_stream(qtbot, pane):
    pane.max_tokens.setValue(4000)
    assert pane.send_text("Tell me a long story")
    qtbot.waitUntil(lambda: pane.reply_stats is not None and pane.reply_stats.pieces >= 5, timeout=30000)
    with qtbot.waitSignal(pane.replyFinished, timeout=10000) as sig:
        qtbot.mouseClick(pane.stop_button, Qt.MouseButton.LeftButton)
    st = sig.args[0]
    assert 5 <= st.pieces < 4000
    assert pane.stats[-1]["stopped"] is True
    assert "stopped" in pane.transcript.toPlainText().splitlines()[-1]
    # What arrived is kept; nothing more arrives after Stop.
    assert pane.conversation.messages[-1].state == "interrupted"  # marked, not dropped
    assert not pane.resume_reply()  # a stopped reply does not go on by itself (#34)
    kept = len(pane.conversation.messages[-1].content)
    qtbot.wait(300)
    assert len(pane.conversation.messages[-1].content) == kept
    # And the pane is usable again: a second question gets its own reply.
    pane.max_tokens.setValue(5)
    with qtbot.waitSignal(pane.replyFinished, timeout=30000) as sig2:
        assert pane.send_text("Short one")
    assert sig2.args[0].pieces == 5
    assert [m.role for m in pane.conversation.messages] == ["user", "assistant", "user", "assistant"]
    # the stopped reply is sent with the text the user saw; the new one completed
    assert pane.request_messages()[1]["role"] == "assistant" and pane.conversation.messages[-1].state == "complete"


def test_server_error_is_shown_and_pane_keeps_working(qtbot, session, llama_server):
    # A port where nothing listens: the failure is shown in words, the pane stays usable.
    from tests.conftest import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    pane = ChatPane(session.chat_sender(dead))
    qtbot.addWidget(pane)
    with qtbot.waitSignal(pane.replyFinished, timeout=10000):
        assert pane.send_text("anyone?")
    assert "failed" in pane.status.text().lower()
    assert pane.send_button.isEnabled()
    pane.set_send(session.chat_sender(llama_server))
    pane.max_tokens.setValue(3)
    with qtbot.waitSignal(pane.replyFinished, timeout=30000) as sig:
        assert pane.send_text("now?")
    assert sig.args[0].pieces == 3


def test_markdown_rendered_and_history_saved(qtbot, tmp_path):
    # Rendering of a finished reply, driven through the pane's own event path.
    from gui.cluster.chat.client import ChatDelta, ChatDone

    pane = ChatPane(send=None)
    qtbot.addWidget(pane)
    pane.chat.ask("code?")  # the core's state changes; the pane draws what it is told (#33)
    for piece in ["Here **bold**:\n\n", "```python\n", "print('hi')\n", "```\n"]:
        pane.chat.take(ChatDelta(piece))
    pane.chat.take(ChatDone("", "stop", {"predicted_per_second": 123.0}))
    pane._end_reply()
    doc = pane.transcript.document()
    plain = doc.toPlainText()
    assert "**" not in plain and "```" not in plain and "print('hi')" in plain
    fences = []
    b = doc.begin()
    while b.isValid():
        if b.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence):
            fences.append(b.text())
        b = b.next()
    assert fences == ["print('hi')"]
    pane.system_edit.setText("Be brief.")
    saved = pane.save(tmp_path / "chat.json")
    data = json.loads(saved.read_text())
    assert data["messages"][-1]["content"].startswith("Here **bold**")
    assert data["stats"][-1]["server_tps"] == 123.0
    # the core's transcript format, private to its owner, and readable back by the core
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    back = Conversation.load(saved)
    assert [(m.role, m.state) for m in back.messages] == [("system", "complete"), ("user", "complete"),
                                                          ("assistant", "complete")]
    assert back.messages[0].content == "Be brief."


def test_a_conversation_too_long_is_held_back_and_the_oldest_turn_left_out(qtbot, pane):
    # llama_server: the demo model, 2048 tokens of context in its one slot
    pane.system_edit.setText("Be brief.")
    pane.max_tokens.setValue(8)
    long = " ".join(["hello"] * 600)  # ≈ 730 of the demo model's tokens
    for i in range(2):
        with qtbot.waitSignal(pane.replyFinished, timeout=60000):
            assert pane.send_text(f"Turn {i}: {long}")
        assert pane.conversation.messages[-1].state == "complete"
    assert not pane.context_note.isVisible()
    # a third one does not fit with both before it and room for a 64-token reply
    pane.max_tokens.setValue(64)
    pane.input.setPlainText(f"Turn 2: {long}")
    qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(pane.context_note.isVisible, timeout=30000)
    note = pane.context_text.text()
    assert "tokens long" in note and "oldest 1 turn" in note
    assert pane.drop_button.isVisible() and not pane.busy()
    assert len(pane.conversation.messages) == 4  # nothing sent yet
    assert pane.input.toPlainText().startswith("Turn 2:")
    with qtbot.waitSignal(pane.replyFinished, timeout=60000) as sig:
        qtbot.mouseClick(pane.drop_button, Qt.MouseButton.LeftButton)
    assert sig.args[0].finish_reason == "length"
    assert pane.stats[-1]["error"] is None and pane.conversation.messages[-1].state == "complete"
    assert not pane.context_note.isVisible() and pane.input.toPlainText() == ""
    assert [m.left_out for m in pane.conversation.messages] == [True, True, False, False, False, False]
    sent = pane.request_messages()
    assert sent[0] == {"role": "system", "content": "Be brief."} and sent[1]["content"].startswith("Turn 1:")
    assert "no longer sent" in pane.transcript.toPlainText()


def test_a_paste_too_long_on_its_own_can_only_be_cancelled(qtbot, pane):
    pane.input.setPlainText("x" * 30000)
    qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(pane.context_note.isVisible, timeout=30000)
    assert "alone does not fit" in pane.context_text.text()
    assert not pane.drop_button.isVisible()
    qtbot.mouseClick(pane.cancel_button, Qt.MouseButton.LeftButton)
    assert not pane.context_note.isVisible() and "Not sent" in pane.status.text()
    assert pane.input.toPlainText() == "x" * 30000 and pane.conversation.messages == []
    assert pane.send_button.isEnabled()


def test_the_servers_refusal_is_shown_in_words(qtbot, session, llama_server):
    # A sender without the context check (as an older app would send): llama-server itself
    # answers 400 "exceeds the available context size"; the pane says it in words.
    pane = ChatPane(lambda messages, params: session.chat(messages, params, llama_server))
    qtbot.addWidget(pane)
    with qtbot.waitSignal(pane.replyFinished, timeout=30000):
        assert pane.send_text("x" * 30000)
    shown = pane.status.text() + pane.transcript.toPlainText()
    assert "too long for the server" in shown and "2048" in shown
    assert "{" not in shown and "exceeds the available context size" not in shown
    assert pane.conversation.messages[-1].interrupted and pane.send_button.isEnabled()


@pytest.mark.parametrize("size", [(1366, 768), (1600, 1000)])
def test_a_30k_paste_leaves_the_dashboard_its_width(qtbot, make_window, llama_server, size):
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    def settle():
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        QApplication.processEvents()

    win = make_window(browse=False)
    win.resize(*size)
    qtbot.waitExposed(win)
    bar = win.tabs.tabBar()
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(2).center())
    settle()
    chat_width, dash_width, win_width = win.chat.width(), win.dashboard.width(), win.width()
    assert dash_width > 200
    paste = "y" * 30000  # no space anywhere to break at
    # first as sent with no check: the server's refusal lands in the status and the transcript
    win.chat.set_send(lambda messages, params: win.session.chat(messages, params, llama_server))
    with qtbot.waitSignal(win.chat.replyFinished, timeout=30000):
        assert win.chat.send_text(paste + " " + paste)
    settle()
    assert (win.chat.width(), win.dashboard.width(), win.width()) == (chat_width, dash_width, win_width)
    # then with the check: the note that holds it back, the paste left in the input
    win.chat.set_send(win.session.chat_sender(llama_server))
    win.chat.input.setPlainText(paste)
    qtbot.mouseClick(win.chat.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(win.chat.context_note.isVisible, timeout=30000)
    settle()
    assert (win.chat.width(), win.dashboard.width(), win.width()) == (chat_width, dash_width, win_width)


def test_stop_while_counting_keeps_the_message_unsent(qtbot, bridge, pane):
    import threading

    gate = threading.Event()
    # the bridge's loop is kept busy, so the count cannot be over when Stop is pressed
    bridge.call_soon(gate.wait, 30)
    try:
        pane.input.setPlainText("Hello there")
        qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)
        assert pane.busy() and pane.stop_button.isEnabled() and not pane.send_button.isEnabled()
        assert "Counting" in pane.status.text()
        qtbot.mouseClick(pane.stop_button, Qt.MouseButton.LeftButton)
    finally:
        gate.set()
    qtbot.waitUntil(lambda: not pane.busy(), timeout=10000)
    assert "Not sent" in pane.status.text() and pane.input.toPlainText() == "Hello there"
    assert pane.conversation.messages == [] and pane.send_button.isEnabled()
    assert not pane.stop_button.isEnabled() and not pane.context_note.isVisible()


def test_clicking_the_chat_tab_puts_the_keyboard_in_the_question_box(qtbot, make_window):
    """A person who comes to the chat types the question at once, without clicking the box."""
    win = make_window(browse=False)
    win.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is win, timeout=5000)
    win.tabs.setCurrentWidget(win.editor)
    bar = win.tabs.tabBar()
    chat_tab = win.tabs.indexOf(win.chat.parentWidget())
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(chat_tab).center())
    assert win.tabs.currentIndex() == chat_tab
    # (asked before typing: keys sent to a button that has the keyboard would press it)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is win.chat.input, timeout=5000)
    qtbot.keyClicks(QApplication.focusWidget(), "Why is the sky blue?")
    assert win.chat.input.toPlainText() == "Why is the sky blue?"

    # a field of the pane being typed in keeps the keyboard when the person comes back
    win.chat.system_edit.clear()
    win.chat.system_edit.setFocus()
    qtbot.waitUntil(win.chat.system_edit.hasFocus, timeout=5000)
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(win.tabs.indexOf(win.launch)).center())
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(chat_tab).center())
    qtbot.waitUntil(lambda: QApplication.focusWidget() is win.chat.system_edit, timeout=5000)
    qtbot.keyClicks(QApplication.focusWidget(), "Be brief.")
    assert win.chat.system_edit.text() == "Be brief."
