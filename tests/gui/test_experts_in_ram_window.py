"""Experts in RAM in the window, as a person goes there: the gaming PC's worker is already
running (started from its card), the person opens a mixture-of-experts model, puts every layer
on the GPU, ticks "in RAM" on the GPU's row and presses Start. The launch is verified. Real
agent, real worker (the GPU is Mesa's software Vulkan device, see tests/e2e/test_gpu_worker.py),
real llama-server, real widgets.

A worker that is already running is started afresh before its CPU device takes the GPU's
experts: a Vulkan ``ggml-rpc-server`` that served whole layers dies of heap corruption when the
next llama-server puts experts on its CPU device (build 11434, lavapipe;
``bench/experts_traffic.py`` starts a new worker per placement for that reason).
"""

from __future__ import annotations

import os

import pytest
from cluster.agents import start_agent
from e2e.gpu import GPU_ENV, vulkan_engine  # noqa: F401  (the fixture)
from e2e.herd_cli import rpc_children
from PySide6.QtCore import Qt

from gui.cluster.llama.random_model import DemoShape, write_demo_model
from gui.cluster.llama.server_command import ServerOptions

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def test_a_running_gpu_worker_is_started_afresh_for_experts_in_ram(qtbot, make_window, procs, tmp_path,
                                                                   vulkan_engine):  # noqa: F811
    gaming = start_agent(lambda argv, **kw: procs.popen(argv, env=dict(os.environ, **GPU_ENV), **kw),
                         tmp_path, "gaming", mdns=False, extra=["--backend", "vulkan"])
    model = write_demo_model(tmp_path / "moe.gguf", DemoShape(
        arch="qwen3moe", layers=8, embd=256, ff=512, experts=8, experts_used=2, expert_ff=256,
        kv_heads=2, quant="Q4_K_M", tied=True))
    win = make_window(browse=False)
    win.add_node(gaming.api_url.removeprefix("https://"))
    qtbot.waitUntil(lambda: any(n.name == "gaming" for n in win.node_map.values()), timeout=20000)
    nid = next(n.id for n in win.node_map.values() if n.name == "gaming")
    win.pair_node(nid, gaming.pin())
    qtbot.waitUntil(lambda: nid in win.node_status, timeout=15000)

    # the worker runs before the launch (its card's button), as a user may leave it
    card = win.nodes.cards[nid]
    qtbot.mouseClick(card.worker_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: (win.node_status[nid].get("rpc") or {}).get("state") == "ready", timeout=30000)
    [before] = rpc_children(gaming.proc.pid)

    assert win.open_model(str(model))
    qtbot.waitUntil(lambda: win.editor.plan() is not None and len(win.editor.plan().devices()) == 2, timeout=15000)
    win.editor.ctx.setValue(512)
    # Mesa's software GPU crashes in flash attention at this build (see test_gpu_worker.py).
    win.editor.set_options(ServerOptions(extra_args=("-fa", "off")))
    assert win.editor.set_counts(0, [win.model.n_slots, 0])  # every slot on the GPU
    t = win.editor.table
    gpu_row = next(r for r in range(t.rowCount()) if t.item(r, 1).text().startswith("gaming Vulkan0"))
    t.item(gpu_row, win.editor.EXPERTS_COLUMN).setCheckState(Qt.CheckState.Checked)
    assert win.editor.plan().expert_homes, "ticking did not keep the GPU's experts in RAM"
    assert "-ot" in win.editor.command_line()

    qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.launch.state in ("ready", "failed"), timeout=240000)
    assert win.launch.state == "ready", win.launch.status.text()
    assert win.launch.verified.text().startswith("✔"), win.launch.verified.text()
    [serving] = rpc_children(gaming.proc.pid)
    assert serving != before, "the running worker was not started afresh"
    qtbot.mouseClick(win.launch.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.launch.state == "stopped", timeout=30000)
    assert rpc_children(gaming.proc.pid) == [serving]  # not the launch's to stop: it was running before
