"""The split editor as a person uses it: redo, copy, the context box, units, colours, unticking a
node, the bar's slot lines, and the command line it shows."""

from __future__ import annotations

import pytest
from person import click
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication

from gui.cluster.llama.model import inspect_model
from gui.cluster.planning.plan import Device
from gui.widgets.node_colors import node_colors
from gui.widgets.split_editor import SplitEditor

GiB = 1 << 30


@pytest.fixture
def editor(qtbot, demo_model):
    ed = SplitEditor()
    qtbot.addWidget(ed)
    ed.resize(900, 500)
    ed.set_cluster(inspect_model(demo_model),
                   [Device("node-a", "alpha", "127.0.0.1:50101", 0, "CPU", 8 * GiB, 16 * GiB),
                    Device("node-b", "beta", "127.0.0.1:50102", 0, "CPU", 8 * GiB, 16 * GiB)],
                   host_free_bytes=8 * GiB)
    ed.show()
    qtbot.waitExposed(ed)
    return ed


def test_ctrl_y_redoes(qtbot, editor):
    bar = editor.bar
    before = editor.plan()
    bar.setFocus()
    qtbot.keyClick(bar, Qt.Key.Key_Right)
    edited = editor.plan()
    assert edited != before
    qtbot.keyClick(bar, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert editor.plan() == before
    qtbot.keyClick(bar, Qt.Key.Key_Y, Qt.KeyboardModifier.ControlModifier)
    assert editor.plan() == edited


def test_copy_says_it_copied(qtbot, editor):
    button = editor.copy_command_button
    own = button.text()
    click(qtbot, button)
    assert QGuiApplication.clipboard().text() == editor.command.toPlainText()
    assert button.text() == "Copied ✔"
    qtbot.waitUntil(lambda: button.text() == own, timeout=3000)


def test_a_huge_context_says_what_the_model_was_trained_for(qtbot, editor):
    editor.ctx.setFocus()
    editor.ctx.selectAll()
    qtbot.keyClicks(editor.ctx, "10000000")
    qtbot.keyClick(editor.ctx, Qt.Key.Key_Return)
    assert editor.ctx.value() == 10_000_000
    trained = editor.split.model.context_length
    text = editor.summary.text()
    # it does not fit (the KV cache) and says what to do; and it says the model's own context
    assert "Lower the context (now 10,000,000" in text, text
    assert f"larger than the {trained:,} the model was trained for" in text, text


def test_memory_in_gib_beside_gib(qtbot, editor):
    editor.ctx.setValue(1 << 20)  # a KV cache of several GiB on the host
    needs = [editor.table.item(r, 4).text() for r in range(editor.table.rowCount())]
    assert not any(n.endswith("MiB") and float(n.split()[0].replace(",", "")) >= 1024 for n in needs), needs


def test_node_colours_do_not_depend_on_the_order_nodes_appear():
    names = {f"id-{i}": f"pc-{i}" for i in range(8)}
    colors = node_colors(names)
    assert len(set(colors.values())) == 8  # as many colours as there are, none shared
    backwards = node_colors(dict(reversed(list(names.items()))))
    assert backwards == colors


def test_unticking_a_node_leaves_its_row_where_it_is(qtbot, editor):
    t = editor.table
    names = [t.item(r, 1).text() for r in range(t.rowCount())]
    row = next(r for r, n in enumerate(names) if n.startswith("alpha"))
    assert row < t.rowCount() - 1  # a row with another below it
    cell = t.visualItemRect(t.item(row, 0))
    # the check box sits at the left of the cell
    qtbot.mouseClick(t.viewport(), Qt.MouseButton.LeftButton, pos=cell.center() - QPoint(cell.width() // 2 - 10, 0))
    assert "node-a/0" in editor.split.excluded, "the click did not untick alpha"
    assert [t.item(r, 1).text().split()[0] for r in range(t.rowCount())] == [n.split()[0] for n in names]
    assert t.item(row, 0).checkState() == Qt.CheckState.Unchecked


def test_slot_lines_do_not_cross_a_segment_label(qtbot, editor):
    from PySide6.QtCore import QRectF

    bar = editor.bar
    n = bar.total_slots()
    label = QRectF(bar.slot_x(2) - 1, 0, bar.slot_x(4) - bar.slot_x(2) + 2, 10)
    xs = bar.separator_xs(0, n, label)
    assert len(xs) == n - 1 - 3  # boundaries 2, 3 and 4 fall under the label
    assert all(not (label.left() <= x <= label.right()) for x in xs)
    assert not bar.grab().isNull()  # and painting with it works


def test_the_command_line_never_breaks_inside_an_option(qtbot, editor):
    view = editor.command
    view.resize(260, 200)  # narrow: the command takes many lines
    qtbot.waitUntil(lambda: view.document().lineCount() > 3, timeout=3000)
    doc = view.document()
    lines = []
    block = doc.begin()
    while block.isValid():
        layout = block.layout()
        for i in range(layout.lineCount()):
            ln = layout.lineAt(i)
            lines.append(block.text()[ln.textStart():ln.textStart() + ln.textLength()].replace("\u2060", ""))
        block = block.next()
    assert len(lines) > 3
    # no line ends in the middle of "--fit" / "-ngl" (a hyphen with its name on the next line)
    assert not any(ln.rstrip().endswith("-") for ln in lines), lines
    # what is read and copied is the exact command, without the joiners
    assert view.toPlainText() == editor.command_line()
    view.selectAll()
    view.copy()
    assert QGuiApplication.clipboard().text() == editor.command_line()
