"""Adding and pairing nodes, with the mistakes people make: the errors are sentences with what to
do, a success replaces them, and they never move the cards under the mouse (#17).

Real agents on loopback, the real *Add by address…* and *Pair…* dialogs typed into.
"""

from __future__ import annotations

import socket

import pytest
from PySide6.QtCore import QEvent, QPoint, Qt
from PySide6.QtWidgets import QApplication

from conftest import free_port
from gui.widgets.nodes_panel import PinDialog
from person import add_node_by_address, answer_dialog, check, click

pytestmark = pytest.mark.engine


def _card_of(win, agent):
    for nid, n in win.node_map.items():
        if f"{n.host}:{n.api_port}" == agent.address:
            return nid, win.nodes.cards[nid]
    return None, None


def _where(widget, win) -> QPoint:
    """Where ``widget`` is in the window once the layouts asked for so far are done (a new card's
    wrapping labels settle over a few layout passes: measured earlier, the card would seem to move)."""
    for _ in range(10):
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        QApplication.processEvents()
    return widget.mapTo(win, QPoint(0, 0))


def test_add_and_pair_errors_in_words(qtbot, make_window, agents, monkeypatch):
    win = make_window(browse=False)
    a, b = agents.agents
    add_node_by_address(qtbot, win, a.address)
    qtbot.waitUntil(lambda: _card_of(win, a)[1] is not None, timeout=20000)
    nid, card = _card_of(win, a)
    qtbot.waitUntil(lambda: win.nodes.message.text() == "Added demo-a.", timeout=5000)
    assert not win.nodes.message.styleSheet()  # a confirmation, not in the error colour
    button_at = _where(card.pair_button, win)

    # nothing listens on that port
    add_node_by_address(qtbot, win, f"127.0.0.1:{free_port()}")
    qtbot.waitUntil(lambda: "Could not add" in win.nodes.message.text(), timeout=10000)
    text = win.nodes.message.text()
    assert "Nothing answers at that address" in text and "ConnectError" not in text, text
    assert "d62728" in win.nodes.message.styleSheet()
    assert _where(card.pair_button, win) == button_at  # the error did not move the card

    # a name nobody knows. Stand-in: resolving it would ask this machine's DNS server, which a
    # test must not reach; the resolver answers as glibc does for an unknown name.
    real = socket.getaddrinfo

    def resolve(host, *args, **kwargs):
        if host == "gaming-pc":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    add_node_by_address(qtbot, win, "gaming-pc")
    qtbot.waitUntil(lambda: "No computer of that name" in win.nodes.message.text(), timeout=10000)
    assert "Errno" not in win.nodes.message.text()

    # the PIN field takes digits (and the space herd-agent shows) only; OK waits for all ten
    def wrong_then_ok(dlg: PinDialog) -> None:
        qtbot.keyClicks(dlg.edit, "12ab34")
        assert dlg.edit.text() == "1234"
        assert not dlg.ok_button.isEnabled() and "4 typed" in dlg.hint.text()
        qtbot.keyClick(dlg.edit, Qt.Key.Key_Return)  # Enter does not send a short PIN either
        assert dlg.isVisible()
        qtbot.keyClicks(dlg.edit, "9 99999")
        assert dlg.ok_button.isEnabled() and dlg.pin() == "1234999999"
        if dlg.pin() == a.pin:  # (one chance in 10^10; then make it wrong another way)
            dlg.edit.setText("0" * 10 if a.pin != "0" * 10 else "1" * 10)
        click(qtbot, dlg.ok_button)

    seen = answer_dialog(qtbot, PinDialog, wrong_then_ok)
    click(qtbot, card.pair_button)
    check(seen)
    qtbot.waitUntil(lambda: "Pairing with demo-a failed" in win.nodes.message.text(), timeout=10000)
    # only that the PIN was wrong and what to do: no address, no HTTP status
    words = win.nodes.message.text()
    assert "wrong PIN" in words and "herd-agent pin" in words, words
    assert "HTTP" not in words and "://" not in words and "127.0.0.1" not in words, words
    assert _where(card.pair_button, win) == button_at

    def right(dlg: PinDialog) -> None:
        qtbot.keyClicks(dlg.edit, a.pin)
        click(qtbot, dlg.ok_button)

    seen = answer_dialog(qtbot, PinDialog, right)
    click(qtbot, card.pair_button)
    check(seen)
    # the success says so, and the earlier error is gone
    qtbot.waitUntil(lambda: win.nodes.message.text() == "Paired with demo-a.", timeout=10000)
    assert not win.nodes.message.styleSheet()
    qtbot.waitUntil(lambda: win.node_map[nid].paired, timeout=5000)


def test_a_remembered_node_that_does_not_answer_is_said_in_words(qtbot, make_window):
    address = f"127.0.0.1:{free_port()}"
    win = make_window(browse=False, **{"nodes/addresses": [address]})
    qtbot.waitUntil(lambda: "Remembered nodes that did not answer" in win.nodes.message.text(), timeout=15000)
    text = win.nodes.message.text()
    assert address in text and "Nothing answers at that address" in text and "ConnectError" not in text, text


def test_a_port_error_goes_when_the_person_types_again_or_an_add_succeeds(qtbot, make_window, agents):
    from PySide6.QtWidgets import QInputDialog, QLineEdit

    win = make_window(browse=False)
    a = agents.agents[0]
    add_node_by_address(qtbot, win, "127.0.0.1:port")
    qtbot.waitUntil(lambda: "the port must be a number" in win.nodes.message.text(), timeout=5000)

    # Add by address… again: the old error goes as soon as something new is typed
    seen_error = {}

    def retype(dlg: QInputDialog) -> None:
        edit = dlg.findChild(QLineEdit)
        edit.selectAll()
        seen_error["before"] = win.nodes.message.isVisible()
        qtbot.keyClicks(edit, "1")
        seen_error["after"] = win.nodes.message.isVisible()
        dlg.reject()

    seen = answer_dialog(qtbot, QInputDialog, retype)
    click(qtbot, win.nodes.add_button)
    check(seen)
    assert seen_error == {"before": True, "after": False}

    # the error again, then a good address: the error goes and the add is confirmed
    add_node_by_address(qtbot, win, "127.0.0.1:99999")
    qtbot.waitUntil(lambda: "the port must be a number" in win.nodes.message.text(), timeout=5000)
    add_node_by_address(qtbot, win, a.address)
    assert "the port must be a number" not in win.nodes.message.text()
    qtbot.waitUntil(lambda: win.nodes.message.text() == "Added demo-a.", timeout=20000)
