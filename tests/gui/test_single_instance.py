"""One herd window per user: a second ``herd`` (or ``herd demo``) brings the first one's window
to the front and leaves, instead of opening a window whose Start fails against the first one's
workers; a socket left by an app that crashed does not stop herd from starting."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QDir

from gui.single_instance import SingleInstance, ask_running, instance_name

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, **extra) -> dict:
    return dict(os.environ, HERD_CONFIG_DIR=str(tmp_path / "config"), XDG_CONFIG_HOME=str(tmp_path / "xdg-config"),
                XDG_CACHE_HOME=str(tmp_path / "cache"), HERD_INTERFACES="127.0.0.1", QT_QPA_PLATFORM="offscreen",
                HERD_DEBUG="1", PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", **extra)


def _herd(args: list[str], env: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gui.main", *args], env=env, stdin=subprocess.DEVNULL, **kw)


@pytest.mark.engine
def test_a_second_herd_shows_the_first_and_leaves(qtbot, tmp_path, monkeypatch, engine, demo_model):
    env = _env(tmp_path, HERD_ENGINE_DIR=str(engine.folder))
    monkeypatch.setenv("HERD_CONFIG_DIR", env["HERD_CONFIG_DIR"])
    sock = Path(QDir.tempPath()) / instance_name()  # where the first one listens (Unix)
    log = tmp_path / "first.log"
    with open(log, "w") as out:
        first = _herd(["--quit-after", "300"], env, stdout=out, stderr=subprocess.STDOUT)
    try:
        qtbot.waitUntil(lambda: sock.exists() or first.poll() is not None, timeout=60000)
        assert first.poll() is None, log.read_text()

        # the person types `herd` again: it says so and leaves; the first window comes forward
        second = subprocess.run([sys.executable, "-m", "gui.main"], env=env, capture_output=True, text=True,
                                stdin=subprocess.DEVNULL, timeout=60)
        assert second.returncode == 0, second.stderr
        assert "already open" in second.stderr, second.stderr
        qtbot.waitUntil(lambda: "bringing it to the front" in log.read_text(), timeout=10000)

        # `herd demo` too, before it starts any agent
        demo = subprocess.run([sys.executable, "-m", "gui.main", "demo", "--model", str(demo_model)], env=env,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        assert "already open" in demo.stderr and "PIN" not in demo.stdout, demo.stdout + demo.stderr
        qtbot.waitUntil(lambda: log.read_text().count("bringing it to the front") == 2, timeout=10000)
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGTERM)  # closes the window as a person would
        try:
            first.wait(60)
        except subprocess.TimeoutExpired:
            first.kill()
            first.wait()
    assert first.returncode == 0, log.read_text()
    assert not sock.exists()  # a clean exit takes its socket away
    assert not ask_running()  # and the next herd opens normally


def test_a_socket_left_by_a_crashed_herd_does_not_block_starting(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("HERD_CONFIG_DIR", str(tmp_path / "config"))
    name = instance_name()
    path = Path(QDir.tempPath()) / name
    # what a crash leaves: the socket file, with nobody listening on it
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    assert path.exists()
    try:
        assert not ask_running(name)  # nobody answers: this one starts
        inst = SingleInstance(name)
        assert inst.listen()
        try:
            with qtbot.waitSignal(inst.activated, timeout=5000):
                assert ask_running(name)
        finally:
            inst.close()
            inst.deleteLater()
    finally:
        path.unlink(missing_ok=True)


def test_each_user_and_config_folder_has_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("HERD_CONFIG_DIR", str(tmp_path / "one"))
    one = instance_name()
    monkeypatch.setenv("HERD_CONFIG_DIR", str(tmp_path / "two"))
    assert instance_name() != one
    monkeypatch.setenv("HERD_CONFIG_DIR", str(tmp_path / "one"))
    assert instance_name() == one
    monkeypatch.setenv("USER", "someone-else")
    monkeypatch.setenv("LOGNAME", "someone-else")
    assert instance_name() != one
