"""The app and `herd up` drive the same launch pipeline (#12): for the same plan and options they
run llama-server with the same command line; and the demo opens with its agents holding the
layers. Real window, real demo agents, real llama-server."""

from __future__ import annotations

import os
import signal
import subprocess

import psutil
import pytest
from e2e.herd_cli import HERD, HerdUp, same_but_forwarders

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def test_app_start_and_herd_up_run_the_same_command_line(qtbot, make_window, agents, demo_model, launch_on_both,
                                                          procs, tmp_path):
    win = make_window(browse=False)
    launch_on_both(win, agents, demo_model)
    app_argv = psutil.Process(win.session.supervisor.server.pid).cmdline()
    app_planned = win.session.supervisor.launcher.request.argv(win.engine.llama_server)
    assert same_but_forwarders(app_argv, app_planned)
    assert app_argv[app_argv.index("-c") + 1] == "512"
    assert app_argv[app_argv.index("--alias") + 1] == demo_model.stem
    # the same plan and options, saved from the window and served by `herd up`
    profile = tmp_path / "cluster.json"
    with qtbot.waitSignal(win.profiles.export(str(profile)).finished, timeout=30000):
        pass
    with qtbot.waitSignal(win.launch_flow.stop().done, timeout=30000):
        pass
    qtbot.waitUntil(lambda: win.launch.state == "stopped", timeout=30000)

    env = dict(os.environ)  # the window's config folder: its pairings
    up = HerdUp(procs.popen(HERD + ["up", profile, "--no-mdns"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    up.wait_for("Serving", 120)
    [pid] = up.server_pids()
    assert f"Starting {' '.join(app_planned)}" in up.lines  # the same plan and options, built alike
    cli_argv = psutil.Process(pid).cmdline()
    assert same_but_forwarders(cli_argv, app_planned) and same_but_forwarders(app_argv, cli_argv)
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=30) == 0, "\n".join(up.lines)


def test_the_demo_opens_with_its_agents_holding_the_layers(qtbot, make_window, agents, demo_model):
    win = make_window(browse=False)
    win.demo.attach(agents, demo_model, stop_on_close=False)  # the fixture stops the demo's agents
    ours = {a.address for a in agents.agents}

    def on_agents():
        plan = win.editor.plan()
        if plan is None or plan.host_layers:
            return False
        held = {d.node_id for d, c in plan.assignments if c}
        return held == {n.id for n in win.node_map.values() if f"{n.host}:{n.api_port}" in ours} and len(held) == 2
    qtbot.waitUntil(on_agents, timeout=30000)
    counts = sorted(c for _, c in win.editor.plan().assignments if c)
    assert sum(counts) == win.model.n_slots and counts[-1] - counts[0] <= 1  # an even share each


def test_a_lost_worker_interrupts_the_reply_in_the_chats_own_transcript(qtbot, make_window, agents, demo_model,
                                                                         launch_on_both):
    """The failover supervisor marks the reply in flight interrupted, with the lost node's
    name, in the chat pane's Conversation — the one transcript, which the next question sends —
    and once the cluster serves again the reply goes on where it stopped (#34)."""
    from gui.cluster.failover import events as E
    win = make_window(browse=False, **{"failover/countdown": 0})
    events = []
    win.session.failover.connect(events.append)
    ids = launch_on_both(win, agents, demo_model)
    win.chat.max_tokens.setValue(4000)
    assert win.chat.send_text("Tell me a long story.")
    qtbot.waitUntil(lambda: win.chat._stats is not None and win.chat._stats.pieces >= 5, timeout=30000)
    call = win.session.node_status(ids["demo-b"])
    with qtbot.waitSignal(call.done, timeout=10000):
        pass
    os.kill(call.future.result().rpc.pid, signal.SIGKILL)
    qtbot.waitUntil(lambda: win.chat.conversation.messages[-1].interrupted, timeout=30000)
    partial = win.chat.conversation.messages[-1].content
    qtbot.waitUntil(lambda: any(e.kind == E.EventKind.RECOVERED for e in events), timeout=90000)
    # once the cluster serves again, the cut reply goes on where it stopped (#34)
    # (the resume starts when the relayed "ready" reaches the window, which may come after RECOVERED)
    qtbot.waitUntil(lambda: win.chat.conversation.messages[-1].resumed and not win.chat.busy(), timeout=60000)
    reply = win.chat.conversation.messages[-1]
    assert reply.role == "assistant" and reply.state == "complete" and reply.resumed
    assert partial and reply.content.startswith(partial) and len(reply.content) > len(partial)
    assert "demo-b" in reply.note, reply.note
    # the next question carries on from what the user saw
    qtbot.waitUntil(lambda: win.chat.send_button.isEnabled(), timeout=30000)
    win.chat.max_tokens.setValue(3)
    with qtbot.waitSignal(win.chat.replyFinished, timeout=60000) as sig:
        assert win.chat.send_text("Go on.")
    assert sig.args[0].pieces == 3
    sent = win.chat.request_messages()
    # (after the system prompt the chat starts with)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "assistant"]
    assert sent[2]["content"] == reply.content


def test_the_editor_shows_the_workspaces_server_options(qtbot, make_window, demo_model):
    """The server options live in the workspace; the split editor's command line follows them."""
    win = make_window(browse=False)
    assert win.open_model(str(demo_model))
    qtbot.waitUntil(lambda: win.editor.plan() is not None, timeout=10000)
    win.workspace.set_options(ctx=1024, port=18999, alias="my-model")
    assert win.editor.ctx.value() == 1024
    line = win.editor.command_line()
    assert "-c 1024" in line and "--port 18999" in line and "--alias my-model" in line, line
    win.editor.ctx.setValue(768)  # and an edit in the editor is the workspace's
    assert win.workspace.options.ctx == 768
