"""``herd up`` refuses what comes from outside in words, before it looks for nodes (#32): a
deeply nested profile and ``--server-args`` that herd does not pass on. The real ``herd``
program runs; no node is needed, since nothing gets that far."""

from __future__ import annotations

import os
from pathlib import Path

from e2e.herd_cli import herd

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path) -> dict:
    return {**os.environ, "HERD_CONFIG_DIR": str(tmp_path / "config"), "PYTHONPATH": str(ROOT)}


def test_a_deeply_nested_profile_is_an_error_in_words(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"format": "llama-herd-profile", "x": ' + "[" * 50_000 + "]" * 50_000 + "}")
    r = herd(["up", deep, "--no-mdns", "--timeout", "0"], _env(tmp_path), timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "nested deeper than 32 levels" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_server_args_that_herd_owns_are_refused_by_name(tmp_path, demo_model):
    for given, named in (("--rpc 127.0.0.1:9 -ngl 99", "--rpc"), ("--threads 1 --host=0.0.0.0", "--host"),
                         ("--log-file /tmp/x", "--log-file")):
        r = herd(["up", demo_model, "--server-args", given, "--no-mdns", "--timeout", "0"], _env(tmp_path),
                 timeout=60)
        assert r.returncode == 2, r.stdout + r.stderr
        assert f"--server-args: llama-server option {named}" in r.stderr and "Traceback" not in r.stderr, r.stderr
