"""The window's jobs work from the views they are given, not from the whole window (#33).

A bare QMainWindow holds only the views :class:`~gui.profile_actions.ProfileActions` and
:class:`~gui.model_actions.ModelActions` drive; a profile of this PC is exported and applied
through them and shows in those views, with no :class:`~gui.app.MainWindow` anywhere.
"""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QMainWindow, QTabWidget, QWidget

from gui.cluster import workspace as W
from gui.cluster.llama.server_command import ServerOptions
from gui.model_actions import ModelActions
from gui.profile_actions import ProfileActions, load_with_model
from gui.settings import Settings
from gui.widgets.model_panel import ModelPanel
from gui.widgets.nodes_panel import NodesPanel
from gui.widgets.split_editor import SplitEditor


@pytest.fixture
def parts(qtbot, bridge, engine, tmp_path, monkeypatch):
    """The views, the workspace and the two jobs, put together as the window does it, in a bare window."""
    monkeypatch.setenv("HERD_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    shell = QMainWindow()
    qtbot.addWidget(shell)
    workspace = W.Workspace(ServerOptions(ctx=2048, host="127.0.0.1", port=8080))
    editor, panel, tabs = SplitEditor(), ModelPanel(), QTabWidget()
    tabs.addTab(QWidget(), "elsewhere")
    tabs.addTab(editor, "Split")
    shell.setCentralWidget(tabs)
    # (the window's own job: the workspace's model and devices shown in the editor)
    workspace.subscribe(lambda event: event == W.MODEL and editor.set_cluster(workspace.model,
                                                                                  workspace.planned_devices()))
    models = ModelActions(shell, bridge=bridge, settings=Settings(str(tmp_path / "herd.ini")), workspace=workspace,
                          panel=panel)
    profiles = ProfileActions(shell, workspace=workspace, engine=engine, bridge=bridge, models=models, editor=editor,
                              nodes=NodesPanel(), tabs=tabs, status_bar=shell.statusBar())
    yield shell, workspace, editor, panel, tabs, models, profiles
    models.stop()


def test_a_profile_is_exported_and_applied_through_the_views_given(qtbot, parts, demo_model, tmp_path):
    shell, workspace, editor, panel, tabs, models, profiles = parts
    assert models.open_model(str(demo_model))
    assert demo_model.name in panel.info.text() and editor.plan() is not None
    workspace.set_options(ctx=512)
    path = tmp_path / "cluster.json"
    with qtbot.waitSignal(profiles.export(str(path)).finished, timeout=30000):
        pass
    assert "Saved" in shell.statusBar().currentMessage()
    # this PC moves on: another context, another tab
    workspace.set_options(ctx=256)
    tabs.setCurrentIndex(0)
    profile, info = load_with_model(str(path))
    assert profiles.apply(profile, info)
    assert workspace.options.ctx == 512
    assert tabs.currentWidget() is editor
    assert shell.statusBar().currentMessage().startswith("Profile applied")
    assert editor.plan() is not None and str(workspace.model.path) == str(demo_model)
