"""The split editor's choice of what Fastest optimises, and both predicted figures it shows."""

from __future__ import annotations

from cluster.planning.test_optimize import make_model

from gui.cluster.planning.cost_model import DeviceSpeed, LinkSpeed, Measurements
from gui.cluster.planning.optimize import fastest
from gui.cluster.planning.plan import Device
from gui.widgets.split_editor import SplitEditor

GiB = 1 << 30


def test_the_editor_offers_chat_and_documents_and_shows_both_figures(qtbot):
    ed = SplitEditor()
    qtbot.addWidget(ed)
    assert [ed.fastest_for.itemData(i) for i in range(ed.fastest_for.count())] == ["chat", "documents"]
    assert ed.fastest_for.currentData() == "chat"
    model = make_model(4, embd=1024)
    dev = Device("a", "a", "10.0.0.2:50052", 0, "CPU", 8 * GiB, 8 * GiB)
    m = Measurements({"a": DeviceSpeed((0.01,) * 5, (0.0005,) * 5)}, {"a": LinkSpeed(0.001, 1e8)})
    result = fastest(model, [dev], m, ctx=1024, objective="documents")
    text = ed.predicted_text(result)
    assert text.startswith(f"Predicted: {result.cost.tokens_per_s:.1f} tokens/s decode.")
    assert f"A 512-token prompt: first token after {result.prompt.total_s:.2f} s." in text
    assert ed.predicted_text(None) == ""
