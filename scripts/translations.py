"""Keep ``resources/translations/herd_zh_CN.ts`` in step with the code.

    python scripts/translations.py missing            # strings the code has and the file lacks, as JSON
    python scripts/translations.py add NEW.json       # put translations in ({context: {source: text}})
    python scripts/translations.py prune              # drop entries the code no longer has

``missing`` runs ``pyside6-lupdate`` over the same files ``tests/gui/test_translations.py`` reads
and prints a JSON object of every (context, source) without a finished translation, each mapped
to ``""``: fill in the Chinese and give the file to ``add``. The file keeps its order; new
messages go at the end of their context (new contexts at the end of the file).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gui.translations import message_sources  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TS = ROOT / "resources" / "translations" / "herd_zh_CN.ts"


def sources() -> list[str]:
    """The files whose strings the app shows (as the translation test reads them)."""
    return [str(p) for p in message_sources()]


def extracted() -> set[tuple[str, str]]:
    """Every (context, source) the code marks for translation today."""
    tool = shutil.which("pyside6-lupdate")
    if not tool:
        raise SystemExit("pyside6-lupdate not found (it comes with PySide6-Essentials)")
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "fresh.ts"
        subprocess.run([tool, *sources(), "-ts", str(fresh)], check=True, capture_output=True)
        root = ET.parse(fresh).getroot()
    return {(c.findtext("name"), m.findtext("source")) for c in root.iter("context") for m in c.iter("message")}


def _finished(tree: ET.ElementTree) -> set[tuple[str, str]]:
    out = set()
    for c in tree.getroot().iter("context"):
        for m in c.iter("message"):
            t = m.find("translation")
            if t is not None and (t.text or "").strip() and t.get("type") != "unfinished":
                out.add((c.findtext("name"), m.findtext("source")))
    return out


def _write(tree: ET.ElementTree) -> None:
    root = tree.getroot()
    root.text = "\n"
    for c in root.iter("context"):  # contexts at the margin, as lupdate writes them
        ET.indent(c, space="    ")
        c.tail = "\n"
    tmp = TS.with_suffix(".ts.tmp")
    with open(tmp, "wb") as f:
        f.write(b"<?xml version='1.0' encoding='utf-8'?>\n<!DOCTYPE TS>\n")
        tree.write(f, encoding="utf-8", xml_declaration=False)
        f.write(b"\n")
    tmp.replace(TS)


def cmd_missing() -> int:
    have = _finished(ET.parse(TS))
    want: dict[str, dict[str, str]] = {}
    for ctx, src in sorted(extracted() - have):
        want.setdefault(ctx, {})[src] = ""
    print(json.dumps(want, ensure_ascii=False, indent=1))
    return 0


def cmd_add(path: str) -> int:
    new = json.loads(Path(path).read_text(encoding="utf-8"))
    tree = ET.parse(TS)
    root = tree.getroot()
    contexts = {c.findtext("name"): c for c in root.iter("context")}
    for ctx, messages in new.items():
        c = contexts.get(ctx)
        if c is None:
            c = ET.SubElement(root, "context")
            ET.SubElement(c, "name").text = ctx
            contexts[ctx] = c
        existing = {m.findtext("source"): m for m in c.iter("message")}
        for src, text in messages.items():
            if not text.strip():
                raise SystemExit(f"{ctx}: no translation for {src!r}")
            m = existing.get(src)
            if m is None:
                m = ET.SubElement(c, "message")
                ET.SubElement(m, "source").text = src
                ET.SubElement(m, "translation")
            t = m.find("translation")
            t.text = text
            t.attrib.pop("type", None)
    _write(tree)
    return 0


def cmd_prune() -> int:
    want = extracted()
    tree = ET.parse(TS)
    for c in list(tree.getroot().iter("context")):
        name = c.findtext("name")
        for m in list(c.iter("message")):
            if (name, m.findtext("source")) not in want:
                c.remove(m)
    _write(tree)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["missing"]:
        return cmd_missing()
    if argv[:1] == ["add"] and len(argv) == 2:
        return cmd_add(argv[1])
    if argv[:1] == ["prune"]:
        return cmd_prune()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
