"""Past chats beside the transcript: the list of kept conversations and what keeps them (#36).

* :class:`ChatHistoryList` shows the chats of a :class:`~gui.cluster.chat.history.ChatStore`
  — title (the first question), date, model — newest first, with a search box, and offers
  *Open* and, under *More* or a right click, *Rename*, *Delete* and *Export…* (Markdown or JSON).
* :class:`ChatKeeper` ties the chat pane to the store: it records the pane's conversation as it
  goes (a new chat from its first message), opens a past chat into the pane so that sending
  continues it, and starts a new chat when the open one is deleted.

The store follows the core's :class:`~gui.cluster.chat.conversation.Conversation`, not the
widgets, so what is kept is what the next request sends, marks of cut replies included.
"""

from __future__ import annotations

import sqlite3
import time

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gui.cluster.chat.history import ChatRecorder, ChatStore, HistoryError

ID_ROLE = Qt.ItemDataRole.UserRole
#: What can go wrong reading or writing the history; always shown in words.
STORE_ERRORS = (HistoryError, sqlite3.Error, OSError)


class ChatHistoryList(QWidget):
    """The list of past chats (see the module docstring).

    Signals:
        openRequested(int): the user wants this chat in the pane (double-click or *Open*).
        deleted(int): this chat was deleted.

    Attributes:
        store: the :class:`~gui.cluster.chat.history.ChatStore` shown.
        search: the search box (title and text of every message).
        tree: one row per chat: title (editable: *Rename*), date of its last message, model.
        message: what went wrong last, in words (hidden when nothing did).
    """

    openRequested = Signal(int)
    deleted = Signal(int)

    def __init__(self, store: ChatStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self._current: int | None = None
        self._filling = False
        self.search = QLineEdit()
        self.search.setPlaceholderText(self.tr("Search past chats"))
        self.search.setClearButtonEnabled(True)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels([self.tr("Past chats"), self.tr("Date"), self.tr("Model")])
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed)
        self.tree.header().setStretchLastSection(False)
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in (1, 2):
            self.tree.header().setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.open_button = QPushButton(self.tr("Open"))
        # Rename, Delete and Export… in a menu (and on a right click): four buttons in a row made
        # the chat pane, and so the window, wider than a small screen (#17)
        self.rename_action = QAction(self.tr("Rename"), self)
        self.delete_action = QAction(self.tr("Delete"), self)
        self.export_action = QAction(self.tr("Export…"), self)
        self.more_button = QToolButton()
        self.more_button.setText(self.tr("More"))
        self.more_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.more_button)
        menu.addActions(self._actions())
        self.more_button.setMenu(menu)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.tree.addActions(self._actions())
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.message.hide()
        buttons = QHBoxLayout()
        buttons.addWidget(self.search, 1)
        buttons.addWidget(self.open_button)
        buttons.addWidget(self.more_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(buttons)
        lay.addWidget(self.tree, 1)
        lay.addWidget(self.message)

        self.search.textChanged.connect(lambda _text: self.refresh())
        self.tree.itemDoubleClicked.connect(lambda item, _col: self.openRequested.emit(item.data(0, ID_ROLE)))
        self.tree.itemChanged.connect(self._on_renamed)
        self.tree.currentItemChanged.connect(lambda *_a: self._enable())
        self.open_button.clicked.connect(self._open_selected)
        self.rename_action.triggered.connect(self._rename_selected)
        self.delete_action.triggered.connect(lambda: self.delete_selected())
        self.export_action.triggered.connect(self._export_dialog)
        # The list is read again once control is back in the event loop, never from inside a
        # change: a rename arrives while the title's editor is still committing, and clearing the
        # rows under it there crashes Qt.
        self._stale = QTimer(self)
        self._stale.setSingleShot(True)
        self._stale.setInterval(0)
        self._stale.timeout.connect(self.refresh)
        unsubscribe = store.subscribe(lambda _chat_id: self._stale.start())
        self.destroyed.connect(lambda *_a: unsubscribe())
        self.refresh()

    # ----------------------------------------------------------------- API

    def refresh(self) -> None:
        """Read the list again (what the search box holds), keeping the selection."""
        selected = self.selected_id()
        try:
            chats = self.store.chats(self.search.text())
        except STORE_ERRORS as exc:
            self.show_error(self.in_words(exc))
            return
        self._filling = True
        try:
            self.tree.clear()
            for chat in chats:
                item = QTreeWidgetItem([chat.title, time.strftime("%Y-%m-%d %H:%M", time.localtime(chat.updated)),
                                        chat.model])
                item.setData(0, ID_ROLE, chat.id)
                item.setToolTip(0, chat.title)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                if chat.id == self._current:
                    font = item.font(0)
                    font.setBold(True)  # the chat the pane shows
                    item.setFont(0, font)
                self.tree.addTopLevelItem(item)
                if chat.id == selected:
                    self.tree.setCurrentItem(item)
        finally:
            self._filling = False
        self._enable()

    def titles(self) -> list[str]:
        """The titles listed, top to bottom."""
        return [self.tree.topLevelItem(i).text(0) for i in range(self.tree.topLevelItemCount())]

    def select(self, chat_id: int) -> bool:
        """Select the row of ``chat_id``; False when it is not listed."""
        item = self._item(chat_id)
        if item is not None:
            self.tree.setCurrentItem(item)
        return item is not None

    def selected_id(self) -> int | None:
        """The selected chat's id, or None."""
        item = self.tree.currentItem()
        return None if item is None else item.data(0, ID_ROLE)

    def set_current(self, chat_id: int | None) -> None:
        """Mark the chat the pane shows (bold)."""
        self._current = chat_id
        self._stale.start()

    def rename(self, chat_id: int, title: str) -> bool:
        """Give a chat another title; False (with the reason shown) when refused."""
        try:
            self.store.rename(chat_id, title)
        except STORE_ERRORS as exc:
            self.show_error(self.in_words(exc))
            self._stale.start()  # the old title back in the row
            return False
        self.message.hide()
        return True

    def delete_selected(self, confirm: bool = True) -> bool:
        """Delete the selected chat, after asking (``confirm``); True when it was deleted."""
        chat_id = self.selected_id()
        if chat_id is None:
            return False
        title = self.tree.currentItem().text(0)
        if confirm and QMessageBox.question(
                self, self.tr("Delete chat"),
                self.tr("Delete the chat “%1”? It cannot be brought back.").replace("%1", title)) \
                != QMessageBox.StandardButton.Yes:
            return False
        try:
            self.store.delete(chat_id)
        except STORE_ERRORS as exc:
            self.show_error(self.in_words(exc))
            return False
        self.deleted.emit(chat_id)
        return True

    def export_selected(self, path: str, fmt: str) -> bool:
        """Write the selected chat to ``path`` as ``markdown`` or ``json``; True when written."""
        chat_id = self.selected_id()
        if chat_id is None:
            return False
        try:
            self.store.export(chat_id, path, fmt)
        except STORE_ERRORS as exc:
            self.show_error(self.tr("Could not export the chat: %1").replace("%1", str(exc)))
            return False
        self.message.hide()
        return True

    def in_words(self, exc: Exception) -> str:
        """What went wrong with the history, said for the user: the store's own words, or the
        database's message with what to check."""
        if isinstance(exc, HistoryError):
            return str(exc)
        return self.tr("Could not read or write the chat history (%1); check the disk and the "
                       "permissions of its folder.").replace("%1", str(exc))

    def show_error(self, text: str) -> None:
        """Say under the list what went wrong."""
        self.message.setText(text)
        self.message.show()

    # ------------------------------------------------------------ internals

    def _item(self, chat_id: int) -> QTreeWidgetItem | None:
        for i in range(self.tree.topLevelItemCount()):
            if self.tree.topLevelItem(i).data(0, ID_ROLE) == chat_id:
                return self.tree.topLevelItem(i)
        return None

    def _enable(self) -> None:
        chosen = self.tree.currentItem() is not None
        for widget in (self.open_button, self.more_button, *self._actions()):
            widget.setEnabled(chosen)

    def _actions(self) -> list[QAction]:
        return [self.rename_action, self.delete_action, self.export_action]

    def _open_selected(self) -> None:
        chat_id = self.selected_id()
        if chat_id is not None:
            self.openRequested.emit(chat_id)

    def _rename_selected(self) -> None:
        item = self.tree.currentItem()
        if item is not None:
            self.tree.editItem(item, 0)

    def _on_renamed(self, item: QTreeWidgetItem, column: int) -> None:
        if self._filling or column != 0:
            return
        self.rename(item.data(0, ID_ROLE), item.text(0))

    def _export_dialog(self) -> None:
        if self.selected_id() is None:
            return
        markdown, json_filter = self.tr("Markdown (*.md)"), self.tr("JSON (*.json)")
        name = "".join(c if c.isalnum() or c in " -_" else "_" for c in self.tree.currentItem().text(0))
        path, chosen = QFileDialog.getSaveFileName(self, self.tr("Export chat"), (name.strip() or "chat") + ".md",
                                                   f"{markdown};;{json_filter}")
        if path:
            fmt = "json" if chosen == json_filter or path.lower().endswith(".json") else "markdown"
            self.export_selected(path, fmt)


class ChatKeeper(QObject):
    """Keeps the chat pane's conversations in a store (see the module docstring).

    Attributes:
        store: the :class:`~gui.cluster.chat.history.ChatStore`.
        chats: the :class:`ChatHistoryList` the pane shows.
        recorder: what saves the conversation shown now.
    """

    # ``pane`` is the ChatPane that creates this keeper (not imported here: the pane imports this
    # module, and the widgets import one another one way only, #33)
    def __init__(self, pane: QWidget, store: ChatStore) -> None:
        super().__init__(pane)
        self.pane = pane
        self.store = store
        self.chats = ChatHistoryList(store)
        self.recorder: ChatRecorder | None = None
        self.chats.openRequested.connect(self.open_chat)
        self.chats.deleted.connect(self._on_deleted)
        pane.busyChanged.connect(lambda busy: self.chats.open_button.setEnabled(
            not busy and self.chats.selected_id() is not None))
        if store.set_aside_to is not None:
            self.chats.show_error(self.tr("The chat history could not be read; it was moved to %1 and a "
                                          "new one started.").replace("%1", str(store.set_aside_to)))
        self.follow()

    def above(self, transcript: QWidget) -> QSplitter:
        """The list of past chats above ``transcript``, the line between them draggable."""
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.chats)
        split.addWidget(transcript)
        split.setSizes([120, 400])
        return split

    @property
    def chat_id(self) -> int | None:
        """The kept chat the pane shows (None: a new chat not saved yet)."""
        return None if self.recorder is None else self.recorder.chat_id

    def follow(self, chat_id: int | None = None) -> None:
        """Keep the pane's conversation from now on, as chat ``chat_id`` (None: a new chat,
        saved from its first message)."""
        self.let_go()
        self.recorder = self.store.record(self.pane.conversation, chat_id, details=self._details,
                                          failed=self.pane.status.setText)
        self.chats.set_current(chat_id)

    def let_go(self) -> None:
        """Stop keeping the conversation shown (what arrived is written first)."""
        if self.recorder is not None:
            if self.pane.conversation.streaming is not None:  # a new chat or another opened mid-reply
                self.pane.conversation.interrupt("stopped")
            self.recorder.close()
            self.recorder = None

    def open_chat(self, chat_id: int) -> bool:
        """Show a past chat in the pane; what is sent next continues it. Not while a reply
        arrives (False, and the pane says so)."""
        if self.pane.busy():
            self.pane.status.setText(self.tr("Stop the reply first, then open the other chat."))
            return False
        try:
            summary, kept = self.store.chat(chat_id), self.store.load(chat_id)
        except STORE_ERRORS as exc:
            self.chats.show_error(self.chats.in_words(exc))
            return False
        self.let_go()
        self.pane.new_chat()
        # (as it was kept: nothing to save; the pane draws it, #33)
        self.pane.conversation.open(kept.messages)
        if summary.system:
            self.pane.system_edit.setText(summary.system)  # continuing sends what it was sent with
        self.follow(chat_id)
        return True

    def _details(self) -> tuple[str, str]:
        return self.pane.serving_model(), self.pane.system_edit.text()

    def _on_deleted(self, chat_id: int) -> None:
        if chat_id == self.chat_id:  # the chat on screen is gone: the pane starts afresh
            self.recorder.close(write=False)
            self.recorder = None
            self.pane.new_chat()
