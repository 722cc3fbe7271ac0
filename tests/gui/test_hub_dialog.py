"""The *Get model* dialog end to end: a local hub on 127.0.0.1 set as the hub address (the
setting a user in China fills with a mirror), two real demo agents paired; search, see the fit
and speed columns, take the suggested (largest fitting) quant, download it, and launch it on
both agents with the placement verified."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest
from cluster.hub_server import HubServer, Repo, demo_repo_files
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from gui.cluster.planning.measure import (
    ComputeMeasurement,
    LinkMeasurement,
    MeasurementCache,
    NodeMeasurement,
    default_cache_dir,
)

pytestmark = [pytest.mark.engine, pytest.mark.slow]

REPO = "herd-test/Tiny-GGUF"


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    return demo_repo_files(tmp_path_factory.mktemp("hub-src"))


@pytest.fixture
def hub(sources):
    with HubServer({REPO: Repo(dict(sources), downloads=7), "other/Big-GGUF": Repo({})}) as srv:
        yield srv


def _pair(qtbot, win, agents) -> dict[str, str]:
    ours = {a.address for a in agents.agents}
    for a in agents.agents:
        win.add_node(a.address)
    qtbot.waitUntil(lambda: sorted(n.name for n in win.node_map.values()
                                   if f"{n.host}:{n.api_port}" in ours) == ["demo-a", "demo-b"], timeout=20000)
    ids = {n.name: n.id for n in win.node_map.values() if f"{n.host}:{n.api_port}" in ours}
    for a in agents.agents:
        win.pair_node(ids[a.name], a.pin)
    qtbot.waitUntil(lambda: all(i in win.node_status for i in ids.values())
                    and len(win.planned_devices()) >= 2, timeout=15000)
    return ids


def _measured(ids: dict[str, str], devices) -> None:
    """Node speeds in the measurement cache, as the Fastest button leaves them (taken on
    another model: the dialog scales them to each file's layers)."""
    cache = MeasurementCache(default_cache_dir())
    eps = {d.node_id: d.endpoint for d in devices}
    for node, spb in ((ids["demo-a"], 2e-10), (ids["demo-b"], 2e-10), ("master", 1e-9)):
        ep = eps.get(node)
        compute = ComputeMeasurement(ep, 0.01, (0.01,), 0.0, spb, (0.001,) * 9, 24)
        link = None if ep is None else LinkMeasurement(ep, 0.0002, (0.0002,), 1e9)
        cache.put(NodeMeasurement(node, "another-model", compute, link, measured_at=time.time()))


def test_search_fit_download_and_verified_launch(qtbot, make_window, agents, hub, sources, tmp_path):
    models = tmp_path / "models"
    win = make_window(browse=False, **{"hub/models_dir": str(models)})
    ids = _pair(qtbot, win, agents)
    win.editor.ctx.setValue(512)

    qtbot.mouseClick(win.model_panel.hub_button, Qt.MouseButton.LeftButton)
    dlg = win.models.hub_dialog
    assert dlg.isVisible()
    # the hub address is offered with the reason to change it
    assert any("mirror" in w.text() for w in dlg.findChildren(QLabel))
    dlg.endpoint.setText(hub.url)
    dlg.query.setText("tiny")
    qtbot.mouseClick(dlg.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dlg.results.count() == 1, timeout=20000)
    assert win.settings.get("hub/endpoint") == hub.url  # remembered for next time
    assert dlg.results.item(0).text().startswith(REPO)

    assert dlg.results.item(0).text() == f"{REPO} — 7 downloads"

    # first without measurements: the speed column says so. While the headers are read the
    # dialog says which file, n of m (what it tells the dialog is recorded here: on loopback
    # the words may change faster than a test can look).
    told = []
    dlg.session.reading.connect(lambda p: told.append((p, dlg.status.text(), dlg.progress.value())))
    item = dlg.results.item(0)
    rect = dlg.results.visualItemRect(item)
    qtbot.mouseClick(dlg.results.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: dlg.table.rowCount() == 4, timeout=30000)
    assert len(told) == 8 and {p.total for p, _, _ in told} == {4}
    assert [p.done for p, _, _ in told][-1] == 4 and max(p.started for p, _, _ in told) == 4
    first, words, _ = told[0]
    assert words == f"Reading the header of {first.file} (file 1 of 4)…", words
    assert {p.file for p, _, _ in told} == {m.first.name for m in dlg.session.files.models}
    for p, words, _ in told:  # the words name a file being read, never one just finished
        if not p.finished:
            assert words == f"Reading the header of {p.file} (file {p.started} of 4)…", words
    bars = [bar for _, _, bar in told]
    assert bars == sorted(bars) and bars[-1] == 1000  # the bar fills file by file
    assert dlg.progress.isHidden()  # and goes once the list is there
    col = {name: i for i, name in enumerate(("file", "quant", "size", "fits", "split", "speed"))}

    def cells(c: str) -> list[str]:
        return [dlg.table.item(r, col[c]).text() for r in range(dlg.table.rowCount())]

    assert cells("fits") == ["fits"] * 4
    assert cells("speed") == ["not measured yet"] * 4
    assert all("demo-a=" in s and "demo-b=" in s for s in cells("split"))
    assert "demo-a" in dlg.fit_note.text() and "demo-b" in dlg.fit_note.text()

    # with the nodes' speeds cached, the same listing predicts tokens/s per file
    _measured(ids, win.planned_devices())
    dlg.repoChosen.emit(REPO, dlg.ctx.value())
    qtbot.waitUntil(lambda: dlg.table.rowCount() == 4 and dlg.table.item(0, col["speed"]) is not None
                    and "tok/s" in dlg.table.item(0, col["speed"]).text(), timeout=30000)
    speeds = {dlg.table.item(r, col["quant"]).text(): dlg.table.item(r, col["speed"]).text()
              for r in range(4) if "files" not in dlg.table.item(r, col["file"]).text()}
    rate = {q: float(s.split()[1]) for q, s in speeds.items()}
    assert rate["Q4_K_M"] > rate["Q8_0"] > rate["F16"] > 0

    # the suggestion: the largest file that fits, marked and selected
    row = dlg.selected_row()
    assert row == dlg.suggested and dlg.table.item(row, col["file"]).text() == "★ Tiny-F16.gguf"
    assert dlg.table.item(row, col["quant"]).text() == "F16"
    assert dlg.download_button.isEnabled()
    qtbot.mouseClick(dlg.download_button, Qt.MouseButton.LeftButton)
    path = models / "Tiny-F16.gguf"
    qtbot.waitUntil(lambda: win.model is not None and win.model.path == path, timeout=60000)
    assert dlg.status.text().startswith("✔ Downloaded and verified")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(
        sources["Tiny-F16.gguf"].read_bytes()).hexdigest()
    assert not (models / ".herd-downloads").exists()
    dlg.close()

    # the split editor has it over both agents; Start reaches a verified placement
    qtbot.waitUntil(lambda: win.editor.plan() is not None and len(win.editor.plan().devices()) == 2,
                    timeout=10000)
    win.editor.ctx.setValue(512)
    qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.launch.state in ("ready", "failed"), timeout=120000)
    assert win.launch.state == "ready", win.launch.status.text()
    assert win.launch.verified.text().startswith("✔"), win.launch.verified.text()


