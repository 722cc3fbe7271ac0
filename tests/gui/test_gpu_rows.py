"""The window with a GPU worker: the gaming PC's GPU and CPU are two rows of the split editor,
in llama.cpp's device order, and Start runs its worker with both (``-d Vulkan0,CPU``) and
verifies the placement — real agents, real workers (the GPU is Mesa's software Vulkan device,
see tests/e2e/test_gpu_worker.py), real llama-server, real widgets.
"""

from __future__ import annotations

import os

import pytest
from cluster.agents import start_agent
from e2e.gpu import GPU_ENV, vulkan_engine  # noqa: F401  (the fixture)
from e2e.herd_cli import rpc_children
from PySide6.QtCore import Qt

from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.llama.random_model import DemoShape, write_demo_model

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def test_gpu_and_cpu_rows_and_a_verified_start(qtbot, make_window, procs, tmp_path, vulkan_engine):  # noqa: F811
    gaming = start_agent(lambda argv, **kw: procs.popen(argv, env=dict(os.environ, **GPU_ENV), **kw),
                         tmp_path, "gaming", mdns=False, extra=["--backend", "vulkan"])
    old = start_agent(procs.popen, tmp_path, "old", mdns=False)
    model = write_demo_model(tmp_path / "m.gguf", DemoShape(layers=8, embd=256, ff=704, kv_heads=2, quant="Q8_0"))
    win = make_window(browse=False)
    for a in (gaming, old):
        win.add_node(a.api_url.removeprefix("https://"))
    qtbot.waitUntil(lambda: {n.name for n in win.node_map.values()} >= {"gaming", "old"}, timeout=20000)
    ids = {n.name: n.id for n in win.node_map.values()}
    win.pair_node(ids["gaming"], gaming.pin())
    win.pair_node(ids["old"], old.pin())
    qtbot.waitUntil(lambda: ids["gaming"] in win.node_status and ids["old"] in win.node_status, timeout=15000)
    assert win.open_model(str(model))
    qtbot.waitUntil(lambda: win.editor.plan() is not None and len(win.editor.plan().devices()) == 3, timeout=15000)

    # One row per device: the host, then the GPU and CPU of the gaming PC, then the old PC.
    table = win.editor.table
    labels = [table.item(r, 1).text().split("  (")[0] for r in range(table.rowCount())]
    assert labels[1:] == ["gaming Vulkan0", "gaming CPU", "old CPU"], labels
    assert [(d.name, d.index) for d in win.editor.plan().devices()] == [("Vulkan0", 0), ("CPU", 1), ("CPU", 0)]

    win.editor.ctx.setValue(512)
    # Mesa's software GPU crashes in flash attention at this build (see test_gpu_worker.py).
    win.editor.set_options(ServerOptions(extra_args=("-fa", "off")))
    qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.launch.state in ("ready", "failed"), timeout=180000)
    assert win.launch.state == "ready", win.launch.status.text()
    assert win.launch.verified.text().startswith("✔"), win.launch.verified.text()
    [worker] = rpc_children(gaming.proc.pid)
    with open(f"/proc/{worker}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    assert argv[argv.index(b"-d") + 1] == b"Vulkan0,CPU"
    qtbot.mouseClick(win.launch.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.launch.state == "stopped", timeout=30000)


def test_leaving_out_one_device_of_a_gpu_worker_gives_it_no_slot(qtbot, demo_model):
    # A worker's devices are numbered together (-d Vulkan0,CPU), so the GPU left out stays in
    # the plan with no slot rather than making a plan llama.cpp would number differently.
    from gui.cluster.llama.model import inspect_model
    from gui.cluster.planning.plan import Device
    from gui.widgets.split_editor import SplitEditor

    gib = 1 << 30
    devs = [Device("g", "gaming", "10.0.0.2:50052", 0, "Vulkan0", 2 * gib, 2 * gib),
            Device("g", "gaming", "10.0.0.2:50052", 1, "CPU", 8 * gib, 8 * gib),
            Device("o", "old", "10.0.0.3:50052", 0, "CPU", 8 * gib, 8 * gib)]
    ed = SplitEditor()
    qtbot.addWidget(ed)
    ed.set_cluster(inspect_model(demo_model), devs, 8 * gib)
    assert ed.plan().counts()[0] > 0
    row = next(r for r in range(ed.table.rowCount()) if ed.table.item(r, 1).text().startswith("gaming Vulkan0"))
    ed.table.item(row, 0).setCheckState(Qt.CheckState.Unchecked)  # what a click on its box does
    plan = ed.plan()
    assert [(d.name, d.index, c) for d, c in plan.assignments][0] == ("Vulkan0", 0, 0)
    assert sum(plan.counts()) == 9 and plan.counts()[1] > 0 and plan.counts()[2] > 0
    # Its row stays, unticked, once; ticking it again gives it slots again.
    rows = [ed.table.item(r, 1).text() for r in range(ed.table.rowCount())]
    assert sum(t.startswith("gaming Vulkan0") for t in rows) == 1
    row = next(r for r in range(ed.table.rowCount()) if ed.table.item(r, 1).text().startswith("gaming Vulkan0"))
    assert ed.table.item(row, 0).checkState() == Qt.CheckState.Unchecked
    ed.table.item(row, 0).setCheckState(Qt.CheckState.Checked)
    assert ed.plan().counts()[0] > 0
