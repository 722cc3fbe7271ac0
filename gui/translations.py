"""Loading the app's translations (Qt Linguist ``.ts`` sources in ``resources/translations``).

Preferred: the compiled ``herd_<lang>.qm`` beside the ``.ts`` (made at build or install time
by ``pyside6-lrelease``; :func:`compile_translations` does it). When no ``.qm`` is there and
``pyside6-lrelease`` is missing too — an editable install, a frozen build without tools —
:class:`TsTranslator` reads the ``.ts`` XML directly, so the app is translated either way.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QLibraryInfo, QTranslator

log = logging.getLogger(__name__)

TRANSLATIONS = Path(__file__).resolve().parent.parent / "resources" / "translations"
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


def load_translator(lang: str, folder: Path = TRANSLATIONS) -> QTranslator | None:
    """The translator for ``lang`` (``zh_CN``…), or None for English / no translation."""
    if not lang or lang.startswith("en"):
        return None
    candidates = [lang, lang.split("_")[0]]
    for code in candidates:
        qm = folder / f"herd_{code}.qm"
        if qm.is_file():
            t = QTranslator()
            if t.load(str(qm)):
                return t
        ts = folder / f"herd_{code}.ts"
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
    if t is not None:
        app.installTranslator(t)
        installed.append(t)
        qt = QTranslator(app)
        if qt.load(f"qtbase_{lang}", QLibraryInfo.path(QLibraryInfo.LibraryPath.TranslationsPath)):
            app.installTranslator(qt)
            installed.append(qt)
    app._herd_translators = installed  # the app must hold them, or Python frees them
    return installed
