"""A GPU build given to the agent by folder (``engine_dir``) is run as the GPU build it is (#26).

On a simulated LAN of a master and a gaming PC whose GPU is lavapipe (see ``e2e.gpu``):

* the Vulkan build ``herd engine install --backend vulkan`` made, given as ``--engine-dir``: the
  agent reads its backend from herd's ``engine.json`` and offers ``Vulkan0`` and ``CPU``;
  ``herd up`` starts its worker with ``-d Vulkan0,CPU`` and the placement matches the plan;
* the same build's programs and libraries copied into a folder of their own, without herd's
  ``engine.json`` (as a user who built llama.cpp has them in ``build/bin``): ``herd engine
  status`` and the doctor say what it is (a Vulkan build of the pinned build, with RPC, set up
  by hand) and which GPU it finds; an agent given it with ``--backend cpu`` says the folder holds
  a Vulkan build, runs it as one, and serves a split across its GPU and its CPU.

The split gives the master's own CPU no layer: on a CPU with AMX, llama-server crashes at
warm-up when host layers are repacked, and these tests are about the worker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import httpx
import pytest
from cluster.agents import start_agent
from e2e.gpu import GPU_ENV, gpus_found, herd_up, stop, vulkan_engine, worker_devices  # noqa: F401 - a fixture
from e2e.herd_cli import HERD, herd
from lan import Lan

from agent.engine_lookup import MANIFEST_NAME, PINNED_BUILD
from gui.cluster.llama.random_model import DemoShape, write_demo_model

pytestmark = [pytest.mark.engine, pytest.mark.netns, pytest.mark.slow]

API, RPC, ECHO = 50050, 50052, 50053
SPLIT = "gaming/0=5,gaming/1=4,host=0"


@pytest.fixture
def lan():
    with Lan(["m", "gaming"]) as lan:
        yield lan


def _is_binary(path) -> bool:
    """A program or a shared library (or a link to one) of a llama.cpp build: not herd's files
    beside them (engine.json, the repack verdicts)."""
    return path.name.startswith(("llama-", "ggml-", "rpc-server")) or ".so" in path.name or path.suffix == ".dll"


def _hand_built(build, dest):
    """The Vulkan build's binaries only, in a folder of their own, as ``cmake --build`` leaves them
    in ``build/bin``: no engine.json nor anything else of herd's."""
    dest.mkdir(parents=True)
    for item in build.folder.iterdir():
        if _is_binary(item):
            shutil.copy2(item, dest / item.name, follow_symlinks=False)
    assert not (dest / MANIFEST_NAME).exists() and not list(dest.glob("*.json"))
    assert (dest / "llama-server").exists() and any(dest.glob("libggml-vulkan.so*"))
    return dest


def _the_gpu(build) -> str:
    """How the build names the GPU it finds (lavapipe: ``llvmpipe (LLVM …)``), asked here."""
    [gpu] = gpus_found(build)
    return gpu.description


def _gaming_agent(lan, tmp_path, engine_dir, extra=()):
    env = dict(os.environ, **GPU_ENV)
    return start_agent(lambda argv, **kw: lan["gaming"].popen(argv, env=env, **kw), tmp_path, "gaming",
                       bind=lan["gaming"].ip, api_port=API, rpc_port=RPC, echo_port=ECHO,
                       extra=["--engine-dir", str(engine_dir), *extra])


def _pair(lan, agent, env) -> None:
    r = herd(["pair", f"{lan['gaming'].ip}:{API}", "--pin", agent.pin()], env, wrap=lan["m"].cmd)
    assert r.returncode == 0, r.stderr


def _planned_devices(lan, env, model) -> list[tuple[str, str, int]]:
    r = herd(["plan", "--model", str(model), "--json", "--timeout", "3", "--ctx", "512", "--split", SPLIT],
             env, wrap=lan["m"].cmd)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)["plan"]
    return [(a["device"]["node_name"], a["device"]["name"], a["count"]) for a in plan["assignments"]]


def _serves_the_split(lan, env, model, agent) -> None:
    """``herd up`` with :data:`SPLIT`: the worker runs the GPU and the CPU, as planned, and replies."""
    up = herd_up(lan["m"], env, model, SPLIT)
    try:
        ep = f"{lan['gaming'].ip}:{RPC}"
        assert up.placement() == {ep: list(range(9))}, up.lines
        assert any(ln.startswith("Placement matches the plan.") for ln in up.lines), up.lines
        assert any("(RPC0) holds slots 0-4 as planned" in ln for ln in up.lines), up.lines
        assert any("(RPC1) holds slots 5-8 as planned" in ln for ln in up.lines), up.lines
        assert worker_devices(agent) == b"Vulkan0,CPU"
        r = httpx.post(up.endpoint() + "/completion", json={"prompt": "The gaming PC", "n_predict": 4,
                                                            "temperature": 0}, timeout=300)
        assert r.status_code == 200 and r.json()["tokens_predicted"] == 4, r.text
    finally:
        stop(up)


