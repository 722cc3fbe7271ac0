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
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray, Qt, QUrl
from PySide6.QtGui import QDesktopServices, QImage, QTextCharFormat, QTextCursor, QTextDocument
from PySide6.QtWidgets import QMessageBox, QTextBrowser, QWidget

from gui.widgets.outside_text import shortened

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
    ``anchorClicked``)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenExternalLinks(False)
        self.setOpenLinks(False)  # a click never navigates the view either
        self.anchorClicked.connect(self.ask_to_open)

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
