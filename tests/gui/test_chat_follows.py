"""The chat follows a long, fast reply to its end (also when its view gets shorter, as when the
failover banner appears), stops when the user scrolls up, and follows
again when they scroll back down (#17: after a recovery the view stayed at "Assistant" while
thousands of tokens streamed below it). A real llama-server streams the reply."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractSlider

from gui.session import ClusterSession
from gui.widgets.chat_pane import ChatPane

pytestmark = pytest.mark.engine


@pytest.fixture
def session(bridge):
    s = ClusterSession(bridge)
    yield s
    s.close()


def _at_bottom(pane) -> bool:
    sb = pane.transcript.verticalScrollBar()
    return sb.maximum() > 0 and sb.value() >= sb.maximum() - 4


def test_long_reply_is_followed_until_the_user_scrolls_up(qtbot, session, llama_server):
    pane = ChatPane(session.chat_sender(llama_server))
    qtbot.addWidget(pane)
    pane.resize(420, 360)  # a small view: the reply runs far below it
    pane.show()
    qtbot.waitExposed(pane)
    pane.max_tokens.setValue(1500)
    pane.input.setPlainText("Tell me a long story")
    qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)
    sb = pane.transcript.verticalScrollBar()

    # while it streams, every thousand characters or so the view is at the newest text
    for chars in (1000, 2000, 3000):
        qtbot.waitUntil(lambda c=chars: len(pane.reply_text()) >= c or not pane.busy(), timeout=60000)
        assert pane.busy(), "the reply ended early"
        qtbot.waitUntil(lambda: _at_bottom(pane), timeout=1000)
        assert pane.busy(), "the view reached the newest text only when the reply had ended"
        # the view gets shorter, as when the failover banner takes room at the top of the
        # window (what happened after a recovery): it still follows
        pane.resize(pane.width(), pane.height() - 40)

    # the user scrolls up (a click above the scroll bar's handle): the view stays there
    sb.triggerAction(QAbstractSlider.SliderAction.SliderPageStepSub)
    sb.triggerAction(QAbstractSlider.SliderAction.SliderPageStepSub)
    assert not pane.following()
    held = sb.value()
    grown = len(pane.reply_text())
    qtbot.waitUntil(lambda: len(pane.reply_text()) > grown + 500 or not pane.busy(), timeout=30000)
    assert sb.value() == held and not _at_bottom(pane)

    # back at the bottom: followed again
    sb.triggerAction(QAbstractSlider.SliderAction.SliderToMaximum)
    assert pane.following()
    grown = len(pane.reply_text())
    if pane.busy():
        qtbot.waitUntil(lambda: len(pane.reply_text()) > grown + 200 or not pane.busy(), timeout=30000)
        qtbot.waitUntil(lambda: _at_bottom(pane), timeout=1000)
    qtbot.waitUntil(lambda: not pane.busy(), timeout=120000)
    qtbot.waitUntil(lambda: _at_bottom(pane), timeout=1000)  # the footer with the stats is in view
