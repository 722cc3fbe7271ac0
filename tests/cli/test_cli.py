"""The headless cluster commands through the real ``herd`` program, against real agents on
loopback: plan output, doctor, and bad inputs — each a clear message, a non-zero exit status and
nothing launched."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess

import httpx
import psutil
import pytest
from cluster.agents import start_agent
from conftest import free_port
from e2e.herd_cli import HERD, HerdUp, herd, rpc_children, same_but_forwarders

from gui.cluster.launching.profile import load_profile
from gui.cluster.llama.model import inspect_model

pytestmark = pytest.mark.engine


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    e["HERD_CONFIG_DIR"] = str(tmp_path / "master-config")
    return e


@pytest.fixture
def paired(procs, tmp_path, env):
    """Two agents on loopback, added by address and paired with this master."""
    agents = [start_agent(procs.popen, tmp_path, name, mdns=False) for name in ("alpha", "beta")]
    for a in agents:
        r = herd(["pair", a.api_url, "--pin", a.pin()], env)
        assert r.returncode == 0, r.stderr
    return agents


def _llama_servers_for(model) -> list[int]:
    out = []
    for p in psutil.process_iter(["name", "cmdline"]):
        if "llama-server" in (p.info["name"] or "") and str(model) in (p.info["cmdline"] or []):
            out.append(p.pid)
    return out


def test_plan_prints_fit_and_exact_commands(paired, demo_model, env, tmp_path):
    alpha, beta = paired
    r = herd(["plan", "--model", demo_model, "--split", "beta=4,alpha=5", "--ctx", "1024",
              "--no-mdns", "--port", "18123"], env)
    assert r.returncode == 0, r.stderr
    # The split names beta first, so beta is RPC0: --rpc order follows the split.
    ep_a, ep_b = f"127.0.0.1:{alpha.rpc_port}", f"127.0.0.1:{beta.rpc_port}"
    assert f"beta CPU        4 slots  0-3  ({ep_b})" in r.stdout
    assert f"alpha CPU       5 slots  4-8  ({ep_a})" in r.stdout
    assert "fits" in r.stdout and "short by" not in r.stdout
    master = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("master: "))
    argv = shlex.split(master.split("master: ", 1)[1])
    assert argv[argv.index("--rpc") + 1] == f"{ep_b},{ep_a}"
    assert argv[argv.index("-ngl") + 1] == "9" and argv[argv.index("-ts") + 1] == "4,5"
    assert argv[argv.index("-c") + 1] == "1024" and argv[argv.index("--port") + 1] == "18123"

    r = herd(["plan", "--model", demo_model, "--ctx", "1024", "--no-mdns", "--json"], env)
    data = json.loads(r.stdout)
    assert r.returncode == 0 and data["fits_all"] is True
    # Default plan: by free memory; both workers report the same free RAM here, so all 9 slots
    # are offloaded and shared between them.
    assert data["plan"]["host_layers"] == 0
    assert sorted(a["count"] for a in data["plan"]["assignments"]) == [4, 5]

    # The same planning step exports a profile for a model that is not running yet.
    out = tmp_path / "planned.json"
    r = herd(["export", "--model", demo_model, "--split", "beta=4,alpha=5", "--ctx", "1024",
              "--no-mdns", "-o", out], env)
    assert r.returncode == 0, r.stderr
    profile = load_profile(out)
    assert [(a.device.node_name, a.count) for a in profile.plan.assignments] == [("beta", 4), ("alpha", 5)]
    assert profile.model.sha256 and {n.name for n in profile.nodes.values()} == {"alpha", "beta"}


def test_doctor_reports_each_node(paired, env):
    r = herd(["doctor", "--no-mdns", "--json"], env)
    assert r.returncode == 0, r.stderr
    findings = json.loads(r.stdout)
    for name in ("alpha", "beta"):
        codes = {f["code"] for f in findings if f["subject"] == name}
        assert {"reachable", "version", "paired", "echo"} <= codes
    assert not [f for f in findings if f["severity"] == "error"]


def test_corrupt_gguf_is_refused(tmp_path, env):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    for cmd in (["plan", "--model", bad], ["up", bad]):
        r = herd([*cmd, "--no-mdns"], env)
        assert r.returncode == 2
        assert str(bad) in r.stderr and "corrupt" in r.stderr
    notgguf = tmp_path / "notes.gguf"
    notgguf.write_text("hello")
    r = herd(["up", notgguf, "--no-mdns"], env)
    assert r.returncode == 2 and "not a GGUF file" in r.stderr
    assert _llama_servers_for(bad) == [] and _llama_servers_for(notgguf) == []


def test_plan_that_does_not_fit_launches_nothing(paired, demo_model, env):
    # A context whose KV cache is eight times this machine's RAM: whatever the split, some
    # device (all of them share this RAM) is short, on a small or a large machine alike.
    model = inspect_model(demo_model)
    ctx = -(-8 * psutil.virtual_memory().total // (model.kv_bytes(256, range(model.n_slots)) // 256))  # per token
    r = herd(["up", demo_model, "--no-mdns", "--ctx", str(ctx), "--port", str(free_port())], env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "does not fit" in r.stderr and "short by" in r.stderr
    assert _llama_servers_for(demo_model) == []
    assert all(rpc_children(a.proc.pid) == [] for a in paired)


def test_unknown_node_in_split_is_refused(paired, demo_model, env):
    r = herd(["up", demo_model, "--no-mdns", "--split", "ghost=3,alpha=2", "--port", str(free_port())], env)
    assert r.returncode == 2
    assert "'ghost': unknown node" in r.stderr
    assert _llama_servers_for(demo_model) == []


def test_vanished_node_is_refused(paired, demo_model, env):
    alpha, beta = paired
    beta.proc.kill()
    beta.proc.wait(timeout=5)
    r = herd(["up", demo_model, "--no-mdns", "--port", str(free_port())], env)
    assert r.returncode == 1
    assert f"no herd agent answers at {beta.api_url.removeprefix('https://')}" in r.stderr
    assert "vanished" in r.stderr
    assert _llama_servers_for(demo_model) == [] and rpc_children(alpha.proc.pid) == []


def _serve_and_stop(procs, env, *target: str) -> HerdUp:
    """``herd up TARGET…`` until it serves a chat reply, then Ctrl-C."""
    up = HerdUp(procs.popen(HERD + ["up", *target, "--no-mdns", "--ctx", "512",
                                    "--port", str(free_port()), "--threads", "1"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    up.wait_for("Serving", 120)
    reply = httpx.post(up.endpoint() + "/v1/chat/completions", timeout=60,
                       json={"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4})
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 4, reply.text
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=30) == 0, "\n".join(up.lines)
    return up


@pytest.mark.slow
def test_a_dead_node_blocks_only_the_plans_that_use_it(paired, demo_model, env, procs, tmp_path):
    """Issue 11: a remembered node that no longer answers must not block a plan without it."""
    alpha, beta = paired
    beta.proc.kill()
    beta.proc.wait(timeout=5)
    dead = beta.api_url.removeprefix("https://")
    n = inspect_model(demo_model).n_layer + 1
    a_ep = f"127.0.0.1:{alpha.rpc_port}"

    # A plan that needs no node at all, one on alpha only (beta named with 0 slots) and a profile
    # of that plan: each serves, and the dead node gets a warning line naming its address.
    on_alpha = {"host": list(range(n - 4)), a_ep: list(range(n - 4, n))}
    profile = tmp_path / "on-alpha.json"
    r = herd(["export", "--model", demo_model, "--split", "alpha=4", "--ctx", "512", "--no-mdns", "-o", profile], env)
    assert r.returncode == 0, r.stderr
    for target, placement in (([demo_model, "--split", f"host={n}"], {"host": list(range(n))}),
                              ([demo_model, "--split", "alpha=4,beta=0"], on_alpha),
                              ([profile], on_alpha)):
        up = _serve_and_stop(procs, env, *target)
        assert up.placement() == placement, "\n".join(up.lines)
        warned = [ln for ln in up.lines if ln.startswith("warning:") and dead in ln]
        assert warned and "does not use it" in warned[0], "\n".join(up.lines)

    # A split that gives the dead node slots is refused, naming it, and nothing is launched.
    r = herd(["up", demo_model, "--no-mdns", "--split", "alpha=4,beta=5", "--port", str(free_port())], env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "the split gives 5 slots to beta" in r.stderr and "does not answer" in r.stderr, r.stderr
    assert dead in r.stderr
    assert _llama_servers_for(demo_model) == [] and rpc_children(alpha.proc.pid) == []
    # herd plan says the same
    r = herd(["plan", "--model", demo_model, "--no-mdns", "--split", "beta=9"], env)
    assert r.returncode == 1 and "the split gives 9 slots to beta" in r.stderr, r.stderr


def test_version_mismatch_is_refused(procs, tmp_path, env, engine, demo_model):
    """A worker whose engine is another llama.cpp build (same programs, a manifest that says
    build 9999 / RPC protocol 6.0.0): the doctor stops the launch before anything starts."""
    other = tmp_path / "other-engine"
    other.mkdir()
    for f in engine.rpc_server.parent.iterdir():
        (other / f.name).symlink_to(f)
    (other / "engine.json").unlink(missing_ok=True)
    (other / "engine.json").write_text(json.dumps({"build": 9999, "rpc_proto": "6.0.0", "origin": "test"}))
    odd = start_agent(procs.popen, tmp_path, "odd", mdns=False, extra=["--engine-dir", str(other)])
    r = herd(["pair", odd.api_url, "--pin", odd.pin()], env)
    assert r.returncode == 0, r.stderr
    r = herd(["up", demo_model, "--no-mdns", "--port", str(free_port())], env)
    assert r.returncode == 1
    assert "not launching" in r.stderr and "RPC protocol 6.0.0" in r.stderr
    assert _llama_servers_for(demo_model) == [] and rpc_children(odd.proc.pid) == []
    r = herd(["doctor", "--no-mdns"], env)
    assert r.returncode == 1 and "ERROR   odd:" in r.stdout


def test_bad_address_and_wrong_pin(procs, tmp_path, env):
    r = herd(["pair", "host:99999", "--pin", "123456"], env)
    assert r.returncode == 2 and "port must be a number from 1 to 65535" in r.stderr
    a = start_agent(procs.popen, tmp_path, "gamma", mdns=False)
    wrong = "000000" if a.pin() != "000000" else "111111"
    r = herd(["pair", a.api_url, "--pin", wrong], env)
    assert r.returncode == 1 and "pairing with" in r.stderr and "wrong PIN" in r.stderr
    # words a person can act on, not a status code (a word of its own: the port may hold "403")
    assert not re.search(r"\b403\b", r.stderr) and "HTTP" not in r.stderr
    r = herd(["nodes", "--no-mdns", "--add", f"127.0.0.1:{free_port()}"], env)
    assert r.returncode == 1 and "no herd agent answers" in r.stderr


def test_failed_launch_is_explained_and_undone(paired, demo_model, env):
    """llama-server cannot bind its port: herd says so, and stops the workers it had started."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = herd(["up", demo_model, "--no-mdns", "--split", "alpha=4,beta=5", "--ctx", "512",
                  "--port", str(port)], env)
    assert r.returncode == 1
    assert f"launch failed: the port {port} is already in use" in r.stderr
    assert "Stopped: llama-server and the workers herd started." in r.stdout
    assert _llama_servers_for(demo_model) == []
    assert all(rpc_children(a.proc.pid) == [] for a in paired)


