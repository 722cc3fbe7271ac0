"""The app's *Fastest* on a CPU where llama.cpp's weight repacking crashes llama-server (Intel AMX).

The crash is real on such CPUs; here the stand-in of ``tests/repack_crash.py`` delivers it around
the real llama-server, as the real one fails. The window runs with that engine; the agents are
real, the models real quantized files (Q4_K_M and Q4_1).
"""

from __future__ import annotations

import pytest
from conftest import _engine
from PySide6.QtCore import Qt
from repack_crash import crashes, crashing_engine

from gui.cluster.llama import repack_probe
from gui.cluster.llama.random_model import DemoShape, write_demo_model

pytestmark = pytest.mark.engine


@pytest.fixture
def engine(tmp_path):
    """The window's engine: the stand-in for a CPU where repacking crashes."""
    return crashing_engine(tmp_path / "engine", _engine()[0])


@pytest.mark.parametrize("quant", ["Q4_K_M", "Q4_1"])
def test_fastest_measures_and_applies_a_plan_where_repacking_crashes(qtbot, make_window, agents, engine,
                                                                    tmp_path, quant):
    model = write_demo_model(tmp_path / f"{quant}.gguf", DemoShape(layers=8, embd=256, ff=768, quant=quant))
    win = make_window()
    ours = {a.address for a in agents.agents}
    for a in agents.agents:
        win.add_node(a.address)
    qtbot.waitUntil(lambda: sorted(n.name for n in win.node_map.values()
                                   if f"{n.host}:{n.api_port}" in ours) == ["demo-a", "demo-b"], timeout=20000)
    ids = {n.name: n.id for n in win.node_map.values() if f"{n.host}:{n.api_port}" in ours}
    for a in agents.agents:
        win.pair_node(ids[a.name], a.pin)
    qtbot.waitUntil(lambda: all(i in win.node_status for i in ids.values()), timeout=15000)
    assert win.open_model(str(model))
    qtbot.waitUntil(lambda: win.editor.plan() is not None and len(win.editor.plan().devices()) == 2, timeout=10000)
    qtbot.mouseClick(win.editor.fastest_button, Qt.MouseButton.LeftButton)
    with qtbot.waitSignal(win.launch_flow.fastest_call.done, timeout=300000):
        pass
    assert not win.launch_flow.fastest_call.future.exception(), win.editor.summary.text()
    plan = win.launch_flow.fastest_call.future.result()
    assert plan is not None and win.editor.plan() == plan and win.editor.problems() == []
    assert win.editor.note.text().startswith("Predicted: "), win.editor.note.text()
    # the probe's crashes, once per type, and none while measuring
    assert len(crashes(engine)) == len(repack_probe.PROBE_QUANTS)
    assert repack_probe.load_verdict(engine.llama_server).needs_no_repack
