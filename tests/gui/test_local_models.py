"""The model panel lists the models already on this PC; a click opens one.

HOME points at a temporary folder holding an LM Studio-style tree of real small GGUF files (and
herd's own models folder, through the setting), so the window finds what a person with LM Studio
would have, and nothing of this machine's own.
"""

from __future__ import annotations

import os
import shutil

from PySide6.QtCore import Qt

from gui.cluster.llama.random_model import DemoShape, write_demo_model


def lm_studio_home(tmp_path, demo_model):
    """A home with two LM Studio models (one split in two files), a vision projector beside one,
    and a file far larger than any PC's memory (sparse: it takes no disk)."""
    home = tmp_path / "home"
    models = home / ".lmstudio" / "models" / "lmstudio-community"
    qwen = write_demo_model(models / "Tiny-GGUF" / "tiny-Q8_0.gguf", DemoShape(layers=2))
    (models / "Tiny-GGUF" / "mmproj-tiny-f16.gguf").write_bytes(qwen.read_bytes())
    split = models / "Split-GGUF"
    split.mkdir(parents=True)
    for part in (1, 2):
        shutil.copyfile(demo_model, split / f"split-0000{part}-of-00002.gguf")
    huge = models / "Huge-GGUF" / "huge-Q4_K_M.gguf"
    huge.parent.mkdir(parents=True)
    with open(huge, "wb") as f:
        f.truncate(4 << 40)  # 4.4 TB: no PC this runs on has that free
    return home, qwen, split / "split-00001-of-00002.gguf", huge


def test_models_on_this_pc_are_listed_with_sizes_and_one_opens_with_a_click(qtbot, make_window, tmp_path,
                                                                            demo_model, monkeypatch):
    home, tiny, _split, _huge = lm_studio_home(tmp_path, demo_model)
    monkeypatch.setenv("HOME", str(home))
    for var in ("LLAMA_CACHE", "HF_HOME", "HF_HUB_CACHE"):  # this machine's caches stay out
        monkeypatch.delenv(var, raising=False)
    herd_models = tmp_path / "herd-models"
    own = write_demo_model(herd_models / "own.gguf", DemoShape(layers=1))
    win = make_window(browse=False, **{"hub/models_dir": str(herd_models)})
    panel = win.model_panel
    qtbot.waitUntil(lambda: panel.local.isVisible() and panel.local.topLevelItemCount() > 0, timeout=10000)

    rows = {panel.local.topLevelItem(i).text(0): [panel.local.topLevelItem(i).text(c) for c in range(1, 4)]
            for i in range(panel.local.topLevelItemCount())}
    # herd's own, then LM Studio's; no projector, the split model once
    assert list(rows) == ["own.gguf", "huge-Q4_K_M.gguf", "split-00001-of-00002.gguf", "tiny-Q8_0.gguf"]
    assert rows["own.gguf"][1] == "herd"
    assert {rows[n][1] for n in list(rows)[1:]} == {"LM Studio"}
    assert rows["tiny-Q8_0.gguf"][0] == f"{tiny.stat().st_size / 1e6:.1f} MB"
    assert rows["split-00001-of-00002.gguf"][0] == f"{2 * demo_model.stat().st_size / 1e6:.1f} MB in 2 files"
    assert rows["huge-Q4_K_M.gguf"][0] == "4398.0 GB"
    assert rows["huge-Q4_K_M.gguf"][2].startswith("needs about ") and rows["huge-Q4_K_M.gguf"][2].endswith(" GB more")
    assert rows["tiny-Q8_0.gguf"][2] == "fits by size"

    # a click on the entry, as a person does, opens it (read off the GUI thread)
    item = next(panel.local.topLevelItem(i) for i in range(panel.local.topLevelItemCount())
                if panel.local.topLevelItem(i).text(0) == "tiny-Q8_0.gguf")
    rect = panel.local.visualItemRect(item)
    qtbot.mouseClick(panel.local.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: win.model is not None, timeout=30000)
    assert os.path.samefile(win.model.path, tiny)
    assert "tiny" in panel.info.text()
    # now a recent file as well: listed once, as recent, first
    qtbot.waitUntil(lambda: panel.local.topLevelItem(0).text(0) == "tiny-Q8_0.gguf", timeout=10000)
    assert panel.local_paths().count(str(tiny)) == 1
    assert own.exists()


def test_the_fit_follows_the_memory_the_cluster_can_use(qtbot, tmp_path):
    from gui.cluster.models.local import LM_STUDIO, LocalModel
    from gui.cluster.planning.plan import Device
    from gui.widgets.model_panel import FIT, ModelPanel

    panel = ModelPanel()
    qtbot.addWidget(panel)
    gb = 10 ** 9
    panel.set_local_models([LocalModel(tmp_path / "m.gguf", "m.gguf", 6 * gb, LM_STUDIO)])
    panel.set_capacity([], 4 * gb)
    assert panel.local.topLevelItem(0).text(FIT) == "needs about 2.0 GB more"
    # a node with 3 GB free joins (another computer: its RAM adds to this PC's)
    node = Device(node_id="n", node_name="n", endpoint="10.0.0.2:50052", index=0, name="CPU",
                  free_bytes=3 * gb, total_bytes=8 * gb, machine="10.0.0.2")
    panel.set_capacity([node], 4 * gb)
    assert panel.local.topLevelItem(0).text(FIT) == "fits by size"
    # and leaves again
    panel.set_capacity([], 4 * gb)
    assert panel.local.topLevelItem(0).text(FIT) == "needs about 2.0 GB more"