def test_profile_of_unknown_version_is_refused(tmp_path, env):
    prof = tmp_path / "future.json"
    prof.write_text(json.dumps({"format": "llama-herd-profile", "version": 99}))
    r = herd(["up", prof, "--no-mdns"], env)
    assert r.returncode == 2
    assert "profile.version: unknown profile version 99" in r.stderr
    prof.write_text("{broken")
    r = herd(["up", prof, "--no-mdns"], env)
    assert r.returncode == 2 and "not valid JSON" in r.stderr


def _serving_command_line(up: HerdUp) -> list[str]:
    [pid] = up.server_pids()
    return psutil.Process(pid).cmdline()


@pytest.mark.slow
def test_up_runs_a_saved_plan_with_its_exact_command_line(paired, demo_model, env, procs, tmp_path):
    """`herd up` takes what `herd plan --json` printed and runs exactly the command line it
    showed; the endpoint names the model by its file name, not its path on this disk (#12)."""
    port = str(free_port())
    r = herd(["plan", "--model", demo_model, "--split", "beta=4,alpha=5", "--ctx", "512", "--no-mdns",
              "--port", port, "--json"], env)
    assert r.returncode == 0, r.stderr
    saved = tmp_path / "plan.json"
    saved.write_text(r.stdout)
    planned = json.loads(r.stdout)["server_command"]
    up = HerdUp(procs.popen(HERD + ["up", saved, "--no-mdns", "--threads", "1"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    up.wait_for("Serving", 120)
    assert f"Starting {' '.join(planned)}" in up.lines
    assert same_but_forwarders(_serving_command_line(up), planned), (_serving_command_line(up), planned)
    models = httpx.get(up.endpoint() + "/v1/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == [demo_model.stem], models
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=30) == 0, "\n".join(up.lines)

    # a plan saved by an older herd does not name its model: say what to do instead
    old = json.loads(saved.read_text())
    del old["model"]
    saved.write_text(json.dumps(old))
    r = herd(["up", saved, "--no-mdns"], env)
    assert r.returncode == 2 and "herd export --model" in r.stderr, r.stderr
    assert _llama_servers_for(demo_model) == []


@pytest.mark.slow
def test_up_fastest_launches_what_plan_fastest_planned(paired, demo_model, env, procs, tmp_path):
    """`herd up --fastest` plans for speed as `herd plan --fastest` does (same measurements,
    cached per node and model) and runs that plan's command line (#12)."""
    env = {**env, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    port = str(free_port())
    r = herd(["plan", "--model", demo_model, "--fastest", "--ctx", "512", "--no-mdns", "--port", port,
              "--threads", "1", "--json"], env, timeout=600)
    assert r.returncode == 0, r.stderr
    planned = json.loads(r.stdout)["server_command"]
    up = HerdUp(procs.popen(HERD + ["up", demo_model, "--fastest", "--ctx", "512", "--no-mdns", "--port", port,
                                    "--threads", "1"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    up.wait_for("Serving", 300)
    assert any(ln.startswith("Fastest: predicted") for ln in up.lines), "\n".join(up.lines)
    assert f"Starting {' '.join(planned)}" in up.lines
    assert same_but_forwarders(_serving_command_line(up), planned), (_serving_command_line(up), planned)
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=30) == 0, "\n".join(up.lines)
    r = herd(["up", demo_model, "--fastest", "--split", "alpha=9", "--no-mdns"], env)
    assert r.returncode == 2 and "give one" in r.stderr, r.stderr
