"""A cluster profile someone sent cannot make herd run what the user never saw (#32), on the
simulated LAN: a master ``m``, a paired worker ``a`` and an attacker ``x`` that counts every
connection to its would-be ``ggml-rpc-server`` port and to the master's endpoint.

A real profile is exported with ``herd export``, then changed the way a sender would: extra
arguments that send the weights to the attacker (``--rpc X:50052 -ngl 99``), open the endpoint
(``--host 0.0.0.0``, ``--host=…``, ``server.host``), write the user's files (``--log-file``,
``--slot-save-path``) or hide an option as another one's value. ``herd up profile.json`` refuses
each with the argument named, exit status 2, before anything starts: the attacker sees no
connection, the worker's RPC server never starts, the user's file keeps its contents and nothing
listens on the endpoint's port. Before #32 the ``--rpc`` profile sent the whole model to the
attacker and the ``--host`` ones listened on every address while herd printed a loopback URL.

Needs root (network namespaces) and the engine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cluster.agents import start_agent
from e2e.herd_cli import herd
from e2e.test_lan_attacks import Attack
from lan import Lan

pytestmark = [pytest.mark.engine, pytest.mark.netns]

API, RPC, ECHO = 50050, 50052, 50053
ENDPOINT = 8088
ROOT = Path(__file__).resolve().parents[2]


def _env(folder: Path) -> dict:
    return {**os.environ, "HERD_CONFIG_DIR": str(folder), "PYTHONPATH": str(ROOT)}


def _sent(good: dict, path: Path, *, extra: list[str] | None = None, host: str | None = None) -> Path:
    """``good`` as a sender changed it, written to ``path``."""
    doc = json.loads(json.dumps(good))
    if extra is not None:
        doc["server"]["extra_args"] = extra
    if host is not None:
        doc["server"]["host"] = host
    path.write_text(json.dumps(doc))
    return path


def test_a_sent_profile_that_asks_for_owned_or_file_arguments_is_refused_before_anything_starts(
        engine, demo_model, tmp_path):
    with Lan(["m", "a", "x"]) as lan:
        m, a_host, x = lan["m"], lan["a"], lan["x"]
        a = start_agent(a_host.popen, tmp_path, "a", bind=a_host.ip, api_port=API, rpc_port=RPC,
                        echo_port=ECHO, mdns=False)
        env = _env(tmp_path / "master")
        r = herd(["pair", f"{a_host.ip}:{API}", "--pin", a.pin()], env, wrap=m.cmd)
        assert r.returncode == 0, r.stdout + r.stderr
        good_path = tmp_path / "good.json"
        r = herd(["export", "-o", good_path, "--model", demo_model, "--split", "a=7,host=2", "--ctx", "512",
                  "--port", ENDPOINT, "--no-mdns", "--timeout", "0"], env, wrap=m.cmd)
        assert r.returncode == 0, r.stdout + r.stderr
        good = json.loads(good_path.read_text())
        assert "host" not in good["server"]  # a profile never says where the endpoint listens

        victim = tmp_path / "notes.txt"
        victim.write_text("the user's own notes\n")
        cases = [
            (["--rpc", f"{x.ip}:{RPC}", "-ngl", "99"], None, "--rpc"),
            (["--threads", "1", f"--rpc={x.ip}:{RPC}"], None, "--rpc"),
            (["--temp", "--rpc", f"{x.ip}:{RPC}"], None, "looks like an option"),
            (["--host", "0.0.0.0"], None, "--host"),
            (["--host=0.0.0.0"], None, "--host"),
            (None, "0.0.0.0", "server.host"),
            (["--log-file", str(victim)], None, "--log-file"),
            (["--slot-save-path", str(tmp_path)], None, "--slot-save-path"),
            (["--slot-save-path=" + str(tmp_path)], None, "--slot-save-path"),
        ]
        attacker = Attack(x, ["count", x.ip, f"{RPC},{ENDPOINT}"], env)
        try:
            attacker.wait_for(lambda s: s.get("listening") or "connections" in s, 20, "the attacker is not listening")
            for i, (extra, host, named) in enumerate(cases):
                sent = _sent(good, tmp_path / f"sent-{i}.json", extra=extra, host=host)
                r = herd(["up", sent, "--no-mdns", "--timeout", "0", "--load-timeout", "60"], env, wrap=m.cmd,
                         timeout=90)
                said = r.stdout + r.stderr
                assert r.returncode == 2, (extra, host, said)
                assert named in r.stderr and "Traceback" not in said, (extra, host, said)
                assert "Starting" not in r.stdout and "Serving" not in r.stdout, said
                # nothing listens where the endpoint would have
                probe = x.run(["python3", "-c", "import socket,sys; s=socket.socket(); s.settimeout(2); "
                                                "sys.exit(s.connect_ex((sys.argv[1], int(sys.argv[2]))))",
                               m.ip, str(ENDPOINT)], timeout=10)
                assert probe.returncode != 0, f"something listens on {m.ip}:{ENDPOINT} after {extra or host}"
            attacker.wait_for(lambda s: "connections" in s, 5, "no count from the attacker")
            report = attacker.last
        finally:
            attacker.stop()
        assert report["connections"] == 0, report
        assert victim.read_text() == "the user's own notes\n"
        assert not any(p.suffix == ".bin" for p in tmp_path.iterdir())  # no slot file
        r = herd(["nodes", "--json", "--no-mdns", "--timeout", "0", "--add", f"{a_host.ip}:{API}"], env, wrap=m.cmd)
        node = next(n for n in json.loads(r.stdout) if n["id"] == a.node_id)
        assert node["state"] == "stopped", node  # the worker's RPC server was never started
