"""Text that comes from outside the app, shown as text (#32, item 3).

Names and fields that other computers, hubs, profiles and model files choose — a node's name,
its CPU and GPU names, a hub's file names, a model's ``general.name``, a server's error — reach
labels, tool tips and message boxes. Qt shows a label's or a message box's text as rich text
when it *looks* like HTML (``Qt.TextFormat.AutoText``), and tool tips always so: a name such as
``<img src=/dev/zero>rogue`` then loads an "image" from ``/dev/zero`` until the app is killed,
and a ``<img src=file:///…>`` shows a local file. And one long word (a 5,000-character name)
makes a label, and the window around it, as wide as the word.

Every widget that shows such text uses this module:

* :class:`PlainLabel` — a word-wrapped label whose text is always plain, with long words cut;
* :func:`show_plain` — the same for a label made elsewhere (a dialog's own label);
* :func:`escaped` — outside text for a label that is rich text on purpose (a bold name);
* :func:`plain_tooltip` — a tool tip that shows its text literally;
* :func:`plain_message` — a message box with plain text.
"""

from __future__ import annotations

import html
import re

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMessageBox, QWidget

from gui.widgets.wrapping_label import WrappingLabel

#: The longest run of characters without a space shown whole: a model file's path fits, a
#: 5,000-character name does not — it is cut in its middle, so both its ends stay readable.
LONGEST_WORD = 80
#: The longest word where a file's path is shown on its own line.
PATH_WORD = 160
#: The longest word of a name (a node's, a model's) shown whole, where a name sits in a line.
NAME_WORD = 40
#: The most characters of outside text shown in one place (a message, a list of names).
MOST_CHARS = 2000

ELLIPSIS = "…"


def shortened(text: object, *, longest_word: int = LONGEST_WORD, most_chars: int = MOST_CHARS) -> str:
    """``text`` with every word longer than ``longest_word`` characters cut in its middle
    (``abc…xyz``) and the whole cut after ``most_chars`` characters."""
    text = "" if text is None else str(text)
    if len(text) > most_chars:
        text = text[:most_chars - 1] + ELLIPSIS
    keep = max(2, longest_word - 1)

    def cut(m: re.Match) -> str:
        word = m.group(0)
        return word[:keep - keep // 2] + ELLIPSIS + word[len(word) - keep // 2:]

    return re.sub(r"\S{%d,}" % (longest_word + 1), cut, text)


def escaped(text: object, **limits) -> str:
    """Outside text made safe to put into rich text: shortened, with ``<``, ``>`` and ``&``
    escaped and line breaks kept."""
    return html.escape(shortened(text, **limits)).replace("\n", "<br>")


def plain_tooltip(text: object) -> str:
    """A tool tip that shows ``text`` literally (Qt reads every tool tip as rich text when it
    looks like HTML); "" stays "" (no tool tip)."""
    text = "" if text is None else str(text)
    return f"<p style='white-space:pre-wrap'>{escaped(text)}</p>" if text else ""


def show_plain(label: QLabel, text: object, **limits) -> None:
    """Show outside ``text`` on ``label`` as plain text, long words shortened."""
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(shortened(text, **limits))


class PlainLabel(WrappingLabel):
    """A word-wrapped label for text that holds anything from outside: never rich text, and
    no word of it longer than ``longest_word`` characters (:data:`LONGEST_WORD`)."""

    def __init__(self, text: str = "", parent: QWidget | None = None, *, longest_word: int = LONGEST_WORD) -> None:
        super().__init__("", parent)
        self.longest_word = longest_word
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt override
        super().setText(shortened(text, longest_word=self.longest_word))


def plain_message(parent: QWidget | None, icon: QMessageBox.Icon, title: str, text: object) -> QMessageBox:
    """A modal message box whose text is outside text shown plainly; it is shown, and
    returned (closed) once the user closes it."""
    box = QMessageBox(icon, title, "", QMessageBox.StandardButton.Ok, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setText(shortened(text))
    box.exec()
    return box
