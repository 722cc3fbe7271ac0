"""The zh_CN translation covers every visible string, and the app really shows it."""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication

from gui import qm_compiler
from gui.translations import TRANSLATIONS, TsTranslator, install_translator, load_translator, message_sources

ROOT = Path(__file__).resolve().parents[2]
TS = TRANSLATIONS / "herd_zh_CN.ts"
#: Contexts of the Qt-free core's messages (agent/i18n.py).
CORE_CONTEXTS = {"AgentClient", "Doctor", "Failover", "Launcher", "Model", "Placement", "Plan"}


def _messages(path: Path) -> dict[tuple[str, str], ET.Element]:
    out = {}
    for ctx in ET.parse(path).getroot().iter("context"):
        for m in ctx.iter("message"):
            out[(ctx.findtext("name"), m.findtext("source"))] = m.find("translation")
    return out


def test_every_string_in_the_code_has_a_finished_translation(tmp_path):
    # lupdate (shipped with PySide6) extracts what the code marks with tr() today
    tool = shutil.which("pyside6-lupdate")
    assert tool, "pyside6-lupdate comes with PySide6-Essentials"
    fresh = tmp_path / "fresh.ts"
    sources = [str(p) for p in message_sources()]
    subprocess.run([tool, *sources, "-ts", str(fresh)], check=True, capture_output=True)
    wanted = set(_messages(fresh))
    assert len(wanted) > 100
    core = {k for k in wanted if k[0] in CORE_CONTEXTS}
    assert len(core) > 40, "the core's messages are extracted too"
    ours = _messages(TS)
    missing = sorted(k for k in wanted if k not in ours)
    assert not missing, f"strings not in herd_zh_CN.ts (run pyside6-lupdate): {missing[:10]}"
    unfinished = sorted(k for k in wanted if not (ours[k].text or "").strip() or ours[k].get("type") == "unfinished")
    assert not unfinished, f"untranslated: {unfinished[:10]}"


def test_placeholders_and_accelerators_survive():
    for (ctx, src), tr in _messages(TS).items():
        if tr.get("type") in ("vanished", "obsolete"):
            continue
        assert sorted(re.findall(r"%\d", src)) == sorted(re.findall(r"%\d", tr.text)), (ctx, src, tr.text)
        # the core fills named {fields} after translating: a lost or renamed one would raise
        assert sorted(re.findall(r"\{\w*\}", src)) == sorted(re.findall(r"\{\w*\}", tr.text)), (ctx, src, tr.text)
        if re.search(r"&\w", src):
            assert re.search(r"&\w", tr.text), (ctx, src, tr.text)


@pytest.mark.parametrize("how", ["qm", "ts"])
def test_widgets_show_chinese(qtbot, qapp: QApplication, tmp_path, monkeypatch, how):
    if how == "ts":
        # no lrelease: the .ts is read directly
        monkeypatch.setattr(qm_compiler, "lrelease_tool", lambda: None)
        t = load_translator("zh_CN", cache=tmp_path)
        assert isinstance(t, TsTranslator)
    else:
        t = load_translator("zh_CN", cache=tmp_path)
        assert t is not None and not isinstance(t, TsTranslator)
        assert (tmp_path / "herd_zh_CN.qm").is_file()
    qapp.installTranslator(t)
    try:
        from gui.widgets.launch_panel import LaunchPanel
        from gui.widgets.split_editor import SplitEditor

        ed = SplitEditor()
        qtbot.addWidget(ed)
        assert ed.by_memory_button.text() == "按内存分配"
        assert ed.table.horizontalHeaderItem(1).text() == "设备"
        lp = LaunchPanel()
        qtbot.addWidget(lp)
        lp.refuse(["x"])
        assert lp.status.text() == "未启动：x"
    finally:
        qapp.removeTranslator(t)
    assert SplitEditor().by_memory_button.text() == "By memory"


def test_english_needs_no_translator():
    assert load_translator("en") is None
    assert load_translator("en_US") is None


