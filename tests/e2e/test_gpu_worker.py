"""A worker with a GPU and its CPU as two devices, beside a CPU worker, on a simulated LAN.

The GPU is Mesa's software Vulkan device (lavapipe, see ``e2e.gpu``).

The master finds both agents over mDNS, plans with the three devices the agents report
(``gaming Vulkan0``, ``gaming CPU``, ``old CPU``), ``herd up`` starts the gaming PC's worker
with ``-d Vulkan0,CPU``, llama-server's placement report equals the plan, a reply is served,
and its first token's log-probabilities match a run on this computer alone within a tolerance
(the GPU's arithmetic differs from the CPU's in the last digits, so tokens are not compared).
"""

from __future__ import annotations

import json
import os

import httpx
import pytest
from cluster.agents import start_agent
from e2e.gpu import GPU_ENV, herd_up, stop, vulkan_engine, worker_devices  # noqa: F401 - a fixture
from e2e.herd_cli import herd
from lan import Lan

from gui.cluster.llama.random_model import DemoShape, write_demo_model

pytestmark = [pytest.mark.engine, pytest.mark.netns, pytest.mark.slow]

API, RPC, ECHO = 50050, 50052, 50053
#: Log-probabilities of the same token from the GPU and from the CPU differ by 0.01–0.1 nats
#: (seen here); a wrong device or layer order differs by whole nats.
LOGPROB_TOLERANCE = 0.25


@pytest.fixture
def lan():
    with Lan(["m", "gaming", "old"]) as lan:
        yield lan


async def _first_token_logprobs(url: str) -> dict[str, float]:
    async with httpx.AsyncClient(timeout=300) as client:
        r = await client.post(url + "/completion", json={"prompt": "The gaming PC", "n_predict": 1,
                                                          "n_probs": 5, "temperature": 0, "seed": 1})
        r.raise_for_status()
        probs = r.json()["completion_probabilities"][0]["top_logprobs"]
    return {p["token"]: p["logprob"] for p in probs}


async def test_gpu_and_cpu_of_one_worker_and_a_cpu_worker_share_a_model(engine, vulkan_engine, tmp_path, lan):  # noqa: F811
    model = write_demo_model(tmp_path / "q8.gguf", DemoShape(layers=8, embd=256, ff=704, kv_heads=2, quant="Q8_0"))
    env = dict(os.environ, HERD_CONFIG_DIR=str(tmp_path / "master-config"))
    gaming_env = dict(os.environ, **GPU_ENV)
    agents = {
        "gaming": start_agent(lambda argv, **kw: lan["gaming"].popen(argv, env=gaming_env, **kw), tmp_path,
                              "gaming", bind=lan["gaming"].ip, api_port=API, rpc_port=RPC, echo_port=ECHO,
                              extra=["--backend", "vulkan"]),
        "old": start_agent(lan["old"].popen, tmp_path, "old", bind=lan["old"].ip, api_port=API, rpc_port=RPC,
                           echo_port=ECHO),
    }
    m = lan["m"]
    for name, agent in agents.items():
        r = herd(["pair", f"{lan[name].ip}:{API}", "--pin", agent.pin()], env, wrap=m.cmd)
        assert r.returncode == 0, r.stderr

    # The master plans with every device the agents offer, the GPU first, in -d order.
    r = herd(["plan", "--model", str(model), "--json", "--timeout", "3", "--ctx", "512",
              "--split", "gaming/0=2,gaming/1=3,old=3,host=1"], env, wrap=m.cmd)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    names = [(a["device"]["node_name"], a["device"]["name"], a["count"]) for a in plan["plan"]["assignments"]]
    assert names == [("gaming", "Vulkan0", 2), ("gaming", "CPU", 3), ("old", "CPU", 3)], names

    up = herd_up(m, env, model, "gaming/0=2,gaming/1=3,old=3,host=1")
    try:
        g_ep, o_ep = f"{lan['gaming'].ip}:{RPC}", f"{lan['old'].ip}:{RPC}"
        # by endpoint: the gaming PC's two devices hold slots 1-2 (Vulkan0) and 3-5 (its CPU)
        assert up.placement() == {"host": [0], g_ep: [1, 2, 3, 4, 5], o_ep: [6, 7, 8]}
        assert any(ln.startswith("Placement matches the plan.") for ln in up.lines)
        assert any("(RPC0) holds slots 1-2 as planned" in ln for ln in up.lines), up.lines
        assert any("(RPC1) holds slots 3-5 as planned" in ln for ln in up.lines), up.lines
        assert worker_devices(agents["gaming"]) == b"Vulkan0,CPU"
        on_gpu = await _first_token_logprobs(up.endpoint())
        r = herd(["export", "-o", str(tmp_path / "gpu.json")], env, wrap=m.cmd)
        assert r.returncode == 0, r.stderr
    finally:
        stop(up)

    # The profile keeps the device choice: replayed, it starts the same worker devices and split.
    again = herd_up(m, env, tmp_path / "gpu.json")
    try:
        assert again.placement() == {"host": [0], g_ep: [1, 2, 3, 4, 5], o_ep: [6, 7, 8]}
        assert worker_devices(agents["gaming"]) == b"Vulkan0,CPU"
    finally:
        stop(again)

    alone = herd_up(m, env, model, "host=9")
    try:
        on_cpu = await _first_token_logprobs(alone.endpoint())
    finally:
        stop(alone)
    shared = set(on_gpu) & set(on_cpu)
    assert len(shared) >= 3, (on_gpu, on_cpu)
    diff = max(abs(on_gpu[t] - on_cpu[t]) for t in shared)
    print(f"largest log-probability difference GPU vs CPU: {diff:.4f} nats over {len(shared)} tokens")
    assert diff <= LOGPROB_TOLERANCE, (on_gpu, on_cpu)
