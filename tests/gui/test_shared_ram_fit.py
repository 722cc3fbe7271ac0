"""The demo's three devices are one PC: with a context whose cache each could hold alone but not
all three together, the split editor does not claim "Everything fits" (the host and the two
loopback agents share this computer's RAM). Real agents on loopback, paired."""

from __future__ import annotations

import pytest

from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.random_model import DemoShape, write_demo_model
from gui.cluster.planning.devices import host_free_bytes

pytestmark = pytest.mark.engine

LAYERS = 9  # 10 slots: the host 4, each agent 3


def test_three_devices_of_one_pc_are_not_all_said_to_fit(qtbot, make_window, agents, demo_model, tmp_path):
    win = make_window(browse=False)
    for a in agents.agents:
        win.add_node(a.address)
    ours = {a.address for a in agents.agents}
    qtbot.waitUntil(lambda: len([n for n in win.node_map.values() if f"{n.host}:{n.api_port}" in ours]) == 2,
                    timeout=20000)
    ids = {n.name: n.id for n in win.node_map.values() if f"{n.host}:{n.api_port}" in ours}
    for a in agents.agents:
        win.pair_node(ids[a.name], a.pin)
    qtbot.waitUntil(lambda: len(win.planned_devices()) >= 2 and all(i in win.node_status for i in ids.values()),
                    timeout=15000)

    # a model whose whole cache, at the context chosen, is 1.5 times the RAM free now: a third
    # of it (or four ninths on the host) fits in that RAM, all of it does not
    like = inspect_model(demo_model)
    path = write_demo_model(tmp_path / "long.gguf", DemoShape(layers=LAYERS, embd=like.embedding_length, ff=32))
    info = inspect_model(path)
    ctx = int(1.5 * host_free_bytes() / LAYERS / (info.kv_bytes_per_layer(256) / 256))  # per token (padded to 256)
    assert ctx <= win.editor.ctx.maximum()
    assert win.open_model(str(path))
    qtbot.waitUntil(lambda: win.editor.plan() is not None and len(win.editor.plan().devices()) == 2, timeout=10000)
    win.editor.ctx.setValue(ctx)
    assert win.editor.set_counts(4, [3, 3])
    # the cache is not quite linear in the context (cells are padded, per sequence): scale once
    total = sum(f.need_bytes for f in win.editor.split.fits)
    win.editor.ctx.setValue(int(ctx * 1.5 * host_free_bytes() / total))
    fits = win.editor.split.fits
    assert [len(f.slots) for f in fits] == [3, 3, 4]
    assert all(f.need_bytes < f.free_bytes for f in fits), [(f.need_bytes, f.free_bytes) for f in fits]
    problems = win.editor.problems()
    assert problems and "Everything fits" not in win.editor.summary.text(), win.editor.summary.text()
    assert any("other devices on the same computer" in p for p in problems), problems
