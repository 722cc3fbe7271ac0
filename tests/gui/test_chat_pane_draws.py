"""The chat pane draws what the core's conversation tells it and changes nothing by hand (#33):
the conversation is changed here only through the core (``ChatState``, ``Conversation``), and
the real pane's transcript is read as the user sees it."""

from __future__ import annotations

from gui.cluster.chat.client import ChatDelta
from gui.widgets.chat_pane import ChatPane


def test_the_pane_draws_a_reply_its_cut_and_its_continuation_from_the_model(qtbot):
    pane = ChatPane(send=None)
    qtbot.addWidget(pane)
    chat = pane.chat
    chat.ask("Count in bold")
    assert "Count in bold" in pane.transcript.toPlainText()
    chat.take(ChatDelta("**1**, **2**,"))
    # streamed text is put on screen with the next frame, as plain text
    qtbot.waitUntil(lambda: "**1**, **2**," in pane.transcript.toPlainText(), timeout=5000)
    pane.interrupt_reply("the computer b was lost")  # the failover's mark goes on the model
    cut = pane.conversation.messages[-1]
    assert pane.conversation.cut is cut and cut.interrupted and cut.note == "the computer b was lost"
    # the cut is drawn at once: the reply as Markdown
    assert "1, 2," in pane.transcript.toPlainText() and "**" not in pane.transcript.toPlainText()
    chat.end_reply(error="the connection was cut off")

    assert chat.resume() is not None  # what the relaunch continues, read from the model
    assert "The reply goes on where it was cut:" in pane.transcript.toPlainText()
    assert pane.busy()
    chat.take(ChatDelta("**1**, **2**, **3**"))  # the echoed prefix, then what is new
    qtbot.waitUntil(lambda: pane.reply_text() == " **3**", timeout=5000)
    chat.end_reply()
    assert not pane.busy() and pane.transcript.toPlainText().rstrip().endswith("3")


def test_a_new_chat_and_an_opened_one_are_drawn_from_the_conversation(qtbot):
    pane = ChatPane(send=None)
    qtbot.addWidget(pane)
    pane.chat.ask("First question")
    pane.chat.take(ChatDelta("Half an ans"))
    pane.chat.end_reply(stopped=True)
    kept = list(pane.conversation.messages)
    pane.new_chat()
    assert pane.transcript.toPlainText() == "" and pane.conversation.messages == []
    pane.conversation.open(kept)  # a past chat opened: the pane draws it, with why it was cut
    text = pane.transcript.toPlainText()
    assert "First question" in text and "Half an ans" in text and "Interrupted: stopped" in text