def _model(tmp_path):
    return write_demo_model(tmp_path / "q4km.gguf", DemoShape(layers=8, embd=256, ff=768, kv_heads=2,
                                                               quant="Q4_K_M"))


def test_the_vulkan_build_given_as_engine_dir_offers_its_gpu(engine, vulkan_engine, tmp_path, lan):  # noqa: F811
    env = dict(os.environ, HERD_CONFIG_DIR=str(tmp_path / "master-config"))
    gaming = _gaming_agent(lan, tmp_path, vulkan_engine.folder)
    assert any(f"llama.cpp engine: vulkan build {PINNED_BUILD} ({vulkan_engine.folder}: {MANIFEST_NAME}); "
               "GPUs: Vulkan0 (" in ln for ln in gaming.lines), gaming.lines
    _pair(lan, gaming, env)
    model = _model(tmp_path)
    assert _planned_devices(lan, env, model) == [("gaming", "Vulkan0", 5), ("gaming", "CPU", 4)]
    _serves_the_split(lan, env, model, gaming)


def test_a_hand_built_vulkan_folder_is_run_as_the_vulkan_build_it_is(engine, vulkan_engine, tmp_path, lan):  # noqa: F811
    folder = _hand_built(vulkan_engine, tmp_path / "llama.cpp" / "build" / "bin")
    gpu = _the_gpu(vulkan_engine)

    # herd engine status on the gaming PC: what the folder is, read from its own programs
    gpu_env = dict(os.environ, **GPU_ENV)
    r = subprocess.run([*HERD, "engine", "status", "--dir", str(folder)], capture_output=True, text=True,
                       env=gpu_env, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert f"build        : {PINNED_BUILD} (the pinned build)" in lines, r.stdout
    assert "set up       : by hand (no engine.json of herd)" in lines, r.stdout
    assert "backend      : vulkan (llama-server --list-devices lists Vulkan0)" in lines, r.stdout
    assert any(ln.startswith(f"GPUs         : Vulkan0 {gpu}") for ln in lines), r.stdout
    assert any(ln.startswith("RPC          : yes (ggml-rpc-server") for ln in lines), r.stdout
    # Where the build finds no GPU it is still a Vulkan build, and says what to install.
    r = subprocess.run([*HERD, "engine", "status", "--dir", str(folder), "--json"], capture_output=True,
                       text=True, env={k: v for k, v in os.environ.items() if k not in GPU_ENV}, timeout=120)
    no_gpu = json.loads(r.stdout)["identity"]
    assert (no_gpu["backend"], no_gpu["gpus"], no_gpu["by_hand"], no_gpu["rpc"]) == ("vulkan", [], True, True)

    # An agent told --backend cpu with that folder names what it found and runs it as it is.
    env = dict(os.environ, HERD_CONFIG_DIR=str(tmp_path / "master-config"))
    gaming = _gaming_agent(lan, tmp_path, folder, extra=["--backend", "cpu"])
    said = (f"--backend cpu was asked, but engine_dir {folder} holds a vulkan build (llama-server "
            "--list-devices lists Vulkan0): running it as the vulkan build it is")
    assert any(said in ln for ln in gaming.lines), gaming.lines
    _pair(lan, gaming, env)

    r = herd(["doctor", "--json", "--timeout", "3"], env, wrap=lan["m"].cmd)
    assert r.returncode == 0, r.stdout + r.stderr
    findings = {f["code"]: f for f in json.loads(r.stdout) if f["subject"] == "gaming"}
    engine_line = findings["engine-backend"]["message"]
    assert engine_line.startswith(f"Its llama.cpp: a vulkan build (build {PINNED_BUILD}, the pinned one; "
                                  f"set up by hand in {folder}; llama-server --list-devices lists Vulkan0), "
                                  f"RPC: yes; GPUs: Vulkan0 ({gpu}"), engine_line
    assert findings["engine-note"]["severity"] == "warning" and said in findings["engine-note"]["message"]

    model = _model(tmp_path)
    assert _planned_devices(lan, env, model) == [("gaming", "Vulkan0", 5), ("gaming", "CPU", 4)]
    _serves_the_split(lan, env, model, gaming)
