"""A real X server for tests of windows the agent opens (the pairing PIN window), and helpers to
drive Tk windows on it: in this process (``tk_root``) or in another program (``tk_app_shown``,
reading the other program's widgets through Tk's ``send``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import missing


@pytest.fixture(scope="module")
def x_display():
    """A real X server (Xvfb) for windows the agent opens; yields its display name (``:N``).

    Xvfb picks a free display number itself (``-displayfd``) and writes it once it accepts
    clients; the fixture then waits for its socket and stops the server after the module.
    One server serves the whole module: Tk keeps its connection to a display until the process
    exits, and Xlib ends the process when that server goes away under it, so the server must
    outlive every window the module's tests open in this process.
    """
    if shutil.which("Xvfb") is None:
        missing("Xvfb not installed (apt-get install xvfb)")
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write_fd), "-nolisten", "tcp",
                             "-screen", "0", "1024x768x24"], pass_fds=(write_fd,),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(write_fd)
    try:
        with os.fdopen(read_fd) as numbers:
            number = numbers.readline().strip()  # written when the server is ready
        if not number.isdigit():
            raise AssertionError(f"Xvfb did not start: {proc.stderr.read().decode(errors='replace')}")
        socket_path = Path(f"/tmp/.X11-unix/X{number}")
        deadline = time.monotonic() + 10
        while not socket_path.exists():
            assert time.monotonic() < deadline and proc.poll() is None, f"no {socket_path}"
            time.sleep(0.01)
        yield f":{number}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()


@pytest.fixture
def tk_root(x_display):
    """A Tk root on the test's X server, destroyed after the test."""
    try:
        import tkinter  # noqa: PLC0415 - optional in some Python builds
    except ImportError:
        missing("this Python has no tkinter (python3-tk)")
    root = tkinter.Tk(screenName=x_display, className="herd-agent-pin-test")
    yield root
    root.destroy()


def pump_until(root, condition, timeout: float = 10.0) -> None:
    """Let Tk handle its events (redraws, timers) until ``condition()`` holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the window did not get there in time"
        root.update()
        time.sleep(0.005)  # the loop polls a condition; it never waits in place of one


def tk_app_shown(root, app: str, widget: str, proc: subprocess.Popen, timeout: float = 30.0) -> bool:
    """Wait until the Tk program ``app`` (another process, ``proc``) shows ``widget``; False when
    ``proc`` ended first."""
    def shown() -> bool:
        if app not in root.tk.splitlist(root.tk.call("winfo", "interps")):
            return False
        return bool(int(root.tk.call("send", app, f"winfo ismapped {widget}")))

    pump_until(root, lambda: proc.poll() is not None or shown(), timeout)
    return proc.poll() is None
