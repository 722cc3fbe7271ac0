"""The chat transcript: a model's reply rendered as Markdown, with nothing loaded and no link
opened behind the user's back (#32, item 3).

A reply is outside text: the model writes whatever its prompt (or a document pasted into it)
led it to. Rendered as Qt renders Markdown, ``![x](file:///….png)`` or ``<img src=…>`` showed a
local image, ``![x](file:///dev/zero)`` read ``/dev/zero`` until the app was killed, and links
opened on a click with no look at their target. Here:

* :func:`insert_reply_markdown` renders Markdown without raw HTML (an ``<img …>`` stays text),
  and turns every image into a link whose text is the image's address;
* :class:`Transcript` loads no resource at all (no file, no network), and a link click first
  shows the full address and asks; only web links (``http``, ``https``) are opened.

The transcript is also where a conversation is drawn (#33): a block per message, the reply being
streamed, a footer with each reply's stats, grey notes, code blocks shaded, and the view following
the newest text until the user scrolls up. Fast local models produce hundreds of tokens per
second. Re-rendering the document per token would freeze the window, so text that arrives is
buffered and appended once per frame (a 16 ms timer) as plain text at the end of the reply; only
when the reply ends is it rendered once as Markdown (code blocks included) in place of the plain
text.
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QDesktopServices,
    QFont,
    QImage,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextOption,
)
from PySide6.QtWidgets import QMessageBox, QTextBrowser, QWidget

from gui.cluster.chat.chat_state import ReplyStats
from gui.cluster.chat.conversation import Message
from gui.cluster.chat.history import resumed
from gui.widgets.outside_text import shortened

#: How often streamed text is put on screen: once a frame.
FRAME_MS = 16
#: Notes and footers: grey, not part of the conversation.
NOTE_COLOR = "#808080"

#: Schemes a click may open (after asking): web pages. A ``file:`` or a custom scheme in a
#: reply could start a program on this computer.
OPENABLE_SCHEMES = ("http", "https")
#: A long address is broken after this many characters so the question fits the screen.
URL_LINE = 64
_BREAK = "\u200b"  # a zero-width space: a place to wrap, invisible
_BLANK_PIXEL = QImage(1, 1, QImage.Format.Format_ARGB32)
_BLANK_PIXEL.fill(0)


def insert_reply_markdown(cursor: QTextCursor, text: str) -> None:
    """Insert ``text`` as Markdown at ``cursor``: GitHub's dialect without raw HTML, and every
    image replaced by a link to its address (``🖼 file:///…``), so nothing is loaded."""
    start = cursor.position()
    features = QTextDocument.MarkdownFeature(QTextDocument.MarkdownFeature.MarkdownDialectGitHub.value
                                             | QTextDocument.MarkdownFeature.MarkdownNoHTML.value)
    cursor.insertMarkdown(text, features)
    _images_to_links(cursor.document(), start, cursor.position())


def _images_to_links(doc: QTextDocument, start: int, end: int) -> None:
    """Replace each image between ``start`` and ``end`` by a link text naming its address."""
    images: list[tuple[int, str]] = []
    block = doc.findBlock(start)
    while block.isValid() and block.position() <= end:
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            if frag.isValid() and frag.charFormat().isImageFormat() and start <= frag.position() < end:
                images.extend((frag.position() + i, frag.charFormat().toImageFormat().name())
                              for i in range(frag.length()))
            it += 1
        block = block.next()
    for position, address in reversed(images):  # from the end: earlier positions stay valid
        cur = QTextCursor(doc)
        cur.setPosition(position)
        cur.setPosition(position + 1, QTextCursor.MoveMode.KeepAnchor)
        link = QTextCharFormat()
        link.setAnchor(True)
        link.setAnchorHref(address)
        link.setFontUnderline(True)
        cur.insertText("🖼 " + shortened(address), link)


def _breakable(url: str) -> str:
    return _BREAK.join(url[i:i + URL_LINE] for i in range(0, len(url), URL_LINE))


class Transcript(QTextBrowser):
    """A read-only rich-text view of a conversation that loads nothing and opens a link only
    when the user, shown its full address, says so (:meth:`ask_to_open`, on QTextBrowser's
    ``anchorClicked``). It draws the conversation (see the module docstring).

    Signals:
        textShown(): streamed text was put on screen (once a frame at most).
    """

    textShown = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenExternalLinks(False)
        self.setOpenLinks(False)  # a click never navigates the view either
        self.anchorClicked.connect(self.ask_to_open)
        self.setUndoRedoEnabled(False)  # no undo history growing with every token
        # a 30k-character paste without spaces wraps too, instead of one endless line
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self._reply_start = 0  # where the reply being streamed (or the last one) begins
        self._streamed: list[str] = []  # its text so far
        self._pending: list[str] = []  # its text not on screen yet
        self._flush = QTimer(self)
        self._flush.setInterval(FRAME_MS)
        self._flush.timeout.connect(self._flush_pending)
        # Follow the reply until the user scrolls up, and again once they scroll back down. The
        # document is laid out lazily, so "at the bottom" measured after inserting text once
        # lagged behind a fast reply and the view stopped following it (#17).
        self._follow = True
        self._scrolling = False
        sb = self.verticalScrollBar()
        sb.valueChanged.connect(self._on_scrolled)
        sb.rangeChanged.connect(lambda _lo, _hi: self._follow and self._to_bottom())

    # ------------------------------------------------------------- drawing

    def add_message(self, role: str, text: str) -> None:
        """A message's block: who says it in bold, then (for the user) what they said."""
        cur = self.textCursor()
        cur.movePosition(QTextCursor.MoveOperation.End)
        if not self.document().isEmpty():
            cur.insertBlock()
        head = QTextCharFormat()
        head.setFontWeight(QFont.Weight.Bold)
        cur.insertText(self.tr("You") if role == "user" else self.tr("Assistant"), head)
        cur.insertBlock(QTextBlockFormat(), QTextCharFormat())
        if role == "user":
            cur.insertText(text, QTextCharFormat())
        self.setTextCursor(cur)

    def add_note(self, text: str) -> None:
        """A grey line (not part of the conversation)."""
        cur = self._end()
        fmt = QTextCharFormat()
        fmt.setForeground(QColor(NOTE_COLOR))
        if not self.document().isEmpty():
            cur.insertBlock(QTextBlockFormat(), fmt)
        cur.insertText(text, fmt)

    def begin_reply(self) -> None:
        """The assistant's block for a reply about to stream; the view follows it."""
        self._follow = True  # a new question: show its answer
        self.add_message("assistant", "")
        self._reply_start = self._end().position()
        self._streamed, self._pending = [], []
        self._flush.start()

    def stream_text(self, text: str) -> None:
        """Text of the streaming reply arrived: it is shown with the next frame."""
        self._streamed.append(text)
        self._pending.append(text)

    def end_reply(self) -> None:
        """The streamed reply ended: its text is shown as Markdown."""
        if not self._flush.isActive():
            return
        self._flush.stop()
        self._flush_pending()
        self.render_reply("".join(self._streamed))

    def render_reply(self, text: str) -> None:
        """Replace the reply's text (from where it began to the end) by its Markdown rendering,
        once per reply."""
        cur = QTextCursor(self.document())
        cur.setPosition(self._reply_start)
        cur.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cur.removeSelectedText()
        if text:
            insert_reply_markdown(cur, text)  # no raw HTML, images as links (#32)
            self._shade_code_blocks(self._reply_start, cur.position())

    def add_footer(self, st: ReplyStats, stopped: bool, error: str | None) -> None:
        """A small grey line under a reply: its tokens, speed, time to the first token, and
        whether it was stopped or failed."""
        parts = [self.tr("%1 tokens").replace("%1", str(st.pieces))]
        tps = st.server_tps or st.seen_tps()
        if tps:
            parts.append(self.tr("%1 tok/s").replace("%1", f"{tps:.1f}"))
        if st.ttft_ms() is not None:
            parts.append(self.tr("first token after %1 ms").replace("%1", f"{st.ttft_ms():.0f}"))
        if stopped:
            parts.append(self.tr("stopped"))
        if error:
            parts.append(self.tr("failed: %1").replace("%1", error))
        fmt = QTextCharFormat()
        fmt.setForeground(QColor(NOTE_COLOR))
        small = QFont(self.font())
        small.setPointSizeF(max(6.0, small.pointSizeF() * 0.85))
        fmt.setFont(small)
        cur = self._end()
        cur.insertBlock(QTextBlockFormat(), fmt)
        cur.insertText(" · ".join(parts), fmt)
        if self._follow:
            self._to_bottom()

    def show_conversation(self, messages: list[Message]) -> None:
        """Draw a whole conversation again (a past chat opened): each reply as Markdown, a cut
        reply with why, a reply asked again after one marked so."""
        self.clear()
        for i, m in enumerate(messages):
            if m.role == "system":
                continue
            if resumed(messages, i):
                self.add_note(self.tr("Asked again after the interrupted reply above."))
            self.add_message(m.role, m.content)
            if m.role == "assistant":
                self._reply_start = self._end().position()
                self.render_reply(m.content)
            if m.interrupted:
                self.add_note(self.tr("Interrupted: %1").replace("%1", m.note or self.tr("no reason given")))
        self._to_bottom()

    def clear(self) -> None:
        """Empty the view (a streaming reply's text not shown yet is dropped with it)."""
        self._flush.stop()
        self._streamed, self._pending = [], []
        self._reply_start = 0
        super().clear()

    def following(self) -> bool:
        """Whether the view follows the end of the conversation (False after the user scrolled up)."""
        return self._follow

    # ------------------------------------------------------------ internals

    def _end(self) -> QTextCursor:
        cur = QTextCursor(self.document())
        cur.movePosition(QTextCursor.MoveOperation.End)
        return cur

    def _flush_pending(self) -> None:
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        self._end().insertText(text, QTextCharFormat())
        if self._follow:
            self._to_bottom()
        self.textShown.emit()

    def _shade_code_blocks(self, start: int, end: int) -> None:
        shade = self.palette().alternateBase().color()
        block = self.document().findBlock(start)
        while block.isValid() and block.position() <= end:
            fmt = block.blockFormat()
            if fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.nonBreakableLines():
                fmt.setBackground(shade)
                QTextCursor(block).setBlockFormat(fmt)
            block = block.next()

    def _to_bottom(self) -> None:
        sb = self.verticalScrollBar()
        self._scrolling = True
        try:
            sb.setValue(sb.maximum())
        finally:
            self._scrolling = False

    def _on_scrolled(self, value: int) -> None:
        if self._scrolling:
            return
        # the user moved the view: follow again only once it is back at the bottom
        self._follow = value >= self.verticalScrollBar().maximum() - 4

    def loadResource(self, kind: int, url: QUrl):  # noqa: N802 - Qt override
        """Nothing from a file or the network: an image is an empty pixel, anything else empty
        (#32). Not None: given nothing, QTextDocument reads a local file itself."""
        if kind == QTextDocument.ResourceType.ImageResource.value:
            return _BLANK_PIXEL
        return QByteArray()

    def ask_to_open(self, url: QUrl) -> bool:
        """Show ``url`` in full and open it in the browser if the user agrees (web links only);
        True when it was opened."""
        address = url.toString()
        if url.scheme().lower() not in OPENABLE_SCHEMES:
            box = QMessageBox(QMessageBox.Icon.Information, self.tr("Open link"),
                              self.tr("herd opens only web links (http, https) from a chat. This link "
                                      "goes to:\n\n%1").replace("%1", _breakable(address)),
                              QMessageBox.StandardButton.Ok, self)
            box.setTextFormat(Qt.TextFormat.PlainText)
            box.exec()
            return False
        box = QMessageBox(QMessageBox.Icon.Question, self.tr("Open link"),
                          self.tr("Open this address in your browser?\n\n%1").replace("%1", _breakable(address)),
                          QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Cancel, self)
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        if box.exec() != QMessageBox.StandardButton.Open:
            return False
        return QDesktopServices.openUrl(url)
