"""One owner of the endpoint (#36): while a real ``herd up`` (what the login service runs) serves
SmolLM2 on the port the window would use, Start in the real window says so, shows that endpoint
and chats with it, and starts no llama-server of its own."""

from __future__ import annotations

import os
import signal
import subprocess

import psutil
import pytest
from conftest import free_port
from e2e.herd_cli import HERD, HerdUp

from gui.cluster.launching.profile import make_profile, save_profile
from gui.cluster.llama.model import inspect_model
from gui.cluster.planning.plan import Plan

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def _llama_servers_of_the_window(up: HerdUp) -> list[int]:
    """llama-server processes this test process started other than through ``herd up``."""
    theirs = {p.pid for p in psutil.Process(up.proc.pid).children(recursive=True)}
    return [p.pid for p in psutil.Process().children(recursive=True)
            if "llama-server" in p.name() and p.pid not in theirs]


def test_start_attaches_to_the_cluster_herd_up_serves_on_the_same_port(qtbot, make_window, engine, smollm2,
                                                                       procs, tmp_path):
    info = inspect_model(smollm2)
    port = free_port()
    profile = save_profile(tmp_path / "home.json", make_profile(Plan(info.n_layer, info.n_slots, ()), info, [],
                                                                ctx=512, port=port))
    env = dict(os.environ, HERD_CONFIG_DIR=str(tmp_path / "config"), LLAMA_CACHE=str(tmp_path / "llama-cache"))
    up = HerdUp(procs.popen(HERD + ["up", profile, "--no-mdns", "--timeout", "0", "--threads", "1"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    up.wait_for("Serving", 180)

    win = make_window(browse=False, **{"server/port": port})
    assert win.open_model(str(smollm2))
    qtbot.waitUntil(lambda: win.editor.plan() is not None, timeout=20000)
    assert not win.chat.send_button.isEnabled()
    win.launch_flow.start()
    status = win.launch.status.text()
    assert f"herd already serves on port {port} (process {up.proc.pid}), so the window uses that endpoint" in status
    assert win.launch.endpoint.text() == f"http://127.0.0.1:{port}/v1"
    assert win.session.supervisor is None and _llama_servers_of_the_window(up) == []

    # the chat talks to the cluster herd up serves
    win.chat.max_tokens.setValue(4)
    win.chat.temperature.setValue(0)  # (the same reply every run)
    with qtbot.waitSignal(win.chat.replyFinished, timeout=60000) as sig:
        assert win.chat.send_text("What is the capital of France?")
    # it ran to the length asked (a chunk is one token or more: a character's bytes come whole)
    stats = sig.args[0]
    assert stats.finish_reason == "length" and 0 < stats.pieces <= 4, win.chat.status.text()
    assert _llama_servers_of_the_window(up) == []

    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=60) == 0, "\n".join(up.lines)
