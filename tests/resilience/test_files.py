"""Nothing lost: the one atomic writer survives ``kill -9`` mid-write, and a corrupt file is
reported and set aside instead of being replaced with defaults."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.files import (CorruptFile, parse_json_object, read_or_set_aside, set_aside,
                         write_atomic, write_json_atomic)

# A child that rewrites the file as fast as it can: each copy is ~2 MB of one generation
# number, so a torn write would show as bad JSON or mixed numbers.
WRITER = r"""
import json, sys
from agent.files import write_json_atomic
path = sys.argv[1]
gen = 0
while True:
    gen += 1
    write_json_atomic(path, {"gen": gen, "fill": [gen] * 250_000}, 0o600)
    print(gen, flush=True)
"""


def _check_whole(path: Path) -> int:
    data = json.loads(path.read_bytes())
    assert set(data["fill"]) == {data["gen"]} and len(data["fill"]) == 250_000
    return data["gen"]


def test_kill_9_mid_write_leaves_the_previous_good_copy(tmp_path):
    path = tmp_path / "state.json"
    write_json_atomic(path, {"gen": 0, "fill": [0] * 250_000})
    seen = []
    for round_ in range(12):
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE,
                                 text=True, stdin=subprocess.DEVNULL)
        try:
            # Let it finish a few writes, then kill it at a moment that varies per round: most
            # kills land inside a write (each takes far longer than the loop around it).
            for _ in range(1 + round_ % 3):
                assert child.stdout.readline(), "the writer died by itself"
            time.sleep(0.003 * round_)
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait(timeout=10)
        seen.append(_check_whole(path))
        assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert all(g >= 1 for g in seen)


def test_failed_write_keeps_old_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "settings.toml"
    write_atomic(path, "name = 'old'\n")

    with pytest.raises(TypeError):
        write_atomic(path, 12345)  # not bytes/str: fails after the temp file was made
    assert path.read_text() == "name = 'old'\n"
    assert [p.name for p in tmp_path.iterdir()] == ["settings.toml"]


def test_mode_is_set_before_the_data(tmp_path):
    path = write_atomic(tmp_path / "sub" / "tokens.json", b"{}", mode=0o600)
    assert path.read_bytes() == b"{}"
    assert path.stat().st_mode & 0o777 == 0o600


def test_corrupt_file_is_reported_and_set_aside(tmp_path):
    path = tmp_path / "profile.json"
    path.write_bytes(b'{"version": 1, "nodes": [')  # half-written by something that is not us
    with pytest.raises(CorruptFile) as info:
        read_or_set_aside(path, parse_json_object)
    err = info.value
    assert err.path == path and not path.exists()
    assert err.moved_to.name.startswith("profile.json.corrupt-")
    assert err.moved_to.read_bytes() == b'{"version": 1, "nodes": ['  # kept, byte for byte
    assert "profile.json" in str(err) and err.moved_to.name in str(err)
    # A second corrupt copy in the same second does not overwrite the first one.
    path.write_bytes(b"[1, 2]")
    with pytest.raises(CorruptFile, match="not a JSON object") as info2:
        read_or_set_aside(path, parse_json_object)
    assert info2.value.moved_to != err.moved_to and err.moved_to.exists()


def test_missing_and_good_files(tmp_path):
    path = tmp_path / "x.json"
    assert read_or_set_aside(path, parse_json_object, missing=dict) == {}
    with pytest.raises(FileNotFoundError):
        read_or_set_aside(path, parse_json_object)
    write_json_atomic(path, {"a": 1})
    assert read_or_set_aside(path, parse_json_object) == {"a": 1}
    assert path.exists()


def test_a_file_that_cannot_be_read_is_not_set_aside(tmp_path):
    # An OSError other than "missing" (here: the name is a folder) says nothing about the
    # contents, so nothing is moved.
    path = tmp_path / "x.json"
    path.mkdir()
    with pytest.raises(IsADirectoryError):
        read_or_set_aside(path, parse_json_object)
    assert path.is_dir() and not list(tmp_path.glob("*.corrupt-*"))


def test_set_aside_names(tmp_path):
    p = tmp_path / "a.json"
    p.write_text("x")
    moved = set_aside(p)
    assert moved.parent == tmp_path and moved.name.startswith("a.json.corrupt-") and not p.exists()
