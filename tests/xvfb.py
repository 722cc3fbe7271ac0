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


@pytest.fixture(scope="session")
def x_display():
    """A real X server (Xvfb) for windows the agent opens; yields its display name (``:N``).

    One server for the whole run, which outlives this process. Tk keeps its connection to a
    display until the process exits, and Xlib ends the process (status 1) when a server goes
    away under a connection it still holds, even one whose windows are long gone: so no X
    server may stop while this process runs. Xvfb is started detached (not a child of this
    process) with ``-terminate``: it ends by itself when its last client leaves, and the Tk root
    this fixture keeps open is that last client until the process exits.

    Xvfb picks a free display number itself (``-displayfd``) and writes it once it accepts
    clients; the fixture then waits for its socket.
    """
    from conftest import missing  # noqa: PLC0415 - conftest imports this module

    if shutil.which("Xvfb") is None:
        missing("Xvfb not installed (apt-get install xvfb)")
    try:
        import tkinter  # noqa: PLC0415 - optional in some Python builds
    except ImportError:
        missing("this Python has no tkinter (python3-tk)")
    read_fd, write_fd = os.pipe()
    # (sh starts Xvfb in the background and exits: Xvfb is then nobody's child here)
    subprocess.run(["sh", "-c", f'Xvfb -displayfd {write_fd} -nolisten tcp -terminate '
                                f'-screen 0 1024x768x24 >/dev/null 2>&1 </dev/null &'],
                   pass_fds=(write_fd,), check=True)
    os.close(write_fd)
    with os.fdopen(read_fd) as numbers:
        number = numbers.readline().strip()  # written when the server is ready
    if not number.isdigit():
        raise AssertionError("Xvfb did not start")
    socket_path = Path(f"/tmp/.X11-unix/X{number}")
    deadline = time.monotonic() + 10
    while not socket_path.exists():
        assert time.monotonic() < deadline, f"no {socket_path}"
        time.sleep(0.01)  # polling for the socket the server creates
    keeper = tkinter.Tk(screenName=f":{number}", className="herd-test-display")
    keeper.withdraw()
    yield f":{number}"
    # keeper stays: its connection ends with this process, and with it the server


@pytest.fixture
def tk_root(x_display):
    """A Tk root on the test's X server, destroyed after the test."""
    from conftest import missing  # noqa: PLC0415 - conftest imports this module

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
