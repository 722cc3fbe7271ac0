"""Loading the app's translations (Qt Linguist ``.ts`` sources in ``resources/translations``).

Preferred: a compiled ``herd_<lang>.qm`` — beside the ``.ts`` in an installed wheel (its build
step compiles them, ``setup.py``), else compiled on first run with the ``lrelease`` that
PySide6-Essentials ships (found in PySide6's package folder, so no ``PATH`` is needed) into the
user's cache folder, and recompiled when the ``.ts`` changes (:mod:`gui.qm_compiler`). When
neither works (no ``lrelease``, a read-only cache) :class:`TsTranslator` reads the ``.ts`` XML
directly, so the app is translated either way.

The Qt-free core (``gui/cluster/``, ``agent/``) writes its user-facing sentences through
:func:`agent.i18n.translate`; :func:`install_translator` points that hook at
``QCoreApplication.translate``, so doctor findings, launch failures and agent errors come out of
the same catalogue as the widgets' strings. The CLI never installs it and stays English.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QLibraryInfo, QLocale, QTranslator

from agent import i18n
from gui import qm_compiler

log = logging.getLogger(__name__)

TRANSLATIONS = Path(__file__).resolve().parent.parent / "resources" / "translations"


def message_sources() -> list[Path]:
    """The source files whose marked strings the app shows: the window and its flows, its widgets, the Qt-free
    core (marked with :func:`agent.i18n.translate`) and the agent. What ``pyside6-lupdate`` reads
    for ``herd_zh_CN.ts``, and what the translation test checks."""
    root = Path(__file__).resolve().parent.parent
    return [*sorted((root / "gui").glob("*.py")),  # the window, its flows, the session
            *sorted((root / "gui" / "widgets").rglob("*.py")),
            *sorted((root / "gui" / "cluster").rglob("*.py")),
            *sorted((root / "agent").rglob("*.py"))]
LANGUAGES = ("en", "zh_CN")


class TsTranslator(QTranslator):
    """A translator that reads a Qt Linguist ``.ts`` file (finished and unfinished entries with
    a translation; vanished and obsolete ones are skipped)."""

    def __init__(self, path: str | Path, parent=None) -> None:
        super().__init__(parent)
        self.table: dict[tuple[str, str], str] = {}
        root = ET.parse(path).getroot()
        for ctx in root.iter("context"):
            name = ctx.findtext("name") or ""
            for msg in ctx.iter("message"):
                src = msg.findtext("source")
                tr = msg.find("translation")
                if src is None or tr is None or not (tr.text or "").strip():
                    continue
                if tr.get("type") in ("vanished", "obsolete"):
                    continue
                self.table[(name, src)] = tr.text

    def translate(self, context, source_text, disambiguation=None, n=-1):  # noqa: D401 - Qt override
        # None (a null QString) lets Qt ask the next translator; an empty string would be taken
        # as the translation, and every string the catalogue lacks would show blank (#37)
        return self.table.get((context, source_text))

    def isEmpty(self) -> bool:  # noqa: N802 - Qt override
        return not self.table


def cache_dir() -> Path:
    """Where translations compiled on first run are kept."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("llama-herd", appauthor=False)) / "translations"


def compiled_qm(ts: Path, cache: Path | None = None) -> Path | None:
    """A current ``.qm`` for ``ts``: the one the wheel's build put beside it, else one compiled
    into ``cache`` (None if impossible)."""
    shipped = ts.with_suffix(".qm")
    if qm_compiler.is_current(shipped, ts):
        return shipped
    qm = (cache or cache_dir()) / shipped.name
    if qm_compiler.is_current(qm, ts) or qm_compiler.compile_qm(ts, qm):
        return qm
    return None


def load_translator(lang: str, folder: Path = TRANSLATIONS, cache: Path | None = None,
                    name: str = "herd") -> QTranslator | None:
    """The translator for ``lang`` (``zh_CN``…), or None for English / no translation.

    ``name`` picks the catalogue: ``herd`` (the app's own) or ``qtbase_extra`` (Qt's own
    strings that Qt's shipped catalogue lacks)."""
    if not lang or lang.startswith("en"):
        return None
    candidates = [lang, lang.split("_")[0]]
    for code in candidates:
        ts = folder / f"{name}_{code}.ts"
        if not ts.is_file():
            continue
        qm = compiled_qm(ts, cache)
        if qm is not None:
            t = QTranslator()
            if t.load(str(qm)):
                return t
        if ts.is_file():
            try:
                t = TsTranslator(ts)
            except ET.ParseError as exc:
                log.warning("cannot read %s: %s", ts, exc)
                continue
            if not t.isEmpty():
                return t
    return None


def install_translator(app: QCoreApplication, lang: str) -> list[QTranslator]:
    """Install the app's and Qt's own translations for ``lang``; returns them (keep them alive)."""
    installed = []
    t = load_translator(lang)
    i18n.set_translator(None)
    # The file dialog names a file's type from the system's MIME database ("JSON document"), in
    # the default locale's language: make that the app's language, formats of the system's region
    # kept for English.
    QLocale.setDefault(QLocale(lang) if t is not None
                       else QLocale(QLocale.Language.English, QLocale.system().territory()))
    if t is not None:
        app.installTranslator(t)
        installed.append(t)
        # the core's messages (doctor, launcher, agent client…) from the same catalogue
        i18n.set_translator(QCoreApplication.translate)
        # Qt's own widgets (the file dialog, message box buttons) from PySide6's translations
        qt = QTranslator(app)
        if qt.load(f"qtbase_{lang}", QLibraryInfo.path(QLibraryInfo.LibraryPath.TranslationsPath)):
            app.installTranslator(qt)
            installed.append(qt)
        # …and the few that catalogue lacks ("&Look in:" in the file dialog, #17); installed
        # last, so asked first
        extra = load_translator(lang, name="qtbase_extra")
        if extra is not None:
            app.installTranslator(extra)
            installed.append(extra)
    app._herd_translators = installed  # the app must hold them, or Python frees them
    return installed