def test_core_messages_follow_the_installed_translator(qapp: QApplication, tmp_path, monkeypatch):
    """install_translator points the core's hook at the catalogue; English leaves it English."""
    from agent import i18n
    from gui.cluster.planning.plan import DeviceFit
    from gui.translations import install_translator

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fit = DeviceFit(device=None, slots=range(0, 1), weights_bytes=3 << 20, kv_bytes=1 << 20, compute_bytes=0, free_bytes=2 << 20)
    installed = install_translator(qapp, "zh_CN")
    try:
        assert fit.describe() == "主控 CPU：需要 4.0 MiB，可用 2.0 MiB — 还差 2.0 MiB"
    finally:
        for t in installed:
            qapp.removeTranslator(t)
    assert install_translator(qapp, "en") == []
    assert i18n._translator is None
    assert fit.describe() == "host CPU: needs 4.0 MiB of 2.0 MiB free — short by 2.0 MiB"


@pytest.mark.parametrize("how", ["qm", "ts"])
def test_every_catalogue_together_in_the_order_the_app_installs_them(qapp: QApplication, tmp_path,
                                                                      monkeypatch, how):
    """The app's catalogue, Qt's and the extra Qt strings, installed by install_translator as
    run_app does: each answers its own strings and lets the others answer theirs. With no
    lrelease (#37: a venv not activated, a desktop shortcut) the .ts readers returned "" for the
    strings they lacked, which Qt took as the translation: a window without text."""
    from PySide6.QtCore import QCoreApplication

    from agent import i18n
    from gui.widgets.split_editor import SplitEditor

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    if how == "ts":
        monkeypatch.setattr(qm_compiler, "lrelease_tool", lambda: None)
    installed = install_translator(qapp, "zh_CN")
    try:
        assert len(installed) == 3, "herd's, Qt's own and the extra Qt strings"
        readers = [isinstance(t, TsTranslator) for t in installed]
        assert readers == ([True, False, True] if how == "ts" else [False, False, False])
        ed = SplitEditor()
        assert ed.by_memory_button.text() == "按内存分配"  # herd's catalogue, asked last
        assert ed.table.horizontalHeaderItem(1).text() == "设备"
        assert QCoreApplication.translate("QFileDialog", "&Look in:") == "查找范围(&L)："  # the extra
        assert QCoreApplication.translate("QPlatformTheme", "Cancel") == "取消"  # Qt's own .qm
        unknown = "A sentence no catalogue holds"
        assert QCoreApplication.translate("SplitEditor", unknown) == unknown
        assert QCoreApplication.translate("NoSuchContext", unknown) == unknown
        ed.deleteLater()
    finally:
        for t in installed:
            qapp.removeTranslator(t)
        i18n.set_translator(None)


def test_the_ts_reader_answers_no_translation_for_what_it_lacks():
    """None (a null QString) is what lets Qt ask the next translator (#37)."""
    t = TsTranslator(TRANSLATIONS / "qtbase_extra_zh_CN.ts")
    assert t.translate("QFileDialog", "&Look in:") == "查找范围(&L)："
    assert t.translate("SplitEditor", "By memory") is None


def test_lrelease_is_found_without_path(monkeypatch, tmp_path):
    """Started by its full path or from a shortcut, the app has no venv on PATH (#37): the
    lrelease of PySide6's package folder compiles the catalogue all the same."""
    monkeypatch.setenv("PATH", "")
    tool = qm_compiler.lrelease_tool()
    assert tool is not None
    qm = tmp_path / "herd_zh_CN.qm"
    assert qm_compiler.compile_qm(TS, qm, tool)
    assert qm_compiler.is_current(qm, TS)
    ts = tmp_path / "herd_zh_CN.ts"
    ts.write_bytes(TS.read_bytes().replace("按内存分配".encode(), "按内存".encode()))
    assert not qm_compiler.is_current(qm, ts), "a changed .ts makes its .qm stale"
