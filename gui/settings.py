"""The app's settings: one typed registry with defaults, stored with QSettings.

Like Picard's option registry: every setting is declared once with its type, default and a
title, so reading a missing or mistyped value falls back to the default instead of surprising
the code that uses it. ``VERSION`` with :func:`upgrade` moves old stored values forward when a
setting changes shape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QByteArray, QSettings

from gui.cluster.llama.server_command import DEFAULT_CTX, DEFAULT_HOST, DEFAULT_PORT

VERSION = 1
ORG = "llama-herd"
APP = "herd"


@dataclass(frozen=True)
class Option:
    """One setting: its key, type, default and a human title."""

    key: str
    type: type
    default: Any
    title: str


OPTIONS: dict[str, Option] = {o.key: o for o in [
    Option("window/geometry", QByteArray, QByteArray(), "Window position and size"),
    Option("window/state", QByteArray, QByteArray(), "Window layout (docks, toolbars)"),
    Option("window/splitter", QByteArray, QByteArray(), "Panel sizes"),
    Option("window/tab", int, 0, "Last open tab"),
    # closing the window while serving: ask, background or stop (gui.background, #36)
    Option("window/on_close", str, "ask", "Closing the window while serving: ask, background or stop"),
    Option("model/last", str, "", "Last model"),
    Option("model/recent", list, [], "Recent models"),
    Option("model/splits", list, [], "Splits made by hand, per model (gui.cluster.planning.split_model)"),
    Option("nodes/addresses", list, [], "Nodes added by address"),
    Option("server/ctx", int, DEFAULT_CTX, "Context size"),
    Option("server/host", str, DEFAULT_HOST, "Endpoint address"),
    Option("server/port", int, DEFAULT_PORT, "Endpoint port"),
    # Off by default: other devices reach the endpoint only through the front door, with a key (#34).
    Option("server/share_lan", bool, False, "Share on the LAN"),
    # People at once, llama-server's -np (#34); 0: llama-server's own default.
    Option("server/people", int, 0, "People at once"),
    # HTTPS with herd's own certificate when shared, so keys do not cross the LAN in clear (#34).
    Option("server/share_https", bool, False, "Use HTTPS"),
    # Speculative decoding (#35), as herd plan --draft takes it: auto, none, ngram, mtp or a draft's path.
    Option("server/draft", str, "auto", "Speculation"),
    Option("speculation/measured", list, [], "What Fastest measured about speculation, per model"),
    # Small instruct models (the demo's SmolLM2 among them) wander off without one.
    Option("chat/system", str, "You are a helpful assistant.", "System prompt"),
    Option("chat/temperature", float, 0.8, "Temperature"),
    Option("chat/max_tokens", int, 256, "Max tokens per reply"),
    Option("ui/language", str, "", "Language (empty: follow the system)"),
    Option("failover/auto_recover", bool, True, "Relaunch on the remaining nodes when one is lost"),
    Option("failover/countdown", int, 5, "Seconds before that relaunch"),
    Option("failover/rejoin", str, "ask", "When a lost node returns: ask or auto"),
    Option("hub/endpoint", str, "", "Model hub address, e.g. a mirror (empty: $HF_ENDPOINT or huggingface.co)"),
    Option("hub/models_dir", str, "", "Folder for downloaded models (empty: herd's data folder)"),
]}

#: Choices offered for ``failover/countdown`` (seconds).
COUNTDOWN_CHOICES = (0, 3, 5, 10, 30)
#: Values of ``failover/rejoin``.
REJOIN_CHOICES = ("ask", "auto")


class Settings:
    """Typed access to the stored settings.

    ``Settings(path)`` stores in an INI file at ``path`` (tests, portable use); otherwise in the
    platform's usual place for ``llama-herd/herd``.
    """

    def __init__(self, path: str | None = None) -> None:
        self.qs = QSettings(path, QSettings.Format.IniFormat) if path else QSettings(ORG, APP)
        upgrade(self.qs)

    def get(self, key: str) -> Any:
        """The value of ``key``, or its default when missing or of the wrong type."""
        opt = OPTIONS[key]
        raw = self.qs.value(key)
        if raw is None:
            return opt.default
        try:
            if opt.type is list:
                value = json.loads(raw) if isinstance(raw, str) else list(raw)
                return value if isinstance(value, list) else opt.default
            if opt.type is QByteArray:
                return raw if isinstance(raw, QByteArray) else QByteArray(raw)
            if opt.type is bool:
                return raw in (True, "true", "1", 1)
            return opt.type(raw)
        except (TypeError, ValueError):
            return opt.default

    def set(self, key: str, value: Any) -> None:
        """Store ``value`` for ``key`` (type-checked against the registry)."""
        opt = OPTIONS[key]
        if opt.type is list:
            value = json.dumps(list(value))
        elif opt.type is not QByteArray and not isinstance(value, opt.type):
            value = opt.type(value)
        self.qs.setValue(key, value)

    def add_recent(self, key: str, item: str, limit: int = 10) -> list:
        """Put ``item`` first in the list setting ``key`` (no duplicates, at most ``limit``)."""
        items = [item] + [x for x in self.get(key) if x != item]
        self.set(key, items[:limit])
        return items[:limit]

    def sync(self) -> None:
        """Write to disk now (QSettings writes through a temporary file and renames it)."""
        self.qs.sync()


def upgrade(qs: QSettings) -> None:
    """Bring stored settings up to :data:`VERSION`."""
    stored = int(qs.value("meta/version", 0) or 0)
    # Version 1 is the first; later versions add steps here, e.g. renaming a key.
    if stored < VERSION:
        qs.setValue("meta/version", VERSION)
