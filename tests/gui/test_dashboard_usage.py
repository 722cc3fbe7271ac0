"""*Who uses the cluster* on the dashboard (#34 item 6): the front door's counts per key, from a
real front door in front of a real llama-server with the SmolLM2 weights, shown as rows of the
dashboard's table (offscreen); and in the app, a program on this PC using the shared endpoint
appears there as *This PC*."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from PySide6.QtCore import Qt
from conftest import free_port, llama_server_process

from gui.cluster.nodes.telemetry import Sample
from gui.cluster.serving.api_keys import ApiKeyStore
from gui.cluster.serving.front_door import DoorSettings, FrontDoor
from gui.cluster.serving.usage import UsageSampler
from gui.widgets.dashboard import Dashboard

pytestmark = [pytest.mark.engine]

COLUMNS = ["Key", "Requests", "Tokens in", "Tokens out", "tok/s", "Waiting"]


def start_alone(qtbot, win, model) -> None:
    """Open ``model`` on this computer alone and press Start; wait until it serves."""
    assert win.open_model(str(model))
    qtbot.waitUntil(lambda: win.editor.plan() is not None, timeout=20000)
    win.editor.ctx.setValue(512)
    qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.launch.state in ("ready", "failed"), timeout=120000)
    assert win.launch.state == "ready", win.launch.status.text()


def chat(max_tokens: int) -> dict:
    return {"model": "any", "messages": [{"role": "user", "content": "Name a fruit."}],
            "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}


async def _use_the_door(upstream: str, folder) -> dict:
    """Two keys use a front door; returns its usage sample's values, as the app's sampler takes them."""
    door = FrontDoor(upstream, ApiKeyStore(folder / "api-keys.json"), port=free_port(),
                     settings=DoorSettings(require_key_on_loopback=True))
    await door.start()
    try:
        keys = {name: door.keys.add(name) for name in ("phone", "open-webui")}
        async with httpx.AsyncClient(base_url=door.urls[0], timeout=120) as c:
            for name, tokens in (("phone", 5), ("phone", 4), ("open-webui", 6)):
                r = await c.post("/v1/chat/completions", json=chat(tokens),
                                 headers={"Authorization": f"Bearer {keys[name]}"})
                assert r.status_code == 200, r.text
        return await UsageSampler(door.usage).sample()
    finally:
        await door.stop()


def test_the_dashboard_shows_who_uses_the_cluster(qtbot, engine, smollm2, tmp_path):
    d = Dashboard()
    qtbot.addWidget(d)
    assert d.usage.isHidden()  # nothing shared, nothing to say
    with llama_server_process(engine, smollm2, tmp_path, ctx=1024, extra_args=("--threads", "1")) as upstream:
        values = asyncio.run(_use_the_door(upstream, tmp_path))
    d.add_sample(Sample(time.time(), "usage", "front door", values))
    qtbot.waitUntil(lambda: d.usage.table.rowCount() == 2, timeout=3000)  # with the graphs' redraw
    assert not d.usage.isHidden() and d.usage.title() == "Who uses the cluster"
    header = [d.usage.table.horizontalHeaderItem(c).text() for c in range(d.usage.table.columnCount())]
    assert header == COLUMNS
    rows = [[d.usage.text_at(r, c) for c in range(len(COLUMNS))] for r in range(2)]
    assert [r[:2] for r in rows] == [["open-webui", "1"], ["phone", "2"]]
    assert [r[3] for r in rows] == ["6", "9"] and all(int(r[2]) > 0 for r in rows)
    assert all(float(r[4]) > 0 for r in rows) and [r[5] for r in rows] == ["0", "0"]


@pytest.mark.slow
def test_in_the_app_a_program_on_this_pc_and_the_chat_appear_as_this_pc(qtbot, make_window, smollm2):
    win = make_window(browse=False, **{"server/share_lan": True})
    start_alone(qtbot, win, smollm2)
    port = win.session.sharing.door.port
    reply = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=60, json=chat(3))
    assert reply.status_code == 200, reply.text
    table = win.dashboard.usage
    qtbot.waitUntil(lambda: table.table.rowCount() == 1 and table.text_at(0, 3) == "3", timeout=10000)
    assert [table.text_at(0, c) for c in (0, 1, 5)] == ["This PC", "1", "0"]
    # the app's own chat is one of the people at once too, counted with this PC's programs
    win.chat.max_tokens.setValue(4)
    win.chat.temperature.setValue(0)  # (the same reply every run)
    with qtbot.waitSignal(win.chat.replyFinished, timeout=60000) as sig:
        assert win.chat.send_text("Hello")
    # The door counts tokens; the pane counts chunks, and a character's bytes come as one chunk
    # (the pane once saw 3 chunks for 4 tokens). A reply cut at max_tokens has all 4.
    assert sig.args[0].finish_reason == "length", win.chat.status.text()
    generated = 3 + 4
    qtbot.waitUntil(lambda: table.text_at(0, 1) == "2", timeout=10000)
    assert table.text_at(0, 3) == str(generated) and table.table.rowCount() == 1
    with qtbot.waitSignal(win.launch_flow.stop().done, timeout=30000):
        pass
