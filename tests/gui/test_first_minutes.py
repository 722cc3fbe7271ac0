"""The first minutes of a new user, guided (#37 items 2-7, 10, 12, 13).

Real widgets in the real main window (offscreen), real agents on loopback where a node takes
part; each test names the stumble of #37 it keeps from coming back.
"""

from __future__ import annotations

import socket

import pytest
from PySide6.QtCore import QEvent, QPoint, Qt
from PySide6.QtWidgets import QApplication

from person import add_node_by_address

pytestmark = pytest.mark.engine


def _tabs_top(win) -> QPoint:
    """Where the tabs are once the layout passes posted so far have run."""
    QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
    QApplication.processEvents()
    return win.tabs.mapTo(win, QPoint(0, 0))


def test_reading_a_model_does_not_move_the_tabs(qtbot, make_window, demo_model):
    """#37.3: the "Reading … .gguf" bar lies over the panel instead of pushing the tabs down."""
    win = make_window(browse=False)
    qtbot.waitExposed(win)
    assert win.open_model(str(demo_model))
    # the scan for the models on this PC (the opened one is a recent file now) has ended
    qtbot.waitUntil(lambda: str(demo_model) in win.model_panel.local_paths(), timeout=30000)
    before = _tabs_top(win)
    # what read_model() says while a file is read; the bar appears after a moment
    win.model_panel.show_reading(str(demo_model))
    qtbot.waitUntil(lambda: win.model_panel.busy.isVisible(), timeout=5000)
    assert demo_model.name in win.model_panel.reading.text()
    during = _tabs_top(win)
    win.model_panel.show_model(win.model)
    qtbot.waitUntil(lambda: not win.model_panel.busy.isVisible())
    after = _tabs_top(win)
    assert before == during == after, (before, during, after)


def test_a_file_that_is_not_gguf_says_so_and_which_model_stays_open(qtbot, make_window, demo_model, tmp_path):
    """#37.5: the error is shown where the description was, and the panel says which model the
    split below belongs to; the list's selection goes back to that model's row."""
    from gui.cluster.models.local import LocalModel

    bad = tmp_path / "notes.gguf"
    bad.write_bytes(b"not a gguf at all")
    win = make_window(browse=False)
    qtbot.waitExposed(win)
    assert win.open_model(str(demo_model))
    panel = win.model_panel
    # opening a model rescans the models on this PC: wait for it, or its list replaces ours below
    qtbot.waitUntil(lambda: any(panel.local.topLevelItem(i).data(0, Qt.ItemDataRole.UserRole) == str(demo_model)
                                for i in range(panel.local.topLevelItemCount())), timeout=30000)
    panel.set_local_models([LocalModel(demo_model, demo_model.name, demo_model.stat().st_size, "herd"),
                            LocalModel(bad, bad.name, bad.stat().st_size, "herd")])
    plan_before = win.editor.plan()
    tree = panel.local
    bad_row = tree.topLevelItem(1)
    qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton, pos=tree.visualItemRect(bad_row).center())
    qtbot.waitUntil(lambda: "Cannot use notes.gguf" in panel.info.text(), timeout=30000)
    text = panel.info.text()
    assert "Still open" in text and demo_model.name in text, text
    assert win.model.path == demo_model and win.editor.plan() is plan_before
    assert [i.text(0) for i in tree.selectedItems()] == [demo_model.name]


def _silent_listener():
    """A loopback port that takes connections and never answers (a hung agent): the kernel
    completes the handshake from the backlog, nothing ever speaks."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    return s


def test_an_address_that_does_not_answer_shows_progress_at_once(qtbot, make_window):
    """#37.4: right after Enter the panel says it is connecting; the answer replaces it."""
    win = make_window(browse=False)
    qtbot.waitExposed(win)
    with _silent_listener() as dead:
        address = f"127.0.0.1:{dead.getsockname()[1]}"
        add_node_by_address(qtbot, win, address)
        message = win.nodes.message
        assert message.isVisible() and f"Connecting to {address}" in message.text(), message.text()
        qtbot.waitUntil(lambda: "Could not add" in message.text(), timeout=60000)
    assert "Connecting" not in message.text()