def test_cancel_keeps_nothing_where_models_are_and_resumes(qtbot, make_window, hub, tmp_path):
    models = tmp_path / "models"
    win = make_window(browse=False, **{"hub/models_dir": str(models), "hub/endpoint": hub.url})
    qtbot.mouseClick(win.model_panel.hub_button, Qt.MouseButton.LeftButton)
    dlg = win.models.hub_dialog
    assert dlg.endpoint.text() == hub.url
    dlg.repo = REPO
    dlg.repoChosen.emit(REPO, 512)
    qtbot.waitUntil(lambda: dlg.table.rowCount() == 4, timeout=30000)
    row = next(r for r in range(4) if dlg.table.item(r, 1).text() == "F16")
    dlg.table.selectRow(row)
    # the hub holds the body back after the library's first 10 MiB chunk has arrived
    from huggingface_hub import constants
    hub.pause_after = constants.DOWNLOAD_CHUNK_SIZE + 1
    hub.chunk_pause.clear()
    qtbot.mouseClick(dlg.download_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dlg.cancel_button.isEnabled() and dlg.progress.value() > 0, timeout=20000)
    assert "Downloading Tiny-F16.gguf" in dlg.status.text() and "MB/s" in dlg.status.text()
    qtbot.mouseClick(dlg.cancel_button, Qt.MouseButton.LeftButton)
    hub.chunk_pause.set()
    qtbot.waitUntil(lambda: not dlg.downloading, timeout=30000)
    assert "Download stopped" in dlg.status.text()
    assert list(models.glob("*.gguf")) == [] and win.model is None
    partial, = (models / ".herd-downloads").glob("Tiny-F16.gguf.*.part")
    assert partial.stat().st_size == constants.DOWNLOAD_CHUNK_SIZE
    # again: only the rest is asked for, and the model opens
    hub.requests.clear()
    qtbot.mouseClick(dlg.download_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.model is not None, timeout=60000)
    assert [r.range for r in hub.file_requests("Tiny-F16.gguf")] == [f"bytes={constants.DOWNLOAD_CHUNK_SIZE}-"]
    assert win.model.path == models / "Tiny-F16.gguf"


