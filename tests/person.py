"""What a person does with the window, for GUI tests: click, type into the dialogs that open.

Qt's modal dialogs (``QInputDialog.getText``, ``QFileDialog.getOpenFileName``…) run their own
event loop, so a click that opens one returns only when it closes. :func:`answer_dialog` arms a
timer before the click; the timer finds the dialog once it is shown and works its widgets (types
into its line edit, presses its buttons) the way a person would.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtWidgets import (QApplication, QDialog, QDialogButtonBox, QFileDialog, QInputDialog, QLineEdit,
                               QPushButton, QWidget)


class DialogNeverOpened(AssertionError):
    """The dialog a test waited for did not show up."""


def answer_dialog(qtbot, kind: type, act: Callable[[QDialog], None], timeout: float = 10.0) -> dict:
    """Arm a timer that waits for a visible modal ``kind`` dialog and calls ``act(dialog)``.

    Call it *before* the click that opens the dialog. Returns a dict whose ``"dialog"`` is the
    dialog once seen and ``"error"`` an exception raised inside ``act`` (re-raise it with
    :func:`check`)."""
    seen: dict = {}
    deadline = time.monotonic() + timeout
    revive_event_loops()

    def poll() -> None:
        # Every dialog the app asks with is modal. Asking for the modal one, rather than walking
        # every top-level widget, leaves alone the ones Qt makes and deletes by itself (tool
        # tips, the tray's balloon, menus being torn down), which the walk would wrap.
        dlg = QApplication.activeModalWidget()
        if not (isinstance(dlg, kind) and dlg.isVisible()):
            if time.monotonic() > deadline:
                seen["error"] = DialogNeverOpened(f"no {kind.__name__} opened within {timeout} s")
                # whatever modal dialog is open instead would block the test for ever
                if isinstance(dlg, QDialog):
                    dlg.reject()
                return
            QTimer.singleShot(20, poll)
            return
        seen["dialog"] = dlg
        try:
            act(dlg)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test by check()
            seen["error"] = exc
            dlg.reject()

    QTimer.singleShot(0, poll)
    return seen


def revive_event_loops() -> None:
    """Make sure a dialog's own event loop runs.

    A test that ran the app's main loop and quit it (``run_app`` in test_window.py) can leave a
    posted Quit behind (from closing the last window); handled later with no main loop
    running, it makes every nested loop — each modal dialog's — return at once. Running the
    main loop once more, for one turn, takes that state away (only when it is there: leaving
    the main loop tells pyqtgraph and others the app is about to quit)."""
    from PySide6.QtCore import QEventLoop

    app = QApplication.instance()
    QApplication.sendPostedEvents()
    probe = QEventLoop()
    QTimer.singleShot(0, probe.quit)
    if probe.exec() == -1:  # returned without running: nested loops are off
        # exit(), not quit(): quit() would close every window first
        QTimer.singleShot(0, lambda: app.exit(0))
        app.exec()


def check(seen: dict) -> QDialog:
    """Re-raise what went wrong inside :func:`answer_dialog`; return the dialog it answered."""
    if "error" in seen:
        raise seen["error"]
    assert "dialog" in seen, "the dialog did not open"
    return seen["dialog"]


def click(qtbot, widget: QWidget) -> None:
    """A left click in the middle of ``widget``."""
    qtbot.mouseClick(widget, Qt.MouseButton.LeftButton, pos=widget.rect().center())


def type_and_ok(qtbot, text: str) -> Callable[[QDialog], None]:
    """For :func:`answer_dialog`: type ``text`` into the dialog's line edit, then press OK."""
    def act(dlg: QDialog) -> None:
        edit = dlg.findChild(QLineEdit)
        edit.selectAll()
        qtbot.keyClicks(edit, text)
        ok_button(dlg).click()
    return act


def ok_button(dlg: QDialog) -> QPushButton:
    """The dialog's OK (accept) button."""
    box = dlg.findChild(QDialogButtonBox)
    for b in box.buttons():
        if box.buttonRole(b) == QDialogButtonBox.ButtonRole.AcceptRole:
            return b
    raise AssertionError("no OK button in the dialog")


def add_node_by_address(qtbot, win, address: str) -> None:
    """Nodes ▸ *Add by address…*, type ``address``, OK."""
    seen = answer_dialog(qtbot, QInputDialog, type_and_ok(qtbot, address))
    click(qtbot, win.nodes.add_button)
    check(seen)


def pair_by_card(qtbot, win, node_id: str, pin: str) -> QDialog:
    """The node card's *Pair…*, type ``pin`` into the PIN dialog, OK; returns the dialog."""
    from gui.widgets.nodes_panel import PinDialog

    seen = answer_dialog(qtbot, PinDialog, type_and_ok(qtbot, pin))
    click(qtbot, win.nodes.cards[node_id].pair_button)
    return check(seen)


def choose_file(qtbot, path: str) -> Callable[[QDialog], None]:
    """For :func:`answer_dialog` with ``QFileDialog``: type the file's name and press the
    dialog's Open / Save button. The dialog must already show the file's folder (the app's
    dialogs open in the current folder: tests change into it first)."""
    from pathlib import Path

    def act(dlg: QFileDialog) -> None:
        folder, name = Path(path).parent.resolve(), Path(path).name
        assert Path(dlg.directory().absolutePath()).resolve() == folder, dlg.directory().absolutePath()
        edit = dlg.findChild(QLineEdit, "fileNameEdit")
        # typed over the name shown, as a person does (clear() first leaves Save greyed out)
        edit.setFocus()
        edit.selectAll()
        qtbot.keyClicks(edit, name)
        button = ok_button(dlg)
        qtbot.waitUntil(button.isEnabled, timeout=5000)
        click(qtbot, button)
        qtbot.waitUntil(lambda: not dlg.isVisible(), timeout=5000)
    return act


def widget_center(widget: QWidget) -> QPoint:
    """The middle of ``widget`` in its own coordinates."""
    return widget.rect().center()


def use_menu(qtbot, win, action) -> None:
    """Click the menu bar item that holds ``action``, then the action in the menu that opens.

    A modal dialog the action opens must have been armed with :func:`answer_dialog` first."""
    from PySide6.QtWidgets import QMenu

    bar = win.menuBar()
    for top in bar.actions():
        menu = top.menu()
        if menu is not None and action in menu.actions():
            break
    else:
        raise AssertionError(f"{action.text()!r} is in no menu of the menu bar")
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.actionGeometry(top).center())
    qtbot.waitUntil(menu.isVisible, timeout=3000)
    assert isinstance(menu, QMenu)
    qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())
