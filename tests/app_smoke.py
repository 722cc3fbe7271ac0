"""Running the desktop app as a program until it closes itself: for the source checkout
(tests/gui/test_app_options.py) and the frozen bundle (tests/packaging/test_frozen_bundles.py)."""

from __future__ import annotations

import ipaddress
import os
import socket
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


MDNS_PORT = 5353


def run_window_smoke(argv: list[str], env: dict, timeout: float = 120) -> tuple[int, set[tuple[str, str, int]]]:
    """Run the app until it exits by itself; return its exit code and the local end of every
    socket it had while it ran, as ``(kind, address, port)`` with kind ``udp`` or ``tcp``
    (sampled until exit)."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    try:
        ps = psutil.Process(proc.pid)
        while proc.poll() is None:
            assert time.monotonic() < deadline, f"the app did not close itself within {timeout} s"
            try:
                seen |= {("udp" if c.type == socket.SOCK_DGRAM else "tcp", c.laddr.ip, c.laddr.port)
                         for c in ps.net_connections(kind="inet") if c.laddr}
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


def check_loopback_only(sockets: set[tuple[str, str, int]]) -> None:
    """mDNS ran (a UDP socket on 127.0.0.1:5353) and every socket was bound to loopback, except
    the IPv4 mDNS listener: receiving multicast needs 0.0.0.0:5353 (zeroconf joins the group on
    the chosen interfaces only). Any other wildcard — another port, IPv6's ``::``, TCP — would
    reach the LAN."""
    assert ("udp", "127.0.0.1", MDNS_PORT) in sockets, f"no mDNS socket on loopback: {sockets}"
    outside = {s for s in sockets
               if not ipaddress.ip_address(s[1]).is_loopback and s != ("udp", "0.0.0.0", MDNS_PORT)}
    assert not outside, f"sockets bound outside loopback: {outside}"
