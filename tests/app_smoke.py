"""Running the desktop app as a program until it closes itself: for the source checkout
(tests/gui/test_app_options.py) and the frozen bundle (tests/packaging/test_frozen_bundles.py)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import psutil


def app_env(tmp: Path) -> dict:
    """Offscreen Qt and private config/cache folders, so a run touches nothing of the user's."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HERD_CONFIG_DIR=str(tmp / "config"))
    for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        env[var] = str(tmp / var.lower())
    env.pop("HERD_INTERFACES", None)  # the option alone must keep discovery on loopback
    return env


def run_window_smoke(argv: list[str], env: dict, timeout: float = 120) -> tuple[int, set[str]]:
    """Run the app until it exits by itself; return its exit code and every local address its
    UDP sockets were bound to while it ran (sampled until exit)."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    try:
        ps = psutil.Process(proc.pid)
        while proc.poll() is None:
            assert time.monotonic() < deadline, f"the app did not close itself within {timeout} s"
            try:
                seen |= {c.laddr.ip for c in ps.net_connections(kind="udp") if c.laddr}
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                pass
            time.sleep(0.05)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, err[-3000:]
    return proc.returncode, seen


def check_loopback_only(udp_addresses: set[str]) -> None:
    """mDNS ran (a socket on 127.0.0.1) and nothing was bound to a non-loopback address."""
    assert "127.0.0.1" in udp_addresses, f"no mDNS socket on loopback: {udp_addresses}"
    others = {a for a in udp_addresses if a not in ("0.0.0.0", "::") and not a.startswith("127.")}
    assert not others, f"sockets bound outside loopback: {others}"
