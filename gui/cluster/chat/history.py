"""Conversations kept: every chat saved as it goes, in one SQLite database (#36).

The household's chats live in ``chats.sqlite3`` in herd's data folder (:func:`default_path`),
written with the standard library's ``sqlite3`` in WAL mode. Every change is one transaction,
so a ``kill -9`` of the app (or a power cut) leaves a database that opens cleanly with every
change committed before it.

* :class:`ChatStore` is the database: the list of past chats (:meth:`ChatStore.chats`, newest
  first, with a search), one chat's messages (:meth:`ChatStore.load`), rename, delete, and export
  of one chat as Markdown or JSON (written atomically).
* :class:`ChatRecorder` follows one :class:`~gui.cluster.chat.conversation.Conversation` through
  its ``subscribe`` — the model, not a widget — and saves it as it changes: the chat is created
  from its first message (titled by the first question), every new message is written at once,
  and a reply that streams is written at most every :data:`SAVE_EVERY_SECONDS` or
  :data:`SAVE_EVERY_PIECES` pieces of text, and when it ends. So a kill mid-reply loses at most
  that window of the reply; the reply comes back marked interrupted (``state`` streaming is read
  back as interrupted, see :meth:`~gui.cluster.chat.conversation.Message.from_json`).

Replies cut by failover keep their marks: a message's ``state`` and ``note`` are stored as they
are, and a reply asked again after an interrupted one follows it (:func:`resumed`).

Search is ``LIKE`` over titles and message text rather than FTS5: FTS5's word tokenizers do not
split Chinese text into words, and its trigram tokenizer cannot find words shorter than three
characters (most Chinese words are two); a household's chats are small enough to scan.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.engine_lookup import data_dir
from agent.files import set_aside, write_atomic, write_json_atomic
from agent.i18n import translate
from gui.cluster.chat.conversation import INTERRUPTED, STREAMING, Conversation, Message

#: The database's schema version (``PRAGMA user_version``); 0 is a new, empty file.
SCHEMA_VERSION = 1
#: A streaming reply is written at least this often …
SAVE_EVERY_SECONDS = 0.5
#: … or after this many pieces of text (llama-server streams about one token per piece).
SAVE_EVERY_PIECES = 32
#: Titles are the first question, cut to this many characters.
TITLE_LENGTH = 60
EXPORT_FORMATS = ("markdown", "json")

_SCHEMA = """
CREATE TABLE chats (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    model TEXT NOT NULL DEFAULT '',
    system TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX chats_by_update ON chats (updated DESC);
CREATE TABLE messages (
    chat_id INTEGER NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    state TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    finish_reason TEXT,
    created REAL NOT NULL,
    left_out INTEGER NOT NULL DEFAULT 0,
    resumed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (chat_id, position)
);
"""


class HistoryError(RuntimeError):
    """The chat history cannot do what was asked; the message says why in words."""


def default_path() -> Path:
    """Where the app keeps its chats: ``chats.sqlite3`` in herd's data folder."""
    return data_dir() / "chats.sqlite3"


def open_default() -> tuple[ChatStore | None, str]:
    """The app's chat history (:func:`default_path`), or None and why not in words (a newer
    herd's file, a folder in the way): the app then chats without keeping."""
    try:
        return ChatStore(default_path()), ""
    except (HistoryError, OSError) as exc:
        return None, str(exc)


def title_from(text: str) -> str:
    """A chat's title from its first question: the first line, cut to :data:`TITLE_LENGTH`."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= TITLE_LENGTH else line[:TITLE_LENGTH - 1].rstrip() + "…"


def resumed(messages: list[Message], index: int) -> bool:
    """Whether the reply at ``index`` was asked again after the interrupted reply before it."""
    return (0 < index < len(messages) and messages[index].role == "assistant"
            and messages[index - 1].role == "assistant" and messages[index - 1].state == INTERRUPTED)


@dataclass(frozen=True)
class ChatSummary:
    """One past chat as the list shows it.

    Attributes:
        id: its key in the database.
        title: the first question (or what the user renamed it to).
        model: the model that answered last (a file name; empty when not known).
        system: the system prompt it was sent with.
        created: UNIX time of its first message.
        updated: UNIX time of its last change.
        messages: how many messages it holds.
    """

    id: int
    title: str
    model: str
    system: str
    created: float
    updated: float
    messages: int


class ChatStore:
    """The chat database (see the module docstring).

    The file is created (owner-only: chats are private) only when the first chat is saved, so
    just looking at an empty list writes nothing. A file that is not a chat database is set
    aside as ``<name>.corrupt-<timestamp>`` and a new one started; :attr:`set_aside_to` says where.
    One store is used from one thread (the GUI's).

    Attributes:
        path: the database file.
        set_aside_to: where an unreadable database was moved, or None.

    ``subscribe(callback)`` registers ``callback(chat_id)``, called when a chat is created,
    renamed, deleted, or given a new question (the list's order changes).
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.set_aside_to: Path | None = None
        self._db: sqlite3.Connection | None = None
        self._subs: list[Callable[[int], None]] = []
        if self.path.exists():
            self._open()

    # --- the file -----------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))  # WAL files copy this mode
        try:
            self._db = self._connect()
        except sqlite3.OperationalError as exc:  # locked, unreadable: the file may be fine, keep it
            raise HistoryError(translate("ChatHistory", "Cannot open the chat history {path} ({why}); "
                                         "check that no other program holds it and that the folder "
                                         "can be written.").format(path=self.path, why=exc)) from exc
        except sqlite3.DatabaseError:  # not a database, or a damaged one
            for suffix in ("-wal", "-shm"):  # belong to the bad file; a new one starts without them
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            self.set_aside_to = set_aside(self.path)
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            self._db = self._connect()
        return self._db

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, timeout=5.0)
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise HistoryError(translate("ChatHistory", "The chat history {path} was written by a "
                                             "newer herd (schema {found}, this one reads {known}); "
                                             "update herd to open it.")
                                   .format(path=self.path, found=version, known=SCHEMA_VERSION))
            db.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: a killed app loses nothing committed; only a power cut may lose the
            # last commits, and the file stays consistent either way.
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            if version == 0:  # a new file: the schema and its version in one transaction
                db.executescript("BEGIN;" + _SCHEMA + f"PRAGMA user_version={SCHEMA_VERSION};COMMIT;")
        except BaseException:
            db.close()
            raise
        return db

    def close(self) -> None:
        """Close the database (folding the WAL back into the file)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def subscribe(self, callback: Callable[[int], None]) -> Callable[[], None]:
        """Call ``callback(chat_id)`` when the list of chats changes; returns the unsubscribe."""
        self._subs.append(callback)
        return lambda: self._subs.remove(callback) if callback in self._subs else None

    def _changed(self, chat_id: int) -> None:
        for cb in list(self._subs):
            cb(chat_id)

    # --- writing ------------------------------------------------------------------------------

    def new_chat(self, title: str, *, model: str = "", system: str = "", created: float | None = None) -> int:
        """Add an empty chat; returns its id."""
        now = time.time() if created is None else created
        db = self._open()
        with _transaction(db):
            cur = db.execute("INSERT INTO chats (title, model, system, created, updated) VALUES (?, ?, ?, ?, ?)",
                             (title, model, system, now, now))
        self._changed(cur.lastrowid)
        return cur.lastrowid

    def save_message(self, chat_id: int, position: int, message: Message) -> None:
        """Write (or overwrite) the message at ``position`` of a chat, in one transaction."""
        db = self._open()
        with _transaction(db):
            db.execute("INSERT OR REPLACE INTO messages (chat_id, position, role, content, state, note, "
                       "finish_reason, created, left_out, resumed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (chat_id, position, message.role, message.content, message.state, message.note,
                        message.finish_reason, message.created, int(message.left_out), int(message.resumed)))
            db.execute("UPDATE chats SET updated = ? WHERE id = ?", (time.time(), chat_id))

    def set_details(self, chat_id: int, *, model: str, system: str) -> None:
        """Remember the model that answers and the system prompt sent, as of the last question
        (a new question moves the chat to the top of the list: subscribers are told)."""
        db = self._open()
        with _transaction(db):
            db.execute("UPDATE chats SET model = ?, system = ?, updated = ? WHERE id = ?",
                       (model, system, time.time(), chat_id))
        self._changed(chat_id)

    def rename(self, chat_id: int, title: str) -> None:
        """Give a chat another title (an empty one is refused)."""
        title = title.strip()
        if not title:
            raise HistoryError(translate("ChatHistory", "A chat's title cannot be empty; type a few words."))
        self._need(chat_id)
        with _transaction(self._open()) as db:
            db.execute("UPDATE chats SET title = ? WHERE id = ?", (title, chat_id))
        self._changed(chat_id)

    def delete(self, chat_id: int) -> None:
        """Forget a chat and its messages."""
        self._need(chat_id)
        with _transaction(self._open()) as db:
            db.execute("DELETE FROM chats WHERE id = ?", (chat_id,))
        self._changed(chat_id)

    def record(self, conversation: Conversation, chat_id: int | None = None, *,
               details: Callable[[], tuple[str, str]] = lambda: ("", ""),
               failed: Callable[[str], None] = lambda _text: None) -> "ChatRecorder":
        """Save ``conversation`` as it changes (see :class:`ChatRecorder`)."""
        return ChatRecorder(self, conversation, chat_id, details=details, failed=failed)

    # --- reading ------------------------------------------------------------------------------

    def chats(self, search: str = "") -> list[ChatSummary]:
        """Past chats, the latest changed first; with ``search``, only those whose title or text
        holds it (case-insensitive for Latin letters)."""
        if self._db is None and not self.path.exists():
            return []
        query = ("SELECT c.id, c.title, c.model, c.system, c.created, c.updated, "
                 "(SELECT COUNT(*) FROM messages m WHERE m.chat_id = c.id) FROM chats c")
        args: tuple = ()
        if search.strip():
            pattern = "%" + search.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            query += (" WHERE c.title LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m "
                      "WHERE m.chat_id = c.id AND m.content LIKE ? ESCAPE '\\')")
            args = (pattern, pattern)
        rows = self._open().execute(query + " ORDER BY c.updated DESC, c.id DESC", args).fetchall()
        return [ChatSummary(*row) for row in rows]

    def chat(self, chat_id: int) -> ChatSummary:
        """One chat's summary; :class:`HistoryError` when there is no such chat."""
        return self._need(chat_id)

    def load(self, chat_id: int) -> Conversation:
        """One chat's messages as a conversation (a reply saved while streaming comes back
        interrupted)."""
        self._need(chat_id)
        rows = self._open().execute(
            "SELECT role, content, state, note, finish_reason, created, left_out, resumed FROM messages "
            "WHERE chat_id = ? ORDER BY position", (chat_id,)).fetchall()
        return Conversation([Message.from_json({
            "role": role, "content": content, "state": state, "note": note, "finish_reason": finish,
            "created": created, "left_out": bool(left_out), "resumed": bool(resumed_)})
            for role, content, state, note, finish, created, left_out, resumed_ in rows])

    def _need(self, chat_id: int) -> ChatSummary:
        found = self._chats_by_id(chat_id)
        if not found:
            raise HistoryError(translate("ChatHistory", "There is no chat number {id} in the history "
                                         "(it was deleted?).").format(id=chat_id))
        return found[0]

    def _chats_by_id(self, chat_id: int) -> list[ChatSummary]:
        if self._db is None and not self.path.exists():
            return []
        rows = self._open().execute(
            "SELECT c.id, c.title, c.model, c.system, c.created, c.updated, (SELECT COUNT(*) FROM "
            "messages m WHERE m.chat_id = c.id) FROM chats c WHERE c.id = ?", (chat_id,)).fetchall()
        return [ChatSummary(*row) for row in rows]

    # --- export -------------------------------------------------------------------------------

    def export(self, chat_id: int, path: str | os.PathLike, fmt: str = "markdown") -> Path:
        """Write one chat to ``path`` atomically (owner-only), as ``markdown`` or ``json``.

        The JSON is a transcript :meth:`Conversation.load` reads back, with the chat's title,
        model, system prompt and date beside the messages.
        """
        if fmt not in EXPORT_FORMATS:
            raise HistoryError(translate("ChatHistory", "Cannot export a chat as {fmt}: choose Markdown "
                                         "or JSON.").format(fmt=fmt))
        summary = self._need(chat_id)
        conv = self.load(chat_id)
        if fmt == "json":
            data = {"title": summary.title, "model": summary.model, "system": summary.system,
                    "created": summary.created, **conv.to_json()}
            return write_json_atomic(path, data, 0o600)
        return write_atomic(path, to_markdown(summary, conv.messages), 0o600)


def to_markdown(summary: ChatSummary, messages: list[Message]) -> str:
    """One chat as a Markdown document: the title, date and model, then each message under a
    heading; interrupted replies and replies asked again say so."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(summary.created))
    lines = [f"# {summary.title}", ""]
    lines.append(translate("ChatHistory", "{date} · model: {model}").format(
        date=when, model=summary.model or translate("ChatHistory", "unknown")))
    lines.append("")
    if summary.system.strip():
        lines += [f"## {translate('ChatHistory', 'System prompt')}", "", summary.system, ""]
    for i, m in enumerate(messages):
        head = {"user": translate("ChatHistory", "You"), "assistant": translate("ChatHistory", "Assistant"),
                "system": translate("ChatHistory", "System prompt")}[m.role]
        lines += [f"## {head}", ""]
        if resumed(messages, i):
            lines += ["> " + translate("ChatHistory", "Asked again after the interrupted reply above."), ""]
        lines += [m.content, ""]
        if m.resumed:  # cut by a lost worker and continued after the relaunch (#34)
            lines += ["> " + translate("ChatHistory", "Cut by a lost worker and continued where it stopped "
                                       "({why}).").format(why=m.note or translate("ChatHistory", "no reason given")),
                      ""]
        if m.state == INTERRUPTED:
            lines += ["> " + translate("ChatHistory", "Interrupted: {why}").format(
                why=m.note or translate("ChatHistory", "no reason given")), ""]
        if m.left_out:
            lines += ["> " + translate("ChatHistory", "Left out of later requests so the conversation "
                                       "fits the server's context."), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


class _transaction:
    """``with _transaction(db) as db:`` — BEGIN … COMMIT, or ROLLBACK on an error."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        if not self.db.in_transaction:
            self.db.execute("BEGIN IMMEDIATE")
            self._own = True
        else:
            self._own = False
        return self.db

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self._own:
            return
        if exc_type is None:
            self.db.execute("COMMIT")
        elif self.db.in_transaction:
            self.db.execute("ROLLBACK")


class ChatRecorder:
    """Keeps one conversation saved in a :class:`ChatStore` as it changes (module docstring).

    Attributes:
        chat_id: the chat in the store, or None until the conversation's first message.

    ``details()`` returns ``(model, system prompt)`` as they are when a question is asked; the
    chat keeps the latest. ``failed(text)`` hears, in words, when a change could not be saved
    (a full disk): the conversation goes on on screen, and the next change tries again.
    ``clock`` is the time source of the streaming throttle.
    """

    def __init__(self, store: ChatStore, conversation: Conversation, chat_id: int | None = None, *,
                 details: Callable[[], tuple[str, str]] = lambda: ("", ""),
                 failed: Callable[[str], None] = lambda _text: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.conversation = conversation
        self.chat_id = chat_id
        self._details = details
        self._failed = failed
        self._clock = clock
        self._written = len(conversation.messages) if chat_id is not None else 0
        self._last_write = clock()
        self._unwritten: int | None = None  # index of a streaming message with text not yet written
        self._pieces = 0
        self._unsubscribe: Callable[[], None] | None = conversation.subscribe(self._on_change)

    def _on_change(self, index: int, message: Message) -> None:
        # Called from inside the conversation's changes (a token arriving): a failure to save
        # must not break the chat, so it is reported in words and the next change retries.
        try:
            self._save_change(index, message)
        except (sqlite3.Error, OSError, HistoryError) as exc:
            self._report(exc)

    def _report(self, exc: Exception) -> None:
        self._failed(translate("ChatHistory", "Could not save this chat to {path} ({why}); it stays "
                               "on screen. Free some disk space or check the folder's permissions.")
                     .format(path=self.store.path, why=exc))

    def _save_change(self, index: int, message: Message) -> None:
        if self.chat_id is None:
            self._create()
            return
        if index >= self._written:  # a new message: written at once
            self._write(index)
            if message.role == "user":
                model, system = self._details()
                self.store.set_details(self.chat_id, model=model, system=system)
            return
        if message.state == STREAMING:
            self._unwritten = index
            self._pieces += 1
            if self._pieces < SAVE_EVERY_PIECES and self._clock() - self._last_write < SAVE_EVERY_SECONDS:
                return
        self._write(index)

    def _create(self) -> None:
        messages = self.conversation.messages
        first = next((m.content for m in messages if m.role == "user"), messages[0].content if messages else "")
        model, system = self._details()
        self.chat_id = self.store.new_chat(title_from(first) or translate("ChatHistory", "New chat"),
                                           model=model, system=system,
                                           created=messages[0].created if messages else None)
        for i in range(len(messages)):
            self._write(i)

    def _write(self, index: int) -> None:
        self.store.save_message(self.chat_id, index, self.conversation.messages[index])
        self._written = max(self._written, index + 1)
        self._last_write = self._clock()
        self._pieces = 0
        if self._unwritten == index:
            self._unwritten = None

    def flush(self) -> None:
        """Write the streaming reply's text that the throttle held back."""
        if self._unwritten is not None and self.chat_id is not None \
                and self._unwritten < len(self.conversation.messages):
            try:
                self._write(self._unwritten)
            except (sqlite3.Error, OSError, HistoryError) as exc:
                self._report(exc)

    def close(self, write: bool = True) -> None:
        """Stop following the conversation, after writing what is held back (``write``; not
        for a chat that was just deleted)."""
        if self._unsubscribe is not None:
            if write:
                self.flush()
            self._unsubscribe()
            self._unsubscribe = None

