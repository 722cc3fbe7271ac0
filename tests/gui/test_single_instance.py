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


def test_a_herd_starting_while_the_first_is_not_yet_listening_waits_for_it(qtbot, tmp_path, monkeypatch):
    """The moment between the first herd taking its claim and listening: a second one does not
    take that for "no herd here" and open a window of its own; it waits and asks the first."""
    from PySide6.QtCore import QLockFile

    from gui.single_instance import lock_path

    env = _env(tmp_path)
    monkeypatch.setenv("HERD_CONFIG_DIR", env["HERD_CONFIG_DIR"])
    lock_path().parent.mkdir(parents=True)
    first_lock = QLockFile(str(lock_path()))  # this test is the first herd, claimed, not listening yet
    assert first_lock.tryLock(0)
    first = SingleInstance(instance_name())
    sock = Path(QDir.tempPath()) / instance_name()
    log = tmp_path / "second.log"
    try:
        with open(log, "w") as out:
            second = _herd(["--quit-after", "300"], env, stdout=out, stderr=subprocess.STDOUT)
        qtbot.waitUntil(lambda: "another herd holds" in log.read_text() or sock.exists()
                        or second.poll() is not None, timeout=60000)
        assert "another herd holds" in log.read_text(), log.read_text()
        assert not sock.exists() and second.poll() is None  # it neither listens nor gives up
        with qtbot.waitSignal(first.activated, timeout=20000):
            assert first.listen()
        assert second.wait(30) == 0, log.read_text()
        assert "already open" in log.read_text()
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
        first.close()
        first.deleteLater()
        first_lock.unlock()


def test_two_herds_started_together_open_one_window(qtbot, tmp_path):
    """Two `herd` let go at the same instant (each waits at a barrier with Qt and the app already
    imported): exactly one opens its window, the other brings that one to the front and leaves."""
    env = _env(tmp_path)
    go = ("import sys, gui.app, gui.main\n"
          "sys.stdin.readline()\n"  # the barrier: both are let go together
          "sys.exit(gui.main.main(['--quit-after', '300']))\n")
    logs = [tmp_path / f"herd-{i}.log" for i in range(2)]
    herds = []
    try:
        for log in logs:
            with open(log, "w") as out:
                herds.append(subprocess.Popen([sys.executable, "-c", go], env=env, stdin=subprocess.PIPE, stdout=out,
                                              stderr=subprocess.STDOUT))
        # both imported: the import's own slowness says nothing of the race; then let go at once
        for h in herds:
            h.stdin.write(b"go\n")
        for h in herds:
            h.stdin.flush()
            h.stdin.close()
        qtbot.waitUntil(lambda: any(h.poll() is not None for h in herds), timeout=60000)
        left = [i for i, h in enumerate(herds) if h.poll() is not None]
        assert len(left) == 1, [log.read_text() for log in logs]
        stays = 1 - left[0]
        assert herds[left[0]].returncode == 0 and "already open" in logs[left[0]].read_text(), logs[left[0]].read_text()
        qtbot.waitUntil(lambda: "bringing it to the front" in logs[stays].read_text(), timeout=10000)
        assert herds[stays].poll() is None
    finally:
        for h in herds:
            if h.poll() is None:
                h.send_signal(signal.SIGTERM)  # closes the window as a person would
        for h in herds:
            try:
                h.wait(60)
            except subprocess.TimeoutExpired:
                h.kill()
                h.wait()
    assert all(h.returncode == 0 for h in herds), [log.read_text() for log in logs]
    assert not Path(env["HERD_CONFIG_DIR"], "herd-app.lock").exists()  # a clean exit lets the claim go
