"""``herd demo --no-app``: two real agents on loopback, their PINs printed, all gone on Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest

pytestmark = pytest.mark.engine


def test_demo_starts_two_agents_and_stops_them(engine, demo_model, tmp_path):
    env = dict(os.environ, HERD_ENGINE_DIR=str(engine.folder), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "gui.main", "demo", "--no-app", "--model", str(demo_model)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            stdin=subprocess.DEVNULL)
    lines = []
    try:
        deadline = time.monotonic() + 60
        while sum("PIN" in line for line in lines) < 2:
            line = proc.stdout.readline()
            assert line, "herd demo ended early:\n" + "".join(lines)
            lines.append(line)
            assert time.monotonic() < deadline, "".join(lines)
        agents = re.findall(r"agent (demo-\w): (https://127\.0\.0\.1:\d+)\s+PIN (\d{5} ?\d{5})", "".join(lines))
        assert [a[0] for a in agents] == ["demo-a", "demo-b"]
        for _, url, _ in agents:
            # (the public /info over the agent's TLS: who the node is, before any pairing; its
            # certificate is pinned at pairing, not checked against a CA)
            info = httpx.get(url + "/api/v1/info", timeout=5, verify=False).json()
            assert info["name"] in ("demo-a", "demo-b")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        for _, url, _ in agents:
            with pytest.raises(httpx.HTTPError):
                httpx.get(url + "/api/v1/info", timeout=2, verify=False)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
