"""Shared fixtures: the real llama.cpp engine, demo models, free ports and process hygiene.

In CI (``CI=true``) a missing engine fails the tests that need it; on a developer machine those
tests skip with the command that fixes it.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from agent.engine import PINNED_BUILD, Engine, find_engine
from gui.cluster.demo_model import DemoShape, write_demo_model

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# Widgets are tested offscreen; set before any QApplication exists.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on ``host``."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def engine() -> Engine:
    """The real llama.cpp engine of the pinned build (``herd engine install`` puts it in place)."""
    eng = find_engine(probe=True)
    problem = None
    if not eng.complete:
        problem = "no llama.cpp engine found"
    elif eng.build != PINNED_BUILD:
        problem = f"engine build {eng.build} is not the pinned {PINNED_BUILD}"
    if problem:
        msg = f"{problem}; run `herd engine install --from-source`"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return eng


@pytest.fixture(scope="session")
def demo_model(tmp_path_factory) -> Path:
    """A small (≈4 MB, 8-layer) demo GGUF shared by the whole session. Do not modify it."""
    return write_demo_model(tmp_path_factory.mktemp("models") / "demo-8L.gguf", DemoShape(layers=8))


class ProcessJar:
    """Processes a test started; on teardown each is terminated, then killed, and reaped."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def popen(self, cmd: list[str], **kw) -> subprocess.Popen:
        kw.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen([str(c) for c in cmd], **kw)
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)


@pytest.fixture
def procs():
    """Start processes with ``procs.popen([...])``; they are stopped and reaped after the test."""
    jar = ProcessJar()
    yield jar
    jar.close()
