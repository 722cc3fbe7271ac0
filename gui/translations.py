"""Loading the app's translations (Qt Linguist ``.ts`` sources in ``resources/translations``).

Preferred: a compiled ``herd_<lang>.qm`` — beside the ``.ts`` when a build put it there, else
compiled on first run with ``pyside6-lrelease`` (shipped with PySide6-Essentials) into the
user's cache folder, and recompiled when the ``.ts`` is newer. When neither works (no
``lrelease``, a read-only cache) :class:`TsTranslator` reads the ``.ts`` XML directly, so the
app is translated either way.

The Qt-free core (``gui/cluster/``, ``agent/``) writes its user-facing sentences through
:func:`agent.i18n.translate`; :func:`install_translator` points that hook at
``QCoreApplication.translate``, so doctor findings, launch failures and agent errors come out of
the same catalogue as the widgets' strings. The CLI never installs it and stays English.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QLibraryInfo, QLocale, QTranslator

from agent import i18n

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
        return self.table.get((context, source_text), "")

    def isEmpty(self) -> bool:  # noqa: N802 - Qt override
        return not self.table


def compile_translations(folder: Path = TRANSLATIONS) -> list[Path]:
    """``.ts`` → ``.qm`` with ``pyside6-lrelease`` (or ``lrelease``), when one is installed."""
    tool = shutil.which("pyside6-lrelease") or shutil.which("lrelease")
    out = []
    if tool is None:
        return out
    for ts in sorted(folder.glob("*.ts")):
        qm = ts.with_suffix(".qm")
        r = subprocess.run([tool, str(ts), "-qm", str(qm)], capture_output=True, text=True)
        if r.returncode == 0 and qm.is_file():
            out.append(qm)
        else:
            log.warning("lrelease failed for %s: %s", ts.name, r.stderr.strip())
    return out


def cache_dir() -> Path:
    """Where translations compiled on first run are kept."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("llama-herd", appauthor=False)) / "translations"


def compiled_qm(ts: Path, cache: Path | None = None) -> Path | None:
    """A ``.qm`` for ``ts``: the shipped one, or one compiled into ``cache`` (None if impossible)."""
    shipped = ts.with_suffix(".qm")
    if shipped.is_file() and shipped.stat().st_mtime >= ts.stat().st_mtime:
        return shipped
    tool = shutil.which("pyside6-lrelease") or shutil.which("lrelease")
    if tool is None:
        return None
    cache = cache or cache_dir()
    qm = cache / ts.with_suffix(".qm").name
    if qm.is_file() and qm.stat().st_mtime >= ts.stat().st_mtime:
        return qm
    try:
        cache.mkdir(parents=True, exist_ok=True)
        tmp = qm.with_name(qm.name + ".tmp")
        r = subprocess.run([tool, str(ts), "-qm", str(tmp)], capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or not tmp.is_file():
            log.warning("lrelease failed for %s: %s", ts.name, r.stderr.strip())
            return None
        tmp.replace(qm)  # atomic: a half-written .qm is never loaded
        return qm
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("cannot compile %s: %s", ts.name, exc)
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