def test_a_node_card_says_it_waits_for_the_status_instead_of_zeros(qtbot):
    """#37.6: right after pairing, before the agent has said anything about its weight cache,
    the card says so in words; no "0 MiB of at most 0 MiB"."""
    from agent.protocol import AgentStatus
    from gui.cluster.nodes.records import Node
    from gui.widgets.nodes_panel import NodesPanel

    panel = NodesPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.on_node_event("added", Node(id="n1", name="alpha", host="127.0.0.1", api_port=50050, paired=True))
    card = panel.card("n1")
    assert "Waiting for the node's status" in card.hardware.text()

    def status(cache: dict) -> AgentStatus:
        return AgentStatus.from_json({"id": "n1", "name": "alpha", "hardware": {"cpu_model": "x", "cpu_threads": 2},
                                      "load": {}, "rpc": {"state": "stopped", "weight_cache": cache}})

    card.show_status(status({"dir": "", "bytes": 0, "files": 0, "limit_bytes": 0}))
    text = card.hardware.text()
    assert "0 MiB of at most 0 MiB" not in text and "Weights cached: —" in text, text
    assert "Waiting" not in text
    card.show_status(status({"dir": "", "bytes": 5 << 20, "files": 1, "limit_bytes": 2 << 30}))
    assert "Weights cached 5 MiB of at most 2.0 GiB" in card.hardware.text()


def test_an_unpaired_card_says_pairing_shows_its_hardware(qtbot):
    """An unpaired node tells its status only to a master it paired with: its card says so
    instead of waiting for a status that cannot come; once paired, it waits for it (#37)."""
    from gui.cluster.nodes.records import Node
    from gui.widgets.nodes_panel import NodesPanel

    panel = NodesPanel()
    qtbot.addWidget(panel)
    panel.show()
    node = Node(id="n1", name="alpha", host="127.0.0.1", api_port=50050, paired=False)
    panel.on_node_event("added", node)
    card = panel.card("n1")
    assert card.hardware.text() == "Pair with this node to see its hardware and load."
    panel.on_node_event("changed", node.with_(paired=True))
    assert card.hardware.text() == "Waiting for the node's status…"


@pytest.fixture
def chat_pane(qtbot, bridge, llama_server):
    """A chat pane talking to a real llama-server (the demo model) through a real session."""
    from gui.session import ClusterSession
    from gui.widgets.chat_pane import ChatPane

    session = ClusterSession(bridge)
    pane = ChatPane(session.chat_sender(llama_server))
    qtbot.addWidget(pane)
    pane.resize(600, 500)
    pane.show()
    yield pane
    pane.stop()
    session.close()


