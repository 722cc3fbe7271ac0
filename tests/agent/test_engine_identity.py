"""What an engine is, read from the engine itself (agent.engine_lookup.identify, #26): herd's
engine.json where there is one; for a folder built by hand, what its programs report and the
backend libraries beside them. Against the real builds (CPU and Vulkan) and copies of them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from e2e.gpu import GPU_ENV, vulkan_engine  # noqa: F401 - a fixture

from agent.engine_lookup import (
    MANIFEST_NAME,
    PINNED_BUILD,
    Engine,
    EngineIdentity,
    _init_line_backends,
    _library_backend,
    choose_engine,
    device_backend,
    find_engine,
    identify,
)
from gui.cluster.launching.doctor import ERROR, OK, check_engine, check_node_engine


def _copy(engine: Engine, dest, *, skip=(MANIFEST_NAME,)):
    """``engine``'s files without herd's manifest, in a folder of their own (as a hand build has them)."""
    dest.mkdir(parents=True)
    for item in engine.folder.iterdir():
        if item.name not in skip:
            shutil.copy2(item, dest / item.name, follow_symlinks=False)
    return dest


@pytest.fixture
def no_gpu_env(monkeypatch):
    for k in GPU_ENV:
        monkeypatch.delenv(k, raising=False)


@pytest.mark.engine
def test_herds_own_engine_says_what_it_is(engine):
    ident = identify(engine)
    assert ident.backend == "cpu" and ident.backend_from == MANIFEST_NAME and not ident.by_hand
    assert ident.rpc is True and ident.build == PINNED_BUILD and ident.build_matches is True
    assert ident.gpus == []


@pytest.mark.engine
def test_a_hand_built_cpu_folder_is_a_cpu_build(engine, tmp_path):
    folder = _copy(engine, tmp_path / "bin")
    ident = identify(find_engine(folder, probe=True))
    assert ident.by_hand and ident.backend == "cpu" and ident.gpus == []
    assert "names no GPU backend" in ident.backend_from
    assert ident.rpc is True and "ggml-rpc-server" in ident.rpc_from
    assert ident.build == PINNED_BUILD  # from llama-server --version, there being no manifest


@pytest.mark.engine
def test_a_hand_built_vulkan_folder_is_a_vulkan_build_with_or_without_a_gpu(vulkan_engine, tmp_path,  # noqa: F811
                                                                            monkeypatch, no_gpu_env):
    folder = _copy(vulkan_engine, tmp_path / "bin")
    eng = find_engine(folder, probe=True)
    ident = identify(eng)
    # lavapipe is a CPU-type device: without GGML_VK_VISIBLE_DEVICES the build finds no GPU, and
    # still says it is a Vulkan build
    assert ident.backend == "vulkan" and ident.gpus == [] and ident.by_hand, ident
    assert "ggml_vulkan" in ident.backend_from or "libggml-vulkan" in ident.backend_from
    monkeypatch.setenv(*next(iter(GPU_ENV.items())))
    ident = identify(eng)
    assert ident.backend == "vulkan" and [d.name for d in ident.gpus] == ["Vulkan0"]
    assert ident.backend_from == "llama-server --list-devices lists Vulkan0"
    assert any(n.startswith("libggml-vulkan") for n in ident.libraries)


@pytest.mark.engine
def test_a_folder_with_llama_server_and_no_worker_has_rpc_from_its_library(vulkan_engine, tmp_path, no_gpu_env):  # noqa: F811
    folder = _copy(vulkan_engine, tmp_path / "bin",
                   skip=(MANIFEST_NAME, *(p.name for p in vulkan_engine.folder.glob("*rpc-server*"))))
    ident = identify(find_engine(folder))
    assert ident.rpc is True and ident.rpc_from.startswith("libggml-rpc.so"), ident


@pytest.mark.engine
def test_a_cuda_library_beside_the_programs_makes_a_cuda_build(engine, tmp_path, monkeypatch, no_gpu_env):
    # No CUDA build can be had here: the CPU build with a file where a hand-made CUDA build keeps
    # its backend (build/bin/libggml-cuda.so) stands in for one on a PC whose driver is missing.
    folder = _copy(engine, tmp_path / "bin")
    (folder / "libggml-cuda.so").write_bytes(b"")
    ident = identify(find_engine(folder))
    assert ident.backend == "cuda" and ident.gpus == []
    assert ident.backend_from == "libggml-cuda.so beside the programs"
    # The README's CUDA paragraph: such a folder as engine_dir, with or without --backend cuda, is
    # run as the CUDA build it is; finding no GPU, the agent says to install NVIDIA's driver.
    monkeypatch.delenv("HERD_ENGINE_DIR", raising=False)
    for wanted in ("cuda", "auto"):
        eng, ident, note = choose_engine(folder, wanted)
        assert eng.folder == folder and ident.backend == "cuda", (wanted, ident)
        assert note == (f"the cuda build of llama.cpp in {folder} finds no GPU on this machine: install "
                        "NVIDIA's driver and check it with `nvidia-smi`; the worker offers only the CPU"), note


def test_names_of_backends():
    assert [_library_backend(n) for n in ("libggml-vulkan.so", "libggml-cuda.so.0", "ggml-vulkan.dll",
                                          "libggml-cpu-haswell.so", "ggml-rpc.dll", "libggml-hip.so",
                                          "libggml.so", "libllama.so")] == [
        "vulkan", "cuda", "vulkan", "cpu", "rpc", "hip", "", ""]
    assert [device_backend(n) for n in ("Vulkan0", "CUDA1", "ROCm0", "MTL0", "GPUOpenCL", "CPU", "BLAS",
                                        "RPC0")] == ["vulkan", "cuda", "hip", "metal", "opencl", None, None, None]
    # the lines a CUDA (HIP, MUSA) build prints where it finds no GPU, from ggml-cuda.cu
    assert _init_line_backends("ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is "
                               "detected\n") == ["cuda"]
    assert _init_line_backends("ggml_cuda_init: failed to initialize ROCm: no ROCm-capable device\n"
                               "ggml_vulkan: No devices found.\n") == ["hip", "vulkan"]
    assert _init_line_backends("load_backend: loaded CPU backend\n") == []


@pytest.mark.engine
def test_engine_dir_and_a_backend_that_disagree_name_what_the_folder_holds(engine, tmp_path, monkeypatch):
    monkeypatch.delenv("HERD_ENGINE_DIR", raising=False)
    folder = _copy(engine, tmp_path / "bin")
    eng, ident, note = choose_engine(folder, "vulkan")
    assert eng.folder == folder and ident.backend == "cpu"
    assert note.startswith(f"--backend vulkan was asked, but engine_dir {folder} holds a cpu build "
                           "(llama-server --list-devices names no GPU backend"), note
    assert choose_engine(folder, "cpu")[2] is None and choose_engine(folder, "auto")[2] is None
    empty = tmp_path / "empty"
    empty.mkdir()
    eng, _, note = choose_engine(empty, "auto")
    assert eng.folder != empty and note.startswith(f"engine_dir {empty} holds no llama.cpp programs"), note


def test_the_doctor_says_what_an_engine_is():
    hand = EngineIdentity(backends=("cuda",), backend_from="libggml-cuda.so beside the programs", rpc=True,
                          by_hand=True, build=PINNED_BUILD)
    llama = Engine(llama_server=Path("/opt/llama/bin/llama-server"), build=PINNED_BUILD,
                   folder=Path("/opt/llama/bin"))
    found = {f.code: f for f in check_engine(llama, hand)}
    assert found["engine-backend"].severity == OK
    assert found["engine-backend"].message == (
        f"This machine's llama.cpp: a cuda build (build {PINNED_BUILD}, the pinned one; set up by hand in "
        "/opt/llama/bin; libggml-cuda.so beside the programs), RPC: yes; GPUs: none.")
    # a hand build without RPC cannot be the master of a cluster
    no_rpc = EngineIdentity(rpc=False, rpc_from="no ggml-rpc library beside the other backend libraries",
                            by_hand=True, build=PINNED_BUILD)
    found = {f.code: f for f in check_engine(llama, no_rpc)}
    assert found["no-rpc"].severity == ERROR and "-DGGML_RPC=ON" in found["no-rpc"].message
    # a node's engine of another build, and what its agent says
    other = EngineIdentity(backends=("vulkan",), backend_from="engine.json", rpc=True, build=9999).to_json()
    found = {f.code: f for f in check_node_engine("pc", {"identity": other, "note": "look."}, mismatch=False)}
    assert found["engine-build"].severity == "warning" and "build 9999" in found["engine-build"].message
    assert found["engine-note"].message == "Its agent says: look."
    assert "engine-build" not in {f.code for f in check_node_engine("pc", {"identity": other}, mismatch=True)}
