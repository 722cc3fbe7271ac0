"""No English left in a zh_CN window (#17): Qt's own file dialog, the import review, the plain
words for a network failure, and `herd demo --lang zh_CN` (the option after the command)."""

from __future__ import annotations

import re

import pytest
from person import answer_dialog, check, use_menu
from PySide6.QtCore import QLocale, QTimer
from PySide6.QtWidgets import QApplication, QFileDialog, QFileSystemModel, QLabel

from agent import i18n
from gui.translations import install_translator


@pytest.fixture
def zh_cn(qapp: QApplication, tmp_path, monkeypatch):
    """The zh_CN catalogues installed as run_app installs them; removed afterwards."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    installed = install_translator(qapp, "zh_CN")
    assert len(installed) == 3, "herd's, Qt's own and the extra Qt strings"
    yield
    for t in installed:
        qapp.removeTranslator(t)
    i18n.set_translator(None)
    QLocale.setDefault(QLocale.system())


@pytest.mark.engine
def test_the_file_dialog_speaks_chinese(zh_cn, qtbot, make_window, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    (tmp_path / "cluster.json").write_text("{}")
    win = make_window(browse=False)
    labels = {}
    types = {}

    def look(dlg: QFileDialog) -> None:
        labels.update({w.objectName(): w.text() for w in dlg.findChildren(QLabel) if w.text()})
        # the file list's Type column: a folder, and a file the system's MIME database names
        files = dlg.findChild(QFileSystemModel)
        dlg.setNameFilter("*")
        # (the dialog may open in the folder of a profile another test ran: list ours)
        dlg.setDirectory(str(tmp_path))
        root = files.index(str(tmp_path))
        # (Qt lists the folder in a thread of its own: slow on a busy machine)
        qtbot.waitUntil(lambda: files.rowCount(root) >= 2, timeout=30000)
        types.update({files.fileName(files.index(r, 0, root)): files.type(files.index(r, 0, root))
                      for r in range(files.rowCount(root))})
        dlg.reject()

    seen = answer_dialog(qtbot, QFileDialog, look)
    use_menu(qtbot, win, win.menus.import_action)  # 文件 ▸ 导入集群配置…
    check(seen)
    assert labels["lookInLabel"] == "查找范围(&L)：", labels
    assert labels["fileTypeLabel"] == "文件类型(&T)：", labels
    assert labels["fileNameLabel"].startswith("文件名称"), labels
    assert types["models"] == "文件夹" and types["cluster.json"] == "JSON 文档", types
    # nothing in Latin letters but the paths and the file patterns
    english = [t for t in labels.values() if re.search(r"[A-Za-z]{3}", t) and "/" not in t and "*" not in t]
    assert not english, english


def test_the_import_review_speaks_chinese(zh_cn, qtbot, demo_model):
    from gui.cluster.launching.profile import diff_profile, make_profile
    from gui.cluster.llama.model import inspect_model
    from gui.cluster.planning.plan import Assignment, Device, Plan
    from gui.widgets.profile_dialog import ProfileDiffDialog

    model = inspect_model(demo_model)
    dev = Device("id-a", "demo-a", "127.0.0.1:50101", 0, "CPU", 8 << 30, 16 << 30)
    plan = Plan(model.n_layer, 2, (Assignment(dev, model.n_layer - 1),))
    profile = make_profile(plan, model, [], ctx=512)
    dlg = ProfileDiffDialog("cluster.json", profile, diff_profile(profile, [], None, model))
    qtbot.addWidget(dlg)
    rows = [dlg.list.item(i).text() for i in range(dlg.list.count())]
    assert rows == ["✖ demo-a: 节点不在（ID id-a，上次在 127.0.0.1）\n"
                    "    请启动它的 herd-agent 并完成配对，然后重新导入；或在现有节点上重新分层并导出新的配置。"], rows
    table = dlg.plan_table
    assert [table.horizontalHeaderItem(c).text() for c in range(4)] == ["设备", "层位数", "层", "地址"]
    assert table.item(0, 0).text() == "主控 CPU" and table.item(0, 3).text() == "本机"
    assert not dlg.apply_button.isEnabled() and dlg.verdict.text().startswith("此配置无法直接使用")


def test_a_cut_off_reply_is_explained_in_chinese(zh_cn):
    import httpx

    from gui.cluster.nodes.network_errors import explain

    exc = httpx.RemoteProtocolError("peer closed connection without sending complete message body "
                                    "(incomplete chunked read)")
    assert explain(exc) == "回复途中连接被切断（服务器或其某个工作进程已停止）。"


@pytest.mark.engine
def test_herd_demo_lang_after_the_command(qtbot, qapp, demo_model, tmp_path, monkeypatch, app_state_restored):
    from gui.app import MainWindow
    from gui.main import main

    monkeypatch.setenv("HERD_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    seen = {}

    def look_and_close():
        wins = [w for w in qapp.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]
        if not wins:
            QTimer.singleShot(50, look_and_close)
            return
        w = wins[-1]
        if sum(n.paired for n in w.node_map.values()) < 2:  # look once the demo is ready
            QTimer.singleShot(50, look_and_close)
            return
        seen["tabs"] = [w.tabs.tabText(i) for i in range(w.tabs.count())]
        w.close()
        qapp.quit()

    QTimer.singleShot(100, look_and_close)
    assert main(["demo", "--lang", "zh_CN", "--model", str(demo_model)]) == 0
    assert seen["tabs"] == ["分层", "启动", "对话与仪表盘"]