def test_ctrl_enter_while_a_reply_streams_says_why_it_waits(qtbot, chat_pane):
    """#37.7: the second question is not silently ignored: the pane says why it was not sent,
    it stays in the box, and once the reply is over the pane says how to send it."""
    pane = chat_pane
    pane.max_tokens.setValue(4000)
    assert pane.send_text("Tell me a long story")
    qtbot.waitUntil(lambda: pane.reply_stats is not None and pane.reply_stats.pieces >= 3, timeout=30000)
    pane.input.setFocus()
    qtbot.keyClicks(pane.input, "And then?")
    qtbot.keyClick(pane.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert "wait for the reply to finish, or press Stop" in pane.status.text(), pane.status.text()
    assert pane.input.toPlainText() == "And then?"
    # the streaming status that follows keeps saying it
    pieces = pane.reply_stats.pieces
    qtbot.waitUntil(lambda: pane.reply_stats is not None and pane.reply_stats.pieces > pieces + 2, timeout=30000)
    qtbot.waitUntil(lambda: "Streaming" in pane.status.text(), timeout=5000)
    assert "press Stop" in pane.status.text()
    with qtbot.waitSignal(pane.replyFinished, timeout=10000):
        qtbot.mouseClick(pane.stop_button, Qt.MouseButton.LeftButton)
    assert pane.input.toPlainText() == "And then?"


def test_start_before_the_split_exists_says_why(qtbot, make_window, demo_model):
    """#37.7: Start with no model, and Start while the model is still being read, each say what
    to wait for or do (before, both said "Open a model first." even while a model was read)."""
    win = make_window(browse=False)
    qtbot.waitExposed(win)
    win.tabs.setCurrentWidget(win.launch)
    qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
    assert "Open model…" in win.launch.status.text(), win.launch.status.text()
    win.read_model(str(demo_model))
    # (the read's result comes back through the event loop, which the click does not run)
    qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
    assert "still being read" in win.launch.status.text(), win.launch.status.text()
    qtbot.waitUntil(lambda: win.model is not None and win.editor.plan() is not None, timeout=30000)


@pytest.mark.parametrize("screen", [(1366, 768), (1920, 1080)])
def test_the_first_window_fits_the_screen_it_opens_on(tmp_path, demo_model, screen):
    """#37.2: on a first start the window, frame and all, fits the screen's free area, and the
    Split tab's command line is on the screen (at 1366×768 it was below the bottom)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    width, height = screen
    config = tmp_path / "screen.json"
    config.write_text(json.dumps({"screens": [{"name": "screen", "x": 0, "y": 0, "width": width, "height": height,
                                               "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))
    env = dict(os.environ, QT_QPA_PLATFORM=f"offscreen:configfile={config}", HERD_CONFIG_DIR=str(tmp_path / "config"),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    probe = Path(__file__).with_name("window_on_screen.py")
    out = subprocess.run([sys.executable, str(probe), str(demo_model), str(tmp_path / "herd.ini")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    sx, sy, sw, sh = seen["screen"]
    wx, wy, ww, wh = seen["window"]
    assert (sw, sh) == (width, height)
    assert sx <= wx and wx + ww <= sx + sw and sy <= wy and wy + wh <= sy + sh, seen
    cx, cy, cw, ch = seen["command"]
    assert seen["command_visible"] and ch > 20 and sy <= cy and cy + ch <= sy + sh, seen
    # a large screen keeps the size the window was designed at
    if width >= 1320 and height >= 880:
        assert seen["size"] == [1280, 820], seen


def test_the_next_step_is_said_beside_the_tabs(qtbot, make_window, demo_model):
    """#37.2: open a model → Launch ▸ Start → Chat, each said beside the tabs as it comes, and
    its link opens the tab where it is done (here on this PC alone: host-only, a real launch)."""
    from gui.widgets import next_step as S

    win = make_window(browse=False)
    qtbot.waitExposed(win)
    hint = win.next_step
    assert hint.isVisible() and hint.step == S.OPEN_MODEL and "open a model" in hint.text()
    win.read_model(str(demo_model))
    assert hint.step == S.READING
    qtbot.waitUntil(lambda: hint.step == S.START, timeout=30000)
    assert "Launch ▸ Start" in hint.text()
    assert win.tabs.currentWidget() is win.editor
    hint.linkActivated.emit("launch")  # what a click on the link emits
    assert win.tabs.currentWidget() is win.launch
    qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: hint.step == S.STARTING, timeout=30000)
    qtbot.waitUntil(lambda: win.launch.state == "ready", timeout=120000)
    assert hint.step == S.CHAT and "ask something" in hint.text()
    hint.linkActivated.emit("chat")
    assert win.tabs.currentIndex() == 2
    qtbot.mouseClick(win.launch.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.launch.state == "stopped", timeout=30000)
    assert hint.step == S.START


def test_the_throughput_graph_leaves_out_the_link_probes(qtbot, make_window, agents, demo_model):
    """#37.10: while Fastest measures (its bandwidth probes run at loopback speed, 1.7 GB/s
    with nothing generating) the nodes' throughput is not drawn, and the span is marked as a
    link probe; before and after it, it is. Two real agents, their real status every 0.5 s."""
    import math

    win = make_window(browse=False)
    ours = {a.address for a in agents.agents}
    for a in agents.agents:
        win.add_node(a.address)
    qtbot.waitUntil(lambda: len([n for n in win.node_map.values() if f"{n.host}:{n.api_port}" in ours]) == 2,
                    timeout=20000)
    ids = {n.name: n.id for n in win.node_map.values() if f"{n.host}:{n.api_port}" in ours}
    for a in agents.agents:
        win.pair_node(ids[a.name], a.pin)
    assert win.open_model(str(demo_model))
    d = win.dashboard
    qtbot.waitUntil(lambda: all(len(d.curve_data("net", name)[0]) >= 2 for name in ids), timeout=20000)
    qtbot.waitUntil(lambda: win.editor.fastest_button.isEnabled(), timeout=20000)
    qtbot.mouseClick(win.editor.fastest_button, Qt.MouseButton.LeftButton)
    with qtbot.waitSignal(win.launch_flow.fastest_call.done, timeout=300000):
        pass
    assert len(d.probe_spans) == 1 and d.probe_spans[0][1] is not None
    start, end = d.probe_spans[0]
    qtbot.waitUntil(lambda: all(d.series[("net", n)].t[-1] > end + 1 for n in ids), timeout=20000)
    for name in ids:
        s = d.series[("net", name)]
        inside = [v for t, v in zip(s.t, s.v) if start <= t <= end]
        assert inside and all(math.isnan(v) for v in inside), (name, inside)
        assert any(not math.isnan(v) for t, v in zip(s.t, s.v) if t > end)


def test_a_model_without_a_chat_template_is_offered_one(qtbot, make_window, demo_model, smollm2):
    """#37.13: a GGUF without ``tokenizer.chat_template`` (the random demo model here, as Gemma 3
    270M was) is said to have none on the Launch tab, with llama-server's built-in templates to
    choose from; the choice goes into the command line and llama-server starts with it. A model
    with its own template (SmolLM2) shows no offer and passes no --chat-template."""
    from gui.cluster.llama.chat_template import has_chat_template

    assert has_chat_template(demo_model) is False and has_chat_template(smollm2) is True
    win = make_window(browse=False)
    qtbot.waitExposed(win)
    win.tabs.setCurrentWidget(win.launch)
    assert win.open_model(str(demo_model))
    launch = win.launch
    qtbot.waitUntil(lambda: launch.template_box.isVisible(), timeout=10000)
    assert "no chat template" in launch.template_note.text()
    offered = [launch.template_choice.itemData(i) for i in range(launch.template_choice.count())]
    assert offered[0] == "" and offered[1] == "llama3" and "gemma" in offered  # (a llama model)
    # offered, not passed until chosen: Start and `herd up` run the same command line
    assert "--chat-template" not in win.editor.command_line()
    index = launch.template_choice.findText("gemma")
    launch.template_choice.setCurrentIndex(index)
    launch.template_choice.activated.emit(index)  # what choosing it in the opened list emits
    assert "--chat-template gemma" in win.editor.command_line()
    assert win.editor.command_line().count("--chat-template") == 1
    launch.template_choice.setCurrentIndex(0)
    launch.template_choice.activated.emit(0)
    assert "--chat-template" not in win.editor.command_line()
    launch.template_choice.setCurrentIndex(index)
    launch.template_choice.activated.emit(index)
    qtbot.mouseClick(launch.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: launch.state in ("ready", "failed"), timeout=120000)
    assert launch.state == "ready", launch.status.text()
    qtbot.mouseClick(launch.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: launch.state == "stopped", timeout=30000)

    assert win.open_model(str(smollm2))
    qtbot.waitUntil(lambda: not launch.template_box.isVisible(), timeout=10000)
    assert "--chat-template" not in win.editor.command_line()


def test_a_worker_unplugged_at_start_can_be_left_out(qtbot, make_window, agents, demo_model):
    """#37.12: one of two paired agents is stopped (its process ends, as when its PC is
    unplugged) just before Start: Start says so and offers to start without it; that starts
    the cluster over the other one. Real agents, a real launch."""
    win = make_window(browse=False)
    ours = {a.address: a for a in agents.agents}
    for a in agents.agents:
        win.add_node(a.address)
    qtbot.waitUntil(lambda: len([n for n in win.node_map.values() if f"{n.host}:{n.api_port}" in ours]) == 2,
                    timeout=20000)
    ids = {n.name: n.id for n in win.node_map.values() if f"{n.host}:{n.api_port}" in ours}
    for a in agents.agents:
        win.pair_node(ids[a.name], a.pin)
    qtbot.waitUntil(lambda: all(i in win.node_status for i in ids.values()), timeout=15000)
    assert win.open_model(str(demo_model))
    win.editor.ctx.setValue(512)
    qtbot.waitUntil(lambda: win.editor.plan() is not None and len(win.editor.plan().devices()) == 2, timeout=10000)
    gone = agents.agents[1]
    gone.proc.terminate()
    gone.proc.wait(10)
    launch = win.launch
    qtbot.mouseClick(launch.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: launch.without_button.isVisible(), timeout=60000)
    assert "Not started" in launch.status.text() and gone.name in launch.status.text()
    assert launch.without_button.text() == f"Start without {gone.name}"
    qtbot.mouseClick(launch.without_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: launch.state in ("ready", "failed"), timeout=120000)
    assert launch.state == "ready", launch.status.text()
    used = {d.node_id for d, c in win.launch_flow.running_plan().assignments if c}
    assert ids[gone.name] not in used and ids[agents.agents[0].name] in used
    assert not launch.without_button.isVisible()
    qtbot.mouseClick(launch.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: launch.state == "stopped", timeout=30000)
