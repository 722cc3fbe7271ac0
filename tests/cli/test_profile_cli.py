"""``herd up`` refuses what comes from outside in words, before it looks for nodes (#32): a
deeply nested profile and ``--server-args`` that herd does not pass on. The real ``herd``
program runs; no node is needed, since nothing gets that far."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
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


@pytest.mark.engine
def test_up_says_what_a_profile_will_run_before_it_looks_for_nodes(tmp_path, demo_model, engine):
    """The profile's own options and what it changes from herd's defaults are printed first; here
    its node is gone, so nothing starts after that (exit 1, the node named)."""
    from conftest import free_port

    from gui.cluster.launching.profile import make_profile, save_profile
    from gui.cluster.llama.model import inspect_model
    from gui.cluster.planning.plan import Device, Plan

    info = inspect_model(demo_model)
    gone = Device("id-gone", "gone-pc", f"127.0.0.1:{free_port()}", 0, "CPU", 1 << 30, 2 << 30)
    plan = Plan(info.n_layer, 2, ((gone, info.n_slots - 2),))
    made = make_profile(plan, info, [], ctx=2048, port=8181, extra_args=["--temp", "0.7"])
    path = save_profile(tmp_path / "sent.json", made)
    r = herd(["up", path, "--no-mdns", "--timeout", "0"], _env(tmp_path), timeout=90)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "further llama-server options from the profile: --temp 0.7" in r.stdout, r.stdout
    assert "note: server: context 2048 replaces 4096" in r.stderr and "note: server: port 8181 replaces 8080" in r.stderr
    assert "gone-pc: node is missing" in r.stderr and "Starting" not in r.stdout, r.stderr
