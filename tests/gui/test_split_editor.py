"""The split editor: drag handles with the mouse, and the plan and command line follow."""

from __future__ import annotations

import re

import pytest
from PySide6.QtCore import QPoint, Qt

from gui.cluster.llama.model import inspect_model
from gui.cluster.planning.plan import Device, layer_map
from gui.widgets.split_editor import BAD, SplitEditor

GiB = 1 << 30


@pytest.fixture(scope="module")
def model(demo_model):
    return inspect_model(demo_model)


def _devices(free_a=8 * GiB, free_b=8 * GiB):
    return [Device("node-a", "alpha", "127.0.0.1:50101", 0, "CPU", free_a, 16 * GiB),
            Device("node-b", "beta", "127.0.0.1:50102", 0, "CPU", free_b, 16 * GiB)]


@pytest.fixture
def editor(qtbot, model):
    ed = SplitEditor()
    qtbot.addWidget(ed)
    ed.resize(900, 500)
    ed.set_engine("/opt/llama/llama-server")
    ed.set_cluster(model, _devices(), host_free_bytes=8 * GiB)
    ed.show()
    qtbot.waitExposed(ed)
    return ed


def _flag(cmd: str, name: str) -> str:
    m = re.search(rf"(?:^| ){re.escape(name)} (\S+)", cmd)
    return m.group(1) if m else ""


def _drag(qtbot, bar, start, end):
    qtbot.mousePress(bar, Qt.MouseButton.LeftButton, pos=start)
    # several steps, as a real drag sends
    for k in range(1, 6):
        p = QPoint(start.x() + (end.x() - start.x()) * k // 5, start.y())
        qtbot.mouseMove(bar, p)
    qtbot.mouseRelease(bar, Qt.MouseButton.LeftButton, pos=end)


def test_default_is_by_memory_and_command_is_exact(editor, model):
    plan = editor.plan()
    # equal free memory: every slot offloaded, split evenly, in the layer map's own rounding
    assert plan.host_layers == 0
    assert plan.counts() == [layer_map(model.n_layer, model.n_layer + 1, [1, 1]).count(k) for k in (0, 1)]
    cmd = editor.command.toPlainText()
    assert cmd.startswith("/opt/llama/llama-server -m ")
    assert _flag(cmd, "--rpc") == "127.0.0.1:50101,127.0.0.1:50102"
    assert _flag(cmd, "-ngl") == str(model.n_layer + 1)
    assert _flag(cmd, "-ts") == ",".join(map(str, plan.counts()))
    assert "--fit off" in cmd


def test_drag_handle_moves_layers_and_command_follows(qtbot, editor, model):
    bar = editor.bar
    n = model.n_layer + 1
    before = editor.plan().counts()
    # handle 1 sits between alpha and beta; drag it two slots to the right
    start = bar.handle_pos(1).toPoint()
    end = QPoint(round(bar.slot_x(bar.handle_slot(1) + 2)), start.y())
    _drag(qtbot, bar, start, end)
    after = editor.plan().counts()
    assert after == [before[0] + 2, before[1] - 2]
    cmd = editor.command.toPlainText()
    assert _flag(cmd, "-ts") == f"{after[0]},{after[1]}"
    # the table shows the new slot counts, host first
    assert [editor.table.item(r, 2).text() for r in range(3)] == ["0", str(after[0]), str(after[1])]
    # drag the host handle right: the host keeps the first three slots, -ngl drops
    start = bar.handle_pos(0).toPoint()
    end = QPoint(round(bar.slot_x(3)), start.y())
    _drag(qtbot, bar, start, end)
    plan = editor.plan()
    assert plan.host_layers == 3
    assert _flag(editor.command.toPlainText(), "-ngl") == str(n - 3)
    # llama.cpp's own layer map of the shown flags gives back exactly the plan's slots
    ts = [int(x) for x in _flag(editor.command.toPlainText(), "-ts").split(",")]
    assert layer_map(model.n_layer, n - 3, ts) == plan.layer_map()


def test_keyboard_and_undo(qtbot, editor):
    bar = editor.bar
    bar.setFocus()
    bar.set_focused_handle(1)
    before = editor.plan().counts()
    qtbot.keyClick(bar, Qt.Key.Key_Left)
    qtbot.keyClick(bar, Qt.Key.Key_Left)
    assert editor.plan().counts() == [before[0] - 2, before[1] + 2]
    qtbot.keyClick(editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert editor.plan().counts() == [before[0] - 1, before[1] + 1]
    editor.undo()
    assert editor.plan().counts() == before
    assert not editor.can_undo()
    editor.redo()
    assert editor.plan().counts() == [before[0] - 1, before[1] + 1]


def test_plan_that_does_not_fit_is_red_with_shortfall(qtbot, editor, model):
    # beta has almost no free memory: by-memory keeps it small, so force layers onto it by hand
    editor.set_cluster(model, _devices(free_b=2 << 20), host_free_bytes=8 * GiB, keep_split=False)
    n = model.n_layer + 1
    assert editor.set_counts(0, [1, n - 1])
    problems = editor.problems()
    assert len(problems) == 1 and "beta" in problems[0] and "short by" in problems[0]
    row = next(r for r in range(editor.table.rowCount()) if editor.table.item(r, 1).text().startswith("beta"))
    assert editor.table.item(row, 6).text().startswith("short by")
    assert editor.table.item(row, 6).foreground().color() == BAD
    assert "short by" in editor.summary.text()
    # By memory fixes it
    editor.reset_by_memory()
    assert editor.problems() == []


def test_leave_node_out_and_reorder(qtbot, editor, model):
    n = model.n_layer + 1
    beta_row = next(r for r in range(editor.table.rowCount()) if editor.table.item(r, 1).text().startswith("beta"))
    editor.table.item(beta_row, 0).setCheckState(Qt.CheckState.Unchecked)
    plan = editor.plan()
    assert [d.node_name for d in plan.devices()] == ["alpha"] and plan.counts() == [n]
    assert _flag(editor.command.toPlainText(), "--rpc") == "127.0.0.1:50101"
    editor.undo()
    assert [d.node_name for d in editor.plan().devices()] == ["alpha", "beta"]
    # drag beta's segment onto alpha's: beta becomes RPC0
    bar = editor.bar
    _drag(qtbot, bar, bar.segment_center(2).toPoint(), bar.segment_center(1).toPoint())
    assert [d.node_name for d in editor.plan().devices()] == ["beta", "alpha"]
    assert _flag(editor.command.toPlainText(), "--rpc") == "127.0.0.1:50102,127.0.0.1:50101"