def test_closing_the_window_stops_a_running_download(qtbot, make_window, hub, tmp_path):
    """The bridge cancels every call when the window closes: the download thread is told to stop
    too, instead of going on behind the closed app; nothing lands where models are looked for."""
    models = tmp_path / "models"
    win = make_window(browse=False, **{"hub/models_dir": str(models), "hub/endpoint": hub.url})
    qtbot.mouseClick(win.model_panel.hub_button, Qt.MouseButton.LeftButton)
    dlg = win.models.hub_dialog
    dlg.repo = REPO
    dlg.repoChosen.emit(REPO, 512)
    qtbot.waitUntil(lambda: dlg.table.rowCount() == 4, timeout=30000)
    row = next(r for r in range(4) if dlg.table.item(r, 1).text() == "F16")
    hub.chunk_pause.clear()
    call = dlg.session.download(row)
    stop = dlg.session._cancel
    # the body's request (the listing's ranged header reads came before)
    qtbot.waitUntil(lambda: any(r.range is None for r in hub.file_requests("Tiny-F16.gguf")), timeout=10000)
    with qtbot.waitSignal(call.done, timeout=10000):
        call.cancel()  # what AsyncBridge.close does to every running call
    # the call reports done as soon as its future is cancelled; the loop then cancels the task
    qtbot.waitUntil(stop.is_set, timeout=5000)
    hub.chunk_pause.set()
    assert list(models.glob("*.gguf")) == []


def test_the_count_of_downloads_reads_right_for_one_and_many(qtbot):
    from gui.cluster.models.hub import HeaderProgress, RepoHit
    from gui.widgets.hub_dialog import HubDialog

    dlg = HubDialog(None, endpoint="", ctx=512, models_dir="/tmp/models")
    qtbot.addWidget(dlg)
    dlg.show_hits([RepoHit("a/One", downloads=1), RepoHit("b/Many", downloads=1234), RepoHit("c/None")])
    assert [dlg.results.item(i).text() for i in range(3)] == [
        "a/One — 1 download", "b/Many — 1,234 downloads", "c/None — 0 downloads"]
    dlg.show_reading(HeaderProgress("Big-Q4_K_M.gguf", 2, 1, 4))
    assert dlg.status.text() == "Reading the header of Big-Q4_K_M.gguf (file 2 of 4)…"
    assert dlg.progress.isVisibleTo(dlg) and dlg.progress.value() == 250
