"""The software GPU of the GPU tests, and running ``herd up`` on it.

The GPU is Mesa's software Vulkan device (lavapipe): a real Vulkan device that the Vulkan build
of llama.cpp finds when ``GGML_VK_VISIBLE_DEVICES=0`` lets it use a CPU-type device. It stands in
for a gaming PC's GPU in everything but speed and memory (its free memory never changes). At
this build lavapipe crashes in flash attention, so llama-server runs with ``-fa off`` here; a
real GPU does not need that.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
from e2e.herd_cli import HERD, HerdUp, rpc_children

from agent.engine_lookup import find_engine, list_devices

GPU_ENV = {"GGML_VK_VISIBLE_DEVICES": "0"}


def gpus_found(eng) -> list:
    """The GPUs ``eng`` finds with :data:`GPU_ENV` set, as the GPU tests' agents run it."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in GPU_ENV.items():
            mp.setenv(k, v)
        return [d for d in list_devices(eng) if d.is_gpu]


@pytest.fixture(scope="module")
def vulkan_engine():
    """The Vulkan build of the pinned llama.cpp and the software GPU it finds; CI builds it
    (`herd engine install --from-source --backend vulkan`), elsewhere the test skips."""
    eng = find_engine(backend="vulkan")
    problem = None
    if not eng.complete:
        problem = "no Vulkan build of llama.cpp: run `herd engine install --from-source --backend vulkan`"
    else:
        if not gpus_found(eng):
            problem = "the Vulkan build finds no device: install mesa-vulkan-drivers (lavapipe)"
    if problem:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(problem)
        pytest.skip(problem)
    return eng


def herd_up(m, env, target, split: str | None = None, *more: str) -> HerdUp:
    """``herd up TARGET`` on the master host ``m`` (a model with ``split`` and ``more``
    arguments, or a profile), waited for until it serves."""
    args = ["--split", split, "--ctx", "512", "--host", m.ip, "--port", "8080", "--threads", "1",
            "--server-args", "-fa off", *more] if split else []
    up = HerdUp(m.popen(HERD + ["up", str(target), *args, "--timeout", "3"],
                        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    up.wait_for("Serving", 300)
    return up


def worker_devices(agent) -> bytes:
    """The ``-d`` argument the agent's running ``ggml-rpc-server`` was started with."""
    [worker] = rpc_children(agent.proc.pid)
    with open(f"/proc/{worker}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    return argv[argv.index(b"-d") + 1]


def stop(up: HerdUp) -> None:
    """Stop ``herd up`` as Ctrl+C does; it must exit cleanly."""
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=60) == 0, "\n".join(up.lines[-30:])
