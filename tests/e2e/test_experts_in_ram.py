"""Experts in RAM: a mixture-of-experts model on a gaming PC's GPU, its experts in that PC's RAM.

The gaming PC's agent offers its GPU (Mesa's software Vulkan device, see ``e2e.gpu``) and its CPU
as two devices of one ``ggml-rpc-server`` (``-d Vulkan0,CPU``). ``herd plan --experts-in-ram``
puts every block on the GPU and their expert tensors on the CPU device; the memory fit moves the
experts' bytes (counted here from the file's own tensor table) from one to the other; ``herd up``
passes ``-ot``, llama-server's buffers say where the tensors went, the placement check reads them,
and a reply comes back. The profile ``herd export`` writes keeps the choice.
"""

from __future__ import annotations

import json
import os
import re

import gguf
import httpx
import pytest
from cluster.agents import start_agent
from e2e.gpu import GPU_ENV, herd_up, stop, vulkan_engine, worker_devices  # noqa: F401 - a fixture
from e2e.herd_cli import herd
from lan import Lan

from gui.cluster.llama.random_model import DemoShape, write_demo_model

pytestmark = [pytest.mark.engine, pytest.mark.netns, pytest.mark.slow]

API, RPC, ECHO = 50050, 50052, 50053
SPLIT = "gaming/0=9,host=0"


@pytest.fixture
def lan():
    with Lan(["m", "gaming"]) as lan:
        yield lan


def expert_bytes(path) -> int:
    """Bytes of the file's expert tensors (``blk.N.ffn_*_exps``), read from its tensor table."""
    reader = gguf.GGUFReader(path)
    return sum(int(t.n_bytes) for t in reader.tensors if re.search(r"\.ffn_\w+_exps\.", t.name))


#: The two kinds of mixture of experts people run: Qwen3-MoE (Q4_K_M) and gpt-oss (MXFP4 experts,
#: attention sinks, every other layer windowed).
SHAPES = {
    "qwen3moe": DemoShape(arch="qwen3moe", layers=8, embd=256, ff=512, experts=8, experts_used=2, expert_ff=256,
                          kv_heads=2, quant="Q4_K_M", tied=True),
    "gpt-oss": DemoShape(arch="gpt-oss", layers=8, embd=256, ff=256, head_count=8, kv_heads=1, quant="MXFP4_MOE",
                         window=128, experts=16, experts_used=4, expert_ff=256),
}


@pytest.mark.parametrize("kind", SHAPES)
async def test_experts_of_a_gpu_live_in_its_pcs_ram(engine, vulkan_engine, tmp_path, lan, kind):  # noqa: F811
    model = write_demo_model(tmp_path / "moe.gguf", SHAPES[kind])
    experts = expert_bytes(model)
    env = dict(os.environ, HERD_CONFIG_DIR=str(tmp_path / "master-config"))
    agent = start_agent(lambda argv, **kw: lan["gaming"].popen(argv, env=dict(os.environ, **GPU_ENV), **kw),
                        tmp_path, "gaming", bind=lan["gaming"].ip, api_port=API, rpc_port=RPC, echo_port=ECHO,
                        extra=["--backend", "vulkan"])
    m = lan["m"]
    r = herd(["pair", f"{lan['gaming'].ip}:{API}", "--pin", agent.pin()], env, wrap=m.cmd)
    assert r.returncode == 0, r.stderr

    def plan(*more: str) -> dict:
        r = herd(["plan", "--model", str(model), "--json", "--timeout", "3", "--ctx", "512", "--split", SPLIT,
                  *more], env, wrap=m.cmd)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    whole, moved = plan(), plan("--experts-in-ram", "gaming/Vulkan0")
    homes = moved["plan"]["expert_homes"]
    assert [(h["layers"].endswith("/0"), h["experts"].endswith("/1")) for h in homes] == [(True, True)], homes
    # The GPU's weights lose exactly the experts, the CPU device's gain them.
    gpu_before, cpu_before = (f["weights_bytes"] for f in whole["fits"][:2])
    gpu_after, cpu_after = (f["weights_bytes"] for f in moved["fits"][:2])
    assert (gpu_before - gpu_after, cpu_after - cpu_before) == (experts, experts)
    assert "-ot" not in whole["server_command"]
    ot = moved["server_command"][moved["server_command"].index("-ot") + 1]
    assert ot == (r"blk\.(0|1|2|3|4|5|6|7)\.ffn_(up|down|gate|gate_up)_(ch|)exps="
                  f"RPC1[{lan['gaming'].ip}:{RPC}]"), ot

    r = herd(["plan", "--model", str(model), "--timeout", "3", "--split", SPLIT, "--experts-in-ram", "old-pc"],
             env, wrap=m.cmd)
    assert r.returncode == 2 and "experts in RAM: 'old-pc' names 0 GPUs" in r.stderr, r.stderr

    up = herd_up(m, env, model, SPLIT, "--experts-in-ram", "gaming/0")
    try:
        print("\n".join(up.lines))
        started = next(ln for ln in up.lines if ln.startswith("Starting "))
        assert "-ot" in started.split()
        assert any(ln.startswith("Placement matches the plan.") for ln in up.lines)
        said = next(ln for ln in up.lines if "keeps the experts of slots 0-7" in ln)
        assert f"({experts / (1 << 20):.2f} MiB) on RPC1 as planned" in said, said
        assert worker_devices(agent) == b"Vulkan0,CPU"
        async with httpx.AsyncClient(timeout=300) as client:
            r = await client.post(up.endpoint() + "/v1/chat/completions", json={
                "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8, "temperature": 0})
            r.raise_for_status()
            assert r.json()["usage"]["completion_tokens"] == 8
        r = herd(["export", "-o", str(tmp_path / "moe.json")], env, wrap=m.cmd)
        assert r.returncode == 0, r.stderr
    finally:
        stop(up)

    assert json.loads((tmp_path / "moe.json").read_text())["plan"]["expert_homes"] == homes
    again = herd_up(m, env, tmp_path / "moe.json")
    try:
        assert any("keeps the experts of slots 0-7" in ln for ln in again.lines), again.lines
    finally:
        stop(again)
