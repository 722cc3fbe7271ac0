"""Settings remembered across runs, and ``herd`` opening the window in the forced language."""

from __future__ import annotations

import argparse

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from agent.engine_lookup import find_engine
from gui.app import MainWindow, run_app
from gui.settings import Settings


def test_settings_fall_back_to_defaults_on_bad_values(tmp_path):
    s = Settings(str(tmp_path / "s.ini"))
    s.qs.setValue("server/port", "not a number")
    s.qs.setValue("model/recent", "{broken json")
    assert s.get("server/port") == 8080
    assert s.get("model/recent") == []
    s.add_recent("model/recent", "/a.gguf")
    s.add_recent("model/recent", "/b.gguf")
    s.add_recent("model/recent", "/a.gguf")
    assert s.get("model/recent") == ["/a.gguf", "/b.gguf"]


def test_window_remembers_layout_and_choices(qtbot, tmp_path, monkeypatch, demo_model):
    monkeypatch.setenv("HERD_CONFIG_DIR", str(tmp_path / "config"))
    path = str(tmp_path / "herd.ini")
    engine = find_engine(probe=False)
    win = MainWindow(Settings(path), engine=engine)
    qtbot.addWidget(win)
    win.resize(701, 503)  # within the offscreen screen, which restoreGeometry clamps to
    win.tabs.setCurrentIndex(2)
    win.editor.ctx.setValue(3072)
    win.chat.temperature.setValue(0.3)
    win.chat.system_edit.setText("Be brief.")
    assert win.open_model(str(demo_model))
    win.close()
    assert not win.bridge.is_running()

    again = MainWindow(Settings(path), engine=engine)
    qtbot.addWidget(again)
    try:
        assert again.size().width() == 701 and again.size().height() == 503
        assert again.tabs.currentIndex() == 2
        assert again.editor.ctx.value() == 3072
        assert abs(again.chat.temperature.value() - 0.3) < 1e-9
        assert again.chat.system_edit.text() == "Be brief."
        assert again.settings.get("model/last") == str(demo_model)
        assert again.model_panel.recent.itemData(0) == str(demo_model)
    finally:
        again.close()


def test_herd_lang_forces_chinese(qtbot, qapp: QApplication, tmp_path, monkeypatch, app_state_restored):
    monkeypatch.setenv("HERD_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("HERD_INTERFACES", "127.0.0.1")  # tests browse loopback only
    seen = {}

    def look_and_close():
        wins = [w for w in qapp.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]
        if not wins:
            QTimer.singleShot(50, look_and_close)
            return
        w = wins[-1]
        seen["tabs"] = [w.tabs.tabText(i) for i in range(w.tabs.count())]
        seen["start"] = w.launch.start_button.text()
        w.close()
        qapp.quit()

    QTimer.singleShot(100, look_and_close)
    assert run_app(argparse.Namespace(lang="zh_CN")) == 0
    assert seen["tabs"] == ["分层", "启动", "对话与仪表盘"]
    assert seen["start"] == "启动"


def test_open_model_starts_in_the_last_models_folder(qtbot, tmp_path, demo_model, monkeypatch):
    """*Open model…* opens where the last model was, not in the folder herd was started from."""
    import shutil

    from PySide6.QtWidgets import QFileDialog
    from person import answer_dialog, check, choose_file, click

    from gui.settings import Settings

    models = tmp_path / "models"
    models.mkdir()
    other = models / "other.gguf"
    shutil.copy(demo_model, other)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("HERD_CONFIG_DIR", str(tmp_path / "config"))
    win = MainWindow(Settings(str(tmp_path / "herd.ini")), engine=find_engine(probe=False))
    qtbot.addWidget(win)
    try:
        win.settings.add_recent("model/recent", str(demo_model))
        win.model_panel.set_recent(win.settings.get("model/recent"))
        assert win.open_model(str(other))  # the person's last model, in its own folder
        seen = answer_dialog(qtbot, QFileDialog, choose_file(qtbot, str(other)))  # checks the folder
        win.show()
        click(qtbot, win.model_panel.open_button)
        check(seen)
        # a folder that has gone since: the next one that is still there
        shutil.rmtree(models)
        assert win.model_panel.start_folder() == str(demo_model.parent)
    finally:
        win.close()
