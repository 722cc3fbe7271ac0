"""The whole window against real agents (herd-agent on loopback) and a real llama-server.

A node appears when an agent starts; pairing with a wrong PIN says so and the right one works;
a plan that does not fit is red and Start refuses with the reason; Start reaches ready with the
placement verified, a chat reply streams through the cluster, and Stop leaves nothing running.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

pytestmark = pytest.mark.engine


@pytest.fixture
def window(make_window):
    return make_window()


def _add_by_address(qtbot, win, agents):
    """Add the agents by address (the first test proves mDNS; the others need not wait for it)."""
    for a in agents.agents:
        win.add_node(a.address)
    qtbot.waitUntil(lambda: _names(win, agents) == ["demo-a", "demo-b"], timeout=20000)
    return {n.name: n.id for n in win.node_map.values()
            if n.name in ("demo-a", "demo-b") and f"{n.host}:{n.api_port}" in {a.address for a in agents.agents}}


def _names(win, agents):
    # other agents may announce on loopback too; look at ours only
    ours = {f"127.0.0.1:{a.api_port}" for a in agents.agents}
    return sorted(n.name for n in win.node_map.values() if f"{n.host}:{n.api_port}" in ours)


def _model_too_long_for_this_machine(path, ctx, like):
    """A demo model shaped like ``like`` whose KV cache at ``ctx`` tokens is eight times this
    machine's RAM: many thin blocks, since the KV cache grows with the blocks and the weights
    stay small (a few MB on a machine with a few hundred GB)."""
    import psutil

    from gui.cluster.llama.model import inspect_model
    from gui.cluster.llama.random_model import DemoShape, write_demo_model

    info = inspect_model(like)
    layers = -(-8 * psutil.virtual_memory().total // info.kv_bytes_per_layer(ctx))
    return write_demo_model(path, DemoShape(layers=layers, embd=info.embedding_length, ff=32))


def test_node_appears_pair_plan_start_chat_stop(qtbot, window, agents, demo_model, tmp_path):
    win = window
    # 1. the agents announce themselves over mDNS (loopback) and appear as cards
    qtbot.waitUntil(lambda: _names(win, agents) == ["demo-a", "demo-b"], timeout=30000)
    ids = {n.name: n.id for n in win.node_map.values() if n.name in ("demo-a", "demo-b")}
    card = win.nodes.cards[ids["demo-a"]]
    assert "demo-a" in card.title.text() and card.paired_label.text() == "not paired"
    assert not card.pair_button.isHidden()  # (isVisible lags: a new card is shown by a queued event)

    # 2. a wrong PIN is refused in words; the right PINs pair
    win.pair_node(ids["demo-a"], "000000" if agents.agents[0].pin != "000000" else "111111")
    qtbot.waitUntil(lambda: "Pairing with demo-a failed" in win.nodes.message.text(), timeout=10000)
    for a in agents.agents:
        win.pair_node(ids[a.name], a.pin)
    qtbot.waitUntil(lambda: all(win.node_map[i].paired for i in ids.values()), timeout=10000)
    assert card.paired_label.text().startswith("paired · key ") and card.pair_button.isHidden()
    # status arrives: RAM shown on the card; RTT sparkline fills
    qtbot.waitUntil(lambda: "RAM" in card.hardware.text() and len(card.sparkline.values) >= 2, timeout=10000)

    # 3. a plan that does not fit: Start refuses and says why. The model's KV cache at the
    # largest context the editor offers is eight times this machine's RAM (which every device
    # here shares), so it does not fit on a small machine or a large one.
    ctx = win.editor.ctx.maximum()
    big = _model_too_long_for_this_machine(tmp_path / "long.gguf", ctx, demo_model)
    assert win.open_model(str(big))
    qtbot.waitUntil(lambda: win.editor.plan() is not None and len(win.editor.plan().devices()) == 2, timeout=10000)
    win.editor.ctx.setValue(ctx)
    assert win.editor.problems()
    qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
    assert "Not started" in win.launch.status.text() and "short by" in win.launch.status.text(), \
        win.launch.status.text()
    assert win.session.supervisor is None

    # 4. open the demo model; the editor plans over both nodes, and it fits
    assert win.open_model(str(demo_model))
    qtbot.waitUntil(lambda: win.editor.plan() is not None and win.editor.plan().n_layer == win.model.n_layer
                    and len(win.editor.plan().devices()) == 2, timeout=10000)
    n = win.model.n_layer + 1
    win.editor.ctx.setValue(512)
    assert win.editor.problems() == []

    # 5. a non-default split, then Start: doctor, workers, llama-server → ready, placement verified
    assert win.editor.set_counts(2, [3, n - 5])
    with qtbot.waitSignal(win.session.serverState, timeout=5000):
        qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.launch.state in ("ready", "failed"), timeout=120000)
    assert win.launch.state == "ready", win.launch.status.text()
    assert win.launch.verified.text().startswith("✔"), win.launch.verified.text()
    assert win.launch.endpoint.text() == f"http://127.0.0.1:{win.settings.get('server/port')}/v1"
    assert win.launch.findings.count() > 0
    qtbot.waitUntil(lambda: "listening on http://127.0.0.1" in win.launch.log.toPlainText(), timeout=5000)
    # llama.cpp's debug lines (when the server prints any) are hidden, one tick away
    from gui.widgets.launch_panel import _DEBUG_RE

    assert not any(_DEBUG_RE.match(line) for line in win.launch.log.toPlainText().splitlines())
    win.launch.debug_box.setChecked(True)
    assert win.launch.log.toPlainText() == "\n".join(win.launch._lines)
    win.launch.debug_box.setChecked(False)

    # 6. export the running cluster; change the split; import shows no difference and restores it
    exported = win.editor.plan()
    profile_path = tmp_path / "cluster.json"
    with qtbot.waitSignal(win.profiles.export(str(profile_path)).finished, timeout=30000):
        pass
    win.editor.reset_by_memory()
    assert win.editor.plan() != exported
    profile, findings = win.profiles.read(str(profile_path))
    # the review matches what serves and names what differs: only the editor's new split (#37 item 14)
    assert [(f.severity, f.code) for f in findings] == [("warning", "split-differs")], [str(f) for f in findings]
    assert "in the editor" in findings[0].message
    assert win.profiles.apply(profile)
    assert win.editor.plan().counts() == exported.counts() and win.editor.plan().host_layers == 2
    assert [d.endpoint for d in win.editor.plan().devices()] == [d.endpoint for d in exported.devices()]
    # a profile naming a node that is not here: the difference is named before launch
    import json
    doc = json.loads(profile_path.read_text())
    nid = next(iter(doc["nodes"]))
    doc["nodes"]["gone-node"] = doc["nodes"].pop(nid)
    for a in doc["plan"]["assignments"]:
        if a["device"]["node_id"] == nid:
            a["device"]["node_id"] = "gone-node"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc))
    _, findings = win.profiles.read(str(other))
    assert any(f.severity == "error" and "missing" in f.message for f in findings)

    # 7. chat through the cluster; the dashboard gets server metrics
    win.chat.max_tokens.setValue(16)
    with qtbot.waitSignal(win.chat.replyFinished, timeout=60000) as sig:
        assert win.chat.send_text("hello cluster")
    assert sig.args[0].pieces == 16, win.chat.status.text()
    qtbot.waitUntil(lambda: ("tps", "decode") in win.dashboard.series, timeout=10000)

    # 8. Stop: llama-server and the workers herd started are stopped
    server = win.session.supervisor.server
    qtbot.mouseClick(win.launch.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.launch.state == "stopped", timeout=30000)
    assert server.returncode is not None
    assert not win.chat.send_button.isEnabled()
    # the agents' own status (sampled every 0.5 s) says their RPC workers stopped
    qtbot.waitUntil(lambda: all((win.node_status[i].get("rpc") or {}).get("state") == "stopped"
                                for i in ids.values()), timeout=15000)


def test_unreadable_model_keeps_previous(qtbot, window, demo_model, tmp_path):
    win = window
    assert win.open_model(str(demo_model))
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 10)
    assert not win.open_model(str(bad))
    assert "Cannot use broken.gguf" in win.model_panel.info.text()
    assert win.model is not None and win.model.path == demo_model
    assert win.settings.get("model/last") == str(demo_model)


def test_server_crash_and_lost_node_are_explained(qtbot, window, agents, demo_model, launch_on_both):
    import os
    import signal

    from gui.cluster.failover.supervisor import FailoverPolicy

    win = window
    win.session.failover_policy = FailoverPolicy(countdown=0.5)
    ids = launch_on_both(win, agents, demo_model)
    assert win.chat.send_button.isEnabled()

    # llama-server dies under the app: the window says so in words, and the failover
    # supervisor brings the cluster back at the same endpoint
    endpoint = win.launch.endpoint.text()
    os.kill(win.session.supervisor.server.pid, signal.SIGKILL)
    qtbot.waitUntil(lambda: win.launch.state == "failed", timeout=15000)
    assert win.launch.status.text().startswith("Failed:") and len(win.launch.status.text()) > len("Failed: ")
    assert not win.chat.send_button.isEnabled() and "llama-server stopped" in win.chat.status.text()
    assert win.launch.stop_button.isEnabled() and not win.launch.start_button.isEnabled()
    qtbot.waitUntil(lambda: win.launch.state == "ready", timeout=90000)
    assert "[herd]" in win.launch.log.toPlainText()
    assert win.launch.endpoint.text() == endpoint
    win.chat.max_tokens.setValue(4)
    with qtbot.waitSignal(win.chat.replyFinished, timeout=60000) as sig:
        assert win.chat.send_text("still there?")
    assert sig.args[0].pieces == 4, win.chat.status.text()
    win.launch_flow.stop()
    qtbot.waitUntil(lambda: win.session.supervisor is None and win.launch.state == "stopped", timeout=30000)
    qtbot.waitUntil(lambda: all((win.node_status[i].get("rpc") or {}).get("state") == "stopped"
                                for i in ids.values()), timeout=15000)

    # a node disappears while the app is open: its card says it is lost, the rest carries on
    b = next(a for a in agents.agents if a.name == "demo-b")
    b.proc.kill()
    b.proc.wait(10)
    card = win.nodes.cards[ids["demo-b"]]
    qtbot.waitUntil(lambda: card.state.text() == "lost", timeout=15000)
    assert not card.worker_button.isEnabled()
    assert win.nodes.cards[ids["demo-a"]].state.text() != "lost"
    # the editor no longer plans onto the lost node
    qtbot.waitUntil(lambda: [d.node_name for d in win.editor.plan().devices()] == ["demo-a"], timeout=10000)


def test_fastest_measures_the_nodes_and_applies_a_plan(qtbot, window, agents, demo_model):
    win = window
    ids = _add_by_address(qtbot, win, agents)
    for a in agents.agents:
        win.pair_node(ids[a.name], a.pin)
    qtbot.waitUntil(lambda: all(i in win.node_status for i in ids.values()), timeout=15000)
    assert win.open_model(str(demo_model))
    qtbot.waitUntil(lambda: win.editor.plan() is not None and len(win.editor.plan().devices()) == 2, timeout=10000)
    assert win.editor.fastest_button.isEnabled()
    win.editor.fastest_for.setCurrentIndex(win.editor.fastest_for.findData("documents"))  # (#16)
    qtbot.mouseClick(win.editor.fastest_button, Qt.MouseButton.LeftButton)
    assert not win.editor.fastest_button.isEnabled()  # one measurement at a time
    with qtbot.waitSignal(win.launch_flow.fastest_call.done, timeout=240000):
        pass
    assert not win.launch_flow.fastest_call.future.exception(), win.editor.summary.text()
    plan = win.launch_flow.fastest_call.future.result()
    assert plan is not None and plan.n_slots == win.model.n_layer + 1
    assert win.editor.plan() == plan and win.editor.problems() == []
    # optimised for documents, and both predicted figures are shown with the plan
    assert win.session.last_fastest.objective == "documents"
    assert win.editor.note.text().startswith("Predicted: ") and "-token prompt: first token after" in \
        win.editor.note.text(), win.editor.note.text()
    qtbot.waitUntil(win.editor.fastest_button.isEnabled, timeout=5000)
    assert win.editor.can_undo()  # the fastest plan is one undoable step
    # the workers started for measuring were stopped again
    qtbot.waitUntil(lambda: all((win.node_status[i].get("rpc") or {}).get("state") == "stopped"
                                for i in ids.values()), timeout=15000)

    # a card's button starts and stops that node's RPC worker
    nid = ids["demo-a"]
    card = win.nodes.cards[nid]
    assert card.worker_button.text() == "Start worker"
    qtbot.mouseClick(card.worker_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: (win.node_status[nid].get("rpc") or {}).get("state") == "ready", timeout=20000)
    qtbot.waitUntil(lambda: card.worker_button.text() == "Stop worker", timeout=5000)
    qtbot.mouseClick(card.worker_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: (win.node_status[nid].get("rpc") or {}).get("state") == "stopped", timeout=20000)

    # a Wi-Fi link in the agent's status is flagged on the card
    import copy
    status = copy.deepcopy(win.node_status[nid])
    assert card.warning.isHidden()
    nics = status["hardware"]["nics"]
    nics.append({"name": "wlan0", "wifi": True, "loopback": False})
    card.show_status(status)
    assert not card.warning.isHidden() and "Wi-Fi" in card.warning.text() and "wlan0" in card.warning.text()
    # and the card says how much its weight cache holds, against its cap
    cache = win.node_status[nid].rpc.weight_cache
    assert cache is not None and cache.cap_bytes > 0

    def size(n):  # GiB, or MiB below one GiB
        return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"
    assert f"Weights cached {size(cache.used_bytes)} of at most {size(cache.cap_bytes)}" \
        in card.hardware.text(), card.hardware.text()


def test_bad_profile_is_refused_with_the_field_named(qtbot, window, tmp_path):
    from PySide6.QtWidgets import QMessageBox

    from person import answer_dialog, check

    def refused(path) -> str:
        seen = []
        told = answer_dialog(qtbot, QMessageBox, lambda box: (seen.append(box.text()), box.accept()))
        assert window.profiles.read(str(path)) is None
        check(told)
        return seen[0]

    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "llama-herd-profile", "version": 99}')
    assert "version" in refused(bad)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("not json at all")
    assert "garbage.json" in refused(garbage)


def test_try_a_local_demo_button(qtbot, make_window, smollm2):
    """*Try a local demo*, Start, and a plain question: the demo's real model answers in words."""
    # the demo opens its real model, which `herd demo --download-only` put in place
    # Without mDNS nobody is around (agents of other tests on loopback cannot appear), so the
    # button must be offered.
    win = make_window(browse=False)
    assert not win.node_map
    assert win.nodes.demo_button.isVisibleTo(win)
    win.demo.start()
    qtbot.waitUntil(lambda: win.demo.cluster is not None, timeout=30000)
    demo = win.demo.cluster
    addrs = {a.address for a in demo.agents}
    qtbot.waitUntil(lambda: sum(1 for n in win.node_map.values()
                                if f"{n.host}:{n.api_port}" in addrs and n.paired) == 2, timeout=20000)
    qtbot.waitUntil(lambda: win.model is not None, timeout=30000)  # (read in the background)
    assert win.model.path == smollm2
    assert not win.nodes.demo_button.isVisibleTo(win)  # somebody is around now
    qtbot.waitUntil(lambda: win.editor.plan() is not None
                    and {d.endpoint for d in win.editor.plan().devices()} >= {n.rpc_endpoint for n in win.node_map.values()
                                                                              if f"{n.host}:{n.api_port}" in addrs},
                    timeout=20000)
    win.editor.ctx.setValue(1024)
    qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.launch.state in ("ready", "failed"), timeout=180000)
    assert win.launch.state == "ready", win.launch.status.text()
    win.chat.temperature.setValue(0)
    win.chat.max_tokens.setValue(24)
    with qtbot.waitSignal(win.chat.replyFinished, timeout=120000):
        assert win.chat.send_text("What is the capital of France?")
    reply = win.chat.conversation.messages[-1].content
    assert "Paris" in reply, reply
    # kept from its first message, with the model that answered (#36)
    [kept] = win.chat_store.chats()
    assert (kept.title, kept.model) == ("What is the capital of France?", smollm2.name)
    procs = [a.proc for a in demo.agents]
    win.close()
    assert all(p.poll() is not None for p in procs)  # closing the app stops the demo's agents
