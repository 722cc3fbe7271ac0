"""Both programs end quietly when the reader of their output goes away (#37 item 9):
``herd engine status --json | head -1`` ended in a BrokenPipeError traceback.

Real pipes and the real programs in subprocesses. A pipe whose read end is closed before the
program writes makes the failure certain; the ``| head -1`` of the issue is run as well.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agent.closed_pipe import CLOSED_PIPE_EXIT

HERD = [sys.executable, "-m", "gui.main"]
AGENT = [sys.executable, "-m", "agent.main"]


def _into_closed_pipe(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    """Run ``argv`` with its standard output a pipe nobody reads any more."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(argv, stdout=write_end, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              text=True, env=env, timeout=120)
    finally:
        os.close(write_end)


@pytest.fixture
def env(tmp_path) -> dict:
    """Private config and state folders, so the programs touch nothing of the user's."""
    out = dict(os.environ, HERD_CONFIG_DIR=str(tmp_path / "config"))
    for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        out[var] = str(tmp_path / var.lower())
    return out


@pytest.mark.parametrize("argv", [
    HERD + ["engine", "status", "--json"],
    AGENT + ["config", "--state-dir", "STATE"],
], ids=["herd engine status --json", "herd-agent config"])
def test_a_closed_pipe_ends_the_program_quietly(argv, env, tmp_path):
    argv = [str(tmp_path / "state") if a == "STATE" else a for a in argv]
    r = _into_closed_pipe(argv, env)
    assert r.stderr == "", r.stderr[-2000:]
    assert r.returncode == CLOSED_PIPE_EXIT


@pytest.mark.skipif(sys.platform == "win32", reason="runs the pipeline in bash")
def test_herd_engine_status_json_into_head(env):
    """The issue's own command line. Whether head has gone before herd writes is up to the
    scheduler: either way, the first line comes out and nothing else is said."""
    cmd = " ".join(HERD) + ' engine status --json | head -1; echo "status ${PIPESTATUS[0]}" >&2'
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, timeout=120)
    assert r.stdout == "{\n"
    *said, status = r.stderr.splitlines()
    assert said == [], r.stderr[-2000:]
    assert status in ("status 0", "status 1", f"status {CLOSED_PIPE_EXIT}")  # 1: no complete engine
