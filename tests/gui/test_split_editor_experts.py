"""Experts in RAM in the split editor: a person opens a mixture-of-experts model planned over a
gaming PC (its GPU and its CPU, two devices of one worker) and an old PC, ticks "in RAM" on the
GPU's row, and sees the GPU's need drop by the experts, the CPU row take them, the command line
gain ``-ot``; Undo takes it back. A dense model has no such column."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt

from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.random_model import DemoShape, write_demo_model
from gui.cluster.planning.plan import Device
from gui.widgets.split_editor import SplitEditor

GiB = 1 << 30
GAMING = "127.0.0.1:50201"


def devices():
    return [Device("gaming", "gaming", GAMING, 0, "Vulkan0", 6 * GiB, 8 * GiB, machine="gaming"),
            Device("gaming", "gaming", GAMING, 1, "CPU", 24 * GiB, 32 * GiB, machine="gaming"),
            Device("old", "old", "127.0.0.1:50202", 0, "CPU", 8 * GiB, 16 * GiB, machine="old")]


@pytest.fixture(scope="module")
def moe_model(tmp_path_factory):
    return write_demo_model(tmp_path_factory.mktemp("moe") / "moe.gguf", DemoShape(
        arch="qwen3moe", layers=6, embd=256, ff=512, experts=8, experts_used=2, expert_ff=256,
        kv_heads=2, quant="Q4_K_M", tied=True))


def _editor(qtbot, model_path) -> SplitEditor:
    ed = SplitEditor()
    qtbot.addWidget(ed)
    ed.resize(1000, 500)
    ed.set_cluster(inspect_model(model_path), devices(), host_free_bytes=8 * GiB)
    ed.show()
    qtbot.waitExposed(ed)
    return ed


def _row(ed: SplitEditor, label: str) -> int:
    t = ed.table
    return next(r for r in range(t.rowCount()) if t.item(r, 1).text().startswith(label))


def _needs(ed: SplitEditor) -> dict[str, int]:
    return {f.label: f.weights_bytes for f in ed.fits()}


def test_ticking_in_ram_moves_the_gpus_experts_to_its_pcs_cpu(qtbot, moe_model):
    ed = _editor(qtbot, moe_model)
    t = ed.table
    col = ed.EXPERTS_COLUMN
    assert not t.isColumnHidden(col)
    gpu_row, cpu_row, old_row = _row(ed, "gaming Vulkan0"), _row(ed, "gaming CPU"), _row(ed, "old CPU")
    # only the GPU can tick it; a CPU, or the other PC's CPU, cannot
    assert t.item(gpu_row, col).flags() & Qt.ItemFlag.ItemIsUserCheckable
    assert not t.item(old_row, col).flags() & Qt.ItemFlag.ItemIsUserCheckable
    assert not t.item(cpu_row, col).flags() & Qt.ItemFlag.ItemIsUserCheckable
    plan = ed.plan()
    assert plan.counts()[0] > 0, plan.describe()  # the GPU holds blocks (by memory)
    before = _needs(ed)
    assert "-ot" not in ed.command_line()

    cell = t.visualItemRect(t.item(gpu_row, col))
    qtbot.mouseClick(t.viewport(), Qt.MouseButton.LeftButton, pos=cell.center() - QPoint(cell.width() // 2 - 10, 0))
    assert ed.split.experts_in_ram == {"gaming/0"}, "the click did not tick the GPU's experts"
    after = _needs(ed)
    moved = before["gaming Vulkan0"] - after["gaming Vulkan0"]
    assert moved > 0 and after["gaming CPU"] - before["gaming CPU"] == moved
    assert t.item(_row(ed, "gaming CPU"), col).text().startswith("of layers ")
    assert "-ot" in ed.command_line() and "=RPC1[" + GAMING + "]" in ed.command_line()

    # a drag of the split keeps the choice; Undo takes the steps back one by one
    host, *counts = [ed.plan().host_layers, *ed.plan().counts()]
    assert ed.set_counts(host + 1, [counts[0] - 1, *counts[1:]])
    assert ed.plan().expert_homes and "-ot" in ed.command_line()
    ed.undo()
    ed.undo()
    assert not ed.plan().expert_homes and "-ot" not in ed.command_line()
    assert _needs(ed) == before


def test_a_dense_model_shows_no_experts_column(qtbot, tmp_path):
    dense = write_demo_model(tmp_path / "dense.gguf", DemoShape(layers=4, embd=128, ff=256))
    ed = _editor(qtbot, dense)
    assert ed.table.isColumnHidden(ed.EXPERTS_COLUMN)
    assert not ed.split.set_experts_in_ram("gaming/0", True)
