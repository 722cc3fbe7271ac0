"""``herd model search|files|get`` through the real ``herd`` program and the real
``huggingface_hub`` client, against a local hub on 127.0.0.1 (set with HF_ENDPOINT, as a mirror
would be) and two real agents on loopback: the best fit is downloaded, verified and launched
across both agents with the placement llama-server reports matching the plan."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from cluster.agents import start_agent
from cluster.hub_server import HubServer, Repo, demo_repo_files
from conftest import free_port
from e2e.herd_cli import HERD, HerdUp, gone, herd, rpc_children

from gui.cluster.chat.client import chat

pytestmark = [pytest.mark.engine, pytest.mark.slow]

REPO = "herd-test/Tiny-GGUF"


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    return demo_repo_files(tmp_path_factory.mktemp("hub-src"))


@pytest.fixture
def hub(sources):
    with HubServer({REPO: Repo(dict(sources), downloads=3)}) as srv:
        yield srv


@pytest.fixture
def env(tmp_path, hub):
    e = dict(os.environ)
    e["HERD_CONFIG_DIR"] = str(tmp_path / "master-config")
    e["XDG_CACHE_HOME"] = str(tmp_path / "cache")   # node measurements
    e["HF_ENDPOINT"] = hub.url
    e["HF_HOME"] = str(tmp_path / "hf-home")        # no token of the user's goes to the test hub
    # A read waits as long as the test hub holds a body back (the Ctrl-C test pauses it until it
    # has interrupted the download): a busy machine must not turn that pause into a resume.
    e["HF_HUB_DOWNLOAD_TIMEOUT"] = "120"
    return e


@pytest.fixture
def paired(procs, tmp_path, env):
    agents = [start_agent(procs.popen, tmp_path, name, mdns=False) for name in ("alpha", "beta")]
    for a in agents:
        r = herd(["pair", a.api_url, "--pin", a.pin()], env)
        assert r.returncode == 0, r.stderr
    return agents


def _sha(p: Path) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


async def _up_and_check(procs, env, path: Path, agents) -> None:
    port = free_port()
    up = HerdUp(procs.popen(HERD + ["up", str(path), "--no-mdns", "--ctx", "512", "--port", str(port),
                                    "--threads", "1"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    up.wait_for("Serving", 180)
    assert any(ln.startswith("Placement matches the plan.") for ln in up.lines), "\n".join(up.lines)
    placed = up.placement()
    for a in agents:
        assert placed.get(f"127.0.0.1:{a.rpc_port}"), f"{a.name} got no layers:\n" + "\n".join(up.lines)
    async with httpx.AsyncClient() as client:
        done = await chat(client, up.endpoint(), [{"role": "user", "content": "Hello"}], max_tokens=16)
    assert done.timings["predicted_n"] == 16
    servers = up.server_pids()
    workers = [p for a in agents for p in rpc_children(a.proc.pid)]
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=30) == 0, "\n".join(up.lines)
    assert gone(servers) and gone(workers)


async def test_search_files_best_fit_get_and_launch(paired, hub, sources, env, procs, tmp_path):
    r = herd(["model", "search", "tiny"], env)
    assert r.returncode == 0, r.stderr
    assert REPO in r.stdout

    r = herd(["model", "files", REPO, "--no-mdns", "--ctx", "512", "--json"], env)
    assert r.returncode == 0, r.stderr
    listing = json.loads(r.stdout)
    assert sorted(listing["nodes"]) == ["alpha", "beta"]
    by = {f["name"]: f for f in listing["files"]}
    assert set(by) == {"Tiny-Q4_K_M.gguf", "Tiny-Q8_0.gguf", "Tiny-F16.gguf", "Tiny-Q8_0-00001-of-00002.gguf"}
    assert all(f["fits"] and f["n_layer"] == 8 for f in by.values())
    assert all("alpha=" in f["split"] and "beta=" in f["split"] for f in by.values())
    assert all(f["tokens_per_s"] is None for f in by.values())  # not measured yet
    assert [f["name"] for f in by.values() if f["suggested"]] == ["Tiny-F16.gguf"]  # the largest that fits
    r = herd(["model", "files", REPO, "--no-mdns", "--ctx", "512"], env)
    assert "* Tiny-F16.gguf  F16" in r.stdout and "not measured yet" in r.stdout

    r = herd(["model", "get", REPO, "--best-fit", "--no-mdns", "--ctx", "512", "--models-dir",
              tmp_path / "models"], env, timeout=300)
    assert r.returncode == 0, r.stderr
    path = Path(r.stdout.splitlines()[-1])
    assert path == tmp_path / "models" / "Tiny-F16.gguf"
    assert _sha(path) == _sha(sources["Tiny-F16.gguf"])
    assert "best fit: Tiny-F16.gguf" in r.stderr and "Verifying Tiny-F16.gguf" in r.stderr
    await _up_and_check(procs, env, path, paired)

    # herd plan --fastest measures the nodes (cached per node and model); the hub listing then
    # predicts every file's speed from those measurements
    r = herd(["plan", "--model", path, "--fastest", "--no-mdns", "--ctx", "512", "--json"], env, timeout=600)
    assert r.returncode == 0, r.stderr
    r = herd(["model", "files", REPO, "--no-mdns", "--ctx", "512", "--json"], env)
    speeds = {f["name"]: f["tokens_per_s"] for f in json.loads(r.stdout)["files"]}
    assert all(s is not None and s > 0 for s in speeds.values()), speeds
    # measured on F16: another quant is predicted per weight, not per byte (same weights per
    # layer, about the same compute; per byte would have promised Q4_K_M over 3x the speed)
    assert speeds["Tiny-Q4_K_M.gguf"] == pytest.approx(speeds["Tiny-F16.gguf"], rel=0.25)


async def test_get_a_split_model_and_launch_it(paired, hub, sources, env, procs, tmp_path):
    r = herd(["model", "get", REPO, "--file", "Tiny-Q8_0-00001-of-00002.gguf", "--models-dir",
              tmp_path / "models"], env)
    assert r.returncode == 0, r.stderr
    first = Path(r.stdout.splitlines()[-1])
    assert first == tmp_path / "models" / "Tiny-Q8_0-00001-of-00002.gguf"
    assert (tmp_path / "models" / "Tiny-Q8_0-00002-of-00002.gguf").is_file()
    await _up_and_check(procs, env, first, paired)


def test_bad_input_is_named(hub, env, tmp_path):
    r = herd(["model", "get", REPO, "--quant", "Q3_K_S", "--models-dir", tmp_path / "m"], env)
    assert r.returncode == 2
    assert "has no Q3_K_S file (quant types there: F16, Q4_K_M, Q8_0)" in r.stderr
    r = herd(["model", "files", "nobody/nothing", "--no-mdns"], env)
    assert r.returncode == 1 and "no such repository" in r.stderr
    r = herd(["model", "get", REPO, "--models-dir", tmp_path / "m"], env)
    assert r.returncode == 2 and "one of the arguments --file --quant --best-fit is required" in r.stderr
    r = herd(["model", "files", REPO, "--no-mdns", "--ctx", "0"], env)
    assert r.returncode == 2 and "--ctx must be a positive number" in r.stderr
    assert not (tmp_path / "m").exists()


def test_ctrl_c_stops_get_and_the_next_get_resumes(hub, sources, env, tmp_path):
    """Ctrl-C during `herd model get`: it says how to resume and exits 130, nothing lands in the
    models folder; the same command again asks only for the rest (HTTP Range)."""
    import time

    from huggingface_hub import constants

    models = tmp_path / "models"
    chunk = constants.DOWNLOAD_CHUNK_SIZE
    hub.pause_after = chunk + 1   # the hub holds the body back after the first chunk
    hub.chunk_pause.clear()
    argv = HERD + ["model", "get", REPO, "--quant", "F16", "--models-dir", str(models)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        partial = models / ".herd-downloads" / f"Tiny-F16.gguf.{_sha(sources['Tiny-F16.gguf'])[:16]}.part"
        deadline = time.monotonic() + 60
        while not (partial.is_file() and partial.stat().st_size == chunk):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "timeout"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        hub.chunk_pause.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "run the same command again to resume the download" in err
    assert list(models.glob("*.gguf")) == [] and partial.stat().st_size == chunk
    hub.requests.clear()
    r = herd(["model", "get", REPO, "--quant", "F16", "--models-dir", models], env)
    assert r.returncode == 0, r.stderr
    assert [q.range for q in hub.file_requests("Tiny-F16.gguf")] == [f"bytes={chunk}-"]
    assert _sha(Path(r.stdout.splitlines()[-1])) == _sha(sources["Tiny-F16.gguf"])
