"""Text from outside is shown as text (#32, item 3): names and fields that other computers, hubs
and models choose never render as rich text, never widen a window past the screen, and a chat
reply loads no image and opens no link unasked.

Where old code would take the test process down (an ``<img src=/dev/zero>`` read until the
allocator gives up: std::bad_alloc, signal 6), the case runs in a child process and the test
reads its exit code; the other cases use a harmless image (a 200 px PNG in the test's folder),
which shows whether rich text was rendered by the height it takes.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import textwrap

import pytest
from PySide6.QtCore import QObject, QPoint, QTimer, Qt, QUrl, Slot
from PySide6.QtGui import QDesktopServices, QGuiApplication, QImage, QTextCursor
from PySide6.QtWidgets import QApplication, QLabel, QMessageBox

from agent.protocol import AgentStatus
from gui.cluster.chat.client import ChatDelta
from gui.cluster.nodes.records import Node
from gui.widgets.chat_pane import ChatPane
from gui.widgets.nodes_panel import NodesPanel, PinDialog
from gui.widgets.outside_text import shortened

ROGUE = "<img src=/dev/zero>rogue"
#: The child's address space: enough for Qt offscreen, far too little for reading /dev/zero.
CHILD_ADDRESS_SPACE = 3 << 30


@pytest.fixture
def big_png(tmp_path):
    """A 200×200 PNG: rendered as an image it makes a label or a line at least 200 px high."""
    path = tmp_path / "pixel.png"
    image = QImage(200, 200, QImage.Format.Format_RGB32)
    image.fill(0xFF0000)
    assert image.save(str(path))
    return path


def _run_child(script: str) -> subprocess.CompletedProcess:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_ADDRESS_SPACE, CHILD_ADDRESS_SPACE))

    # a generous timeout: the child takes a few seconds; the old code ran out of memory in ~10 s
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=180, preexec_fn=cap)


def _answer_modal_later(qapp, answer, seen: dict) -> QTimer:
    """Every 20 ms, look for a modal dialog; give the first one found to ``answer``."""
    timer = QTimer()
    timer.setInterval(20)

    def look() -> None:
        dialog = qapp.activeModalWidget()
        if dialog is not None and "dialog" not in seen:
            seen["dialog"] = dialog
            timer.stop()
            answer(dialog)

    timer.timeout.connect(look)
    timer.start()
    return timer


# --- the PIN window and the node card ------------------------------------------------------

def test_a_rogue_unpaired_nodes_name_shows_as_text_in_the_pin_window():
    """An unpaired host announced as ``<img src=/dev/zero>rogue``: Pair… opens the PIN window,
    which shows the name as typed, and the app lives (rc 134 before)."""
    done = _run_child(f"""
        import json
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QApplication, QLabel
        app = QApplication(["herd", "-platform", "offscreen"])
        from gui.cluster.nodes.records import Node
        from gui.widgets.nodes_panel import NodesPanel
        panel = NodesPanel()
        panel.show()
        panel.on_node_event("added", Node(id="rogue-id", name={ROGUE!r}, host="127.0.0.1", api_port=7001))
        seen = {{}}
        def look():
            dialog = app.activeModalWidget()
            if dialog is not None and not seen:
                seen["texts"] = [label.text() for label in dialog.findChildren(QLabel)]
                dialog.reject()
        timer = QTimer(interval=20, timeout=look)
        timer.start()
        panel.card("rogue-id").pair_button.click()
        print(json.dumps(seen))
    """)
    assert done.returncode == 0, f"the app died (rc {done.returncode}): {done.stderr[-1500:]}"
    texts = json.loads(done.stdout.strip().splitlines()[-1])["texts"]
    assert any(ROGUE in t for t in texts), texts


def test_a_name_of_5000_characters_keeps_the_card_and_the_pin_window_on_screen(qtbot, qapp):
    screen = QGuiApplication.primaryScreen().availableGeometry().width()
    name = "N" * 5000
    panel = NodesPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.on_node_event("added", Node(id="long-id", name=name, host="127.0.0.1", api_port=7001))
    card = panel.card("long-id")
    assert card.minimumSizeHint().width() <= screen
    dialog = PinDialog(name, panel)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert dialog.width() <= screen
    assert "NNNN…NNNN" in " ".join(label.text() for label in dialog.findChildren(QLabel))


def test_cpu_and_gpu_names_from_a_paired_nodes_status_show_as_text(qtbot, big_png):
    """What a paired node reports on /status goes on its card as written: no bold, no image.
    (A stand-in /status document: a real agent reports its real CPU, which cannot be named so.)"""
    img = f"<img src=file://{big_png}>"
    panel = NodesPanel()
    qtbot.addWidget(panel)
    panel.resize(500, 600)
    panel.show()
    panel.on_node_event("added", Node(id="n1", name="alpha", host="127.0.0.1", api_port=7001, paired=True))
    card = panel.card("n1")
    status = AgentStatus.from_json({
        "id": "n1", "name": "alpha",
        "hardware": {"cpu": f"<b>Evil</b> CPU {img}", "cpu_threads": 8, "ram_total_bytes": 8 << 30,
                     "nics": [{"name": f"wl<i>an</i>0{img}", "wifi": True, "loopback": False}]},
        "rpc": {"state": "ready", "devices": [{"name": f"<b>GPU</b>{img}", "total_bytes": 4 << 30,
                                               "free_bytes": 2 << 30}]},
    })
    card.show_status(status)
    qtbot.waitUntil(lambda: card.hardware.isVisible())
    hardware = card.hardware.text()
    assert "<b>Evil</b> CPU <img src=file://" in hardware and "<b>GPU</b><img src=file://" in hardware
    assert "wl<i>an</i>0" in card.warning.text()
    # shown as text: a line per entry, not a 200 px image
    lines = card.hardware.fontMetrics().lineSpacing()
    assert card.hardware.sizeHint().height() < 200 and card.warning.sizeHint().height() < 200, lines


# --- the chat pane -------------------------------------------------------------------------

class _Scripted:
    """A model's reply, given: the send function of the pane streams these pieces through the
    real bridge (a stand-in for a model: a real one cannot be made to write this reply)."""

    def __init__(self, bridge, text: str) -> None:
        self.bridge, self.text = bridge, text

    def __call__(self, messages, params):
        async def pieces():
            for part in self.text.split(" "):
                yield ChatDelta(part + " ")

        return self.bridge.stream(pieces, label="scripted reply")


def _reply(qtbot, bridge, text: str) -> ChatPane:
    pane = ChatPane(_Scripted(bridge, text))
    qtbot.addWidget(pane)
    pane.resize(600, 500)
    pane.show()
    with qtbot.waitSignal(pane.replyFinished, timeout=10000):
        assert pane.send_text("Show me something")
    return pane


def _images(pane: ChatPane) -> list[str]:
    doc = pane.transcript.document()
    found = []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isImageFormat():
                found.append(fmt.toImageFormat().name())
            it += 1
        block = block.next()
    return found


def test_a_reply_with_images_loads_none_and_shows_their_addresses_as_links(qtbot, bridge, big_png):
    local = f"file://{big_png}"
    remote = "http://127.0.0.1:9/x.png"
    pane = _reply(qtbot, bridge, f"Look: ![x]({local}) and ![y]({remote}) and <img src=\"{local}\"> done")
    assert _images(pane) == []
    assert "<img" not in pane.transcript.toHtml()
    text = pane.transcript.toPlainText()
    assert f"🖼 {local}" in text and f"🖼 {remote}" in text  # each image as a link to its address
    assert f'<img src="{local}">' in text  # raw HTML stays text
    hrefs = set()
    block = pane.transcript.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isAnchor():
                hrefs.add(fmt.anchorHref())
            it += 1
        block = block.next()
    assert {local, remote} <= hrefs


def test_a_reply_with_an_image_of_dev_zero_leaves_the_app_alive():
    """``![x](file:///dev/zero)`` aborted the app (std::bad_alloc) as the reply was rendered."""
    done = _run_child("""
        import json
        from PySide6.QtWidgets import QApplication
        app = QApplication(["herd", "-platform", "offscreen"])
        from PySide6.QtGui import QTextCursor
        from gui.widgets.chat_pane import ChatPane
        pane = ChatPane()
        pane.resize(600, 500)
        pane.show()
        pane.transcript.render_reply("A picture: ![x](file:///dev/zero) <img src=/dev/zero>")
        app.processEvents()
        print(json.dumps(pane.transcript.toPlainText()))
    """)
    assert done.returncode == 0, f"the app died (rc {done.returncode}): {done.stderr[-1500:]}"
    assert "🖼 file:///dev/zero" in json.loads(done.stdout.strip().splitlines()[-1])


class _Browser(QObject):
    """Where QDesktopServices sends https links in this test (Qt's own hook for URL handlers)."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[str] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.opened.append(url.toString())


def _click_link(qtbot, pane: ChatPane, text: str) -> None:
    doc = pane.transcript.document()
    at = doc.find(text)
    assert not at.isNull(), f"{text!r} is not in the transcript"
    cur = QTextCursor(doc)
    cur.setPosition(at.selectionStart() + 1)
    pane.transcript.ensureCursorVisible()
    point = pane.transcript.cursorRect(cur).center() + QPoint(1, 0)
    qtbot.mouseClick(pane.transcript.viewport(), Qt.MouseButton.LeftButton, pos=point)


@pytest.mark.parametrize("agree", [False, True])
def test_a_link_opens_only_after_its_address_was_shown_and_accepted(qtbot, qapp, bridge, agree):
    url = "https://example.invalid/a/very/long/path?q=" + "x" * 150
    pane = _reply(qtbot, bridge, f"See [the docs]({url}) please")
    browser = _Browser()
    QDesktopServices.setUrlHandler("https", browser, "open")
    try:
        seen: dict = {}

        def answer(box) -> None:
            seen["text"] = box.text().replace("\u200b", "")
            seen["format"] = box.textFormat()
            box.button(QMessageBox.StandardButton.Open if agree else QMessageBox.StandardButton.Cancel).click()

        timer = _answer_modal_later(qapp, answer, seen)
        _click_link(qtbot, pane, "the docs")
        qtbot.waitUntil(lambda: "text" in seen, timeout=5000)
        timer.stop()
        assert url in seen["text"] and seen["format"] == Qt.TextFormat.PlainText
        qtbot.waitUntil(lambda: QApplication.activeModalWidget() is None, timeout=5000)
        assert browser.opened == ([url] if agree else [])
    finally:
        QDesktopServices.unsetUrlHandler("https")


def test_a_link_to_a_local_file_is_never_opened(qtbot, qapp, bridge, tmp_path):
    browser = _Browser()
    QDesktopServices.setUrlHandler("file", browser, "open")
    target = f"file://{tmp_path}/run.sh"
    try:
        pane = _reply(qtbot, bridge, f"Run [this]({target}) now")
        seen: dict = {}

        def answer(box) -> None:
            seen["text"] = box.text().replace("\u200b", "")
            box.accept()

        timer = _answer_modal_later(qapp, answer, seen)
        _click_link(qtbot, pane, "this")
        qtbot.waitUntil(lambda: "text" in seen, timeout=5000)
        timer.stop()
        assert target in seen["text"] and "only web links" in seen["text"]
        assert browser.opened == []
    finally:
        QDesktopServices.unsetUrlHandler("file")


def test_shortened_cuts_long_words_in_the_middle_and_keeps_short_ones():
    assert shortened("a short name") == "a short name"
    cut = shortened("x" * 100 + "END and more", longest_word=20)
    assert cut.startswith("xxxxxxxxxx…") and cut.endswith("xEND and more") and len(cut.split()[0]) == 20
    assert len(shortened("y " * 5000)) <= 2000


@pytest.mark.parametrize("error", [ValueError("<b>Qwen</b> <img src=pixel.png>"),
                                   OSError("cluster <i>profile</i>.json: no such file")])
def test_a_profile_error_quoting_the_profile_shows_as_text(qtbot, make_window, error):
    """An import error may quote what the profile says (its model name, its path): the message box
    shows it plainly, as the review dialog does (#32)."""
    from person import answer_dialog, check

    win = make_window(browse=False)
    seen = []
    told = answer_dialog(qtbot, QMessageBox, lambda box: (seen.append((box.textFormat(), box.text())), box.accept()))
    win.profiles._unreadable(error)
    check(told)
    text_format, text = seen[0]
    assert text_format == Qt.TextFormat.PlainText
    assert str(error) in text
