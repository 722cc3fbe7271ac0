"""Workers with several devices: what the master plans with and what it starts the worker with."""

from __future__ import annotations

import subprocess
import sys

import pytest
from e2e.gpu import vulkan_engine  # noqa: F401  (the fixture)

from agent.protocol import AgentStatus
from agent.settings import Settings, SettingsError
from gui.cluster.launching.launcher import worker_devices
from gui.cluster.nodes.records import Node
from gui.cluster.planning.devices import node_devices
from gui.cluster.planning.plan import Device, Plan, parse_split, plan_from_split

GiB = 1 << 30


def _node(name="gaming", port=50052) -> Node:
    return Node(id=f"id-{name}", name=name, host="10.0.0.2", api_port=50050, rpc_port=port)


GPU_STATUS = {
    "engine": {"backend": "vulkan", "devices": [
        {"name": "Vulkan0", "kind": "gpu", "description": "llvmpipe", "total_bytes": 2 * GiB, "free_bytes": 2 * GiB},
        {"name": "CPU", "kind": "cpu", "description": "AMD EPYC", "total_bytes": 24 * GiB, "free_bytes": 20 * GiB}]},
    "rpc": {"state": "stopped", "devices": []},
    "hardware": {"ram_total_bytes": 24 * GiB}, "load": {"ram_free_bytes": 20 * GiB},
}


def test_a_gpu_node_offers_its_gpu_and_its_cpu_before_the_worker_runs():
    devs = node_devices(_node(), GPU_STATUS)
    assert [(d.index, d.name, d.free_bytes) for d in devs] == [(0, "Vulkan0", 2 * GiB), (1, "CPU", 20 * GiB)]
    assert {d.endpoint for d in devs} == {"10.0.0.2:50052"}


def test_live_free_memory_is_used_once_the_worker_runs_with_those_devices():
    status = dict(GPU_STATUS, rpc={"state": "ready", "devices": [
        {"index": 0, "name": "Vulkan0", "free_bytes": GiB, "total_bytes": 2 * GiB},
        {"index": 1, "name": "CPU", "free_bytes": 19 * GiB, "total_bytes": 24 * GiB}]})
    assert [d.free_bytes for d in node_devices(_node(), status)] == [GiB, 19 * GiB]
    # A worker started with its default devices (the GPU only) does not change the offer.
    status = dict(GPU_STATUS, rpc={"state": "ready", "devices": [{"index": 0, "name": "Vulkan0", "free_bytes": 1}]})
    assert [d.name for d in node_devices(_node(), status)] == ["Vulkan0", "CPU"]


def test_a_cpu_node_is_one_cpu_device_as_before():
    status = {"engine": {"backend": "cpu", "devices": [{"name": "CPU", "kind": "cpu", "free_bytes": 5}]},
              "rpc": {"state": "stopped"}, "hardware": {"ram_total_bytes": 8 * GiB}, "load": {"ram_free_bytes": 6 * GiB}}
    [dev] = node_devices(_node(), status)
    assert (dev.name, dev.index, dev.free_bytes) == ("CPU", 0, 6 * GiB)


def test_the_worker_is_started_with_the_plans_devices_of_that_node_in_order():
    gaming = node_devices(_node(), GPU_STATUS)
    old = node_devices(_node("old", 50062), dict(GPU_STATUS, engine={"devices": []}))
    plan = plan_from_split(8, gaming + old, parse_split("gaming/CPU=3,gaming/0=2,old=3,host=1"))
    assert AgentStatus.of(GPU_STATUS).offers_gpu
    assert worker_devices(plan, "10.0.0.2:50052", gpu_node=True) == ["Vulkan0", "CPU"]
    assert worker_devices(plan, "10.0.0.2:50062", gpu_node=False) is None  # no GPU: the worker's default
    # A device the split gives nothing stays in the list: device numbers are positions in -d.
    plan = Plan(8, 6, [(gaming[0], 0), (gaming[1], 3)])
    assert worker_devices(plan, "10.0.0.2:50052", gpu_node=True) == ["Vulkan0", "CPU"]
    # A plan (a profile, say) with only the GPU node's CPU: the worker exposes just its CPU —
    # its default would be the GPU alone.
    cpu_only = Device("id-gaming", "gaming", "10.0.0.2:50052", 0, "CPU", 20 * GiB, 24 * GiB)
    assert worker_devices(Plan(8, 0, [(cpu_only, 9)]), "10.0.0.2:50052", gpu_node=True) == ["CPU"]


@pytest.mark.parametrize("key", ["gaming/1", "gaming/CPU", "id-gaming/1"])
def test_one_device_of_a_node_is_named_by_number_or_name(key):
    devs = node_devices(_node(), GPU_STATUS)
    plan = plan_from_split(8, devs, {key: 9})
    assert plan.counts() == [0, 9]


def test_agent_backend_setting_is_checked():
    with pytest.raises(SettingsError, match="backend: 'opencl' is not one of auto, cpu, vulkan, cuda"):
        Settings(backend="opencl").validate()
    r = subprocess.run([sys.executable, "-m", "agent.main", "--backend", "metal", "config"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "invalid choice: 'metal'" in r.stderr


@pytest.mark.engine
@pytest.mark.slow
async def test_fastest_measures_a_gpu_workers_devices_apart_and_leaves_the_slow_gpu_out(
        engine, vulkan_engine, procs, tmp_path):  # noqa: F811
    """Fastest on a GPU worker beside a CPU worker: each of the GPU node's devices is measured
    on its own (``-ts`` puts every slot on one of them), and Mesa's software GPU, far slower than
    any CPU here, is left out of the plan."""
    import os

    from cluster.agents import pair_all, start_agent
    from e2e.gpu import GPU_ENV

    from gui.cluster.llama.model import inspect_model
    from gui.cluster.llama.random_model import DemoShape, write_demo_model
    from gui.cluster.nodes.discovery import Discovery
    from gui.cluster.nodes.records import TokenStore
    from gui.cluster.planning.measure import MeasurementCache, measured_fastest, model_fingerprint

    model = write_demo_model(tmp_path / "m.gguf", DemoShape(layers=8, embd=256, ff=704, kv_heads=2, quant="Q8_0"))
    info = inspect_model(model)
    agents = [start_agent(lambda argv, **kw: procs.popen(argv, env=dict(os.environ, **GPU_ENV), **kw), tmp_path,
                          "gaming", mdns=False, extra=["--backend", "vulkan"]),
              start_agent(procs.popen, tmp_path, "old", mdns=False)]
    disc = Discovery(browse=False, tokens=TokenStore(tmp_path / "tokens.json"))
    try:
        by_id, devices = await pair_all(disc, agents)
        nodes = list(by_id.values())
        assert [d.label for d in devices] == ["gaming Vulkan0", "gaming CPU", "old CPU"]
        cache = MeasurementCache(tmp_path / "measure")
        best = await measured_fastest(engine, model, info, nodes, devices, disc.client, 512,
                                      host_free_bytes=None, cache=cache, server_args=["-fa", "off"],
                                      tokens=8, runs=1)
        measured = {p.name for p in (tmp_path / "measure").glob("*.json")}
        # one entry per device of the GPU node, one for the CPU node, one for this computer
        assert len(measured) == 4, measured
        gaming = next(n for n in nodes if n.name == "gaming")
        gpu, cpu = (cache.get(f"{gaming.id}/{k}", model_fingerprint(model)) for k in (0, 1))
        # Measured, not assumed: the software GPU takes far longer per step than the CPU beside it.
        assert gpu.compute.step_s > 3 * cpu.compute.step_s, (gpu.compute.step_s, cpu.compute.step_s)
        counts = {d.label: c for d, c in best.plan.assignments}
        assert counts.get("gaming Vulkan0", 0) == 0, counts
        assert sum(best.plan.counts()) + best.plan.host_layers == info.n_layer + 1
    finally:
        await disc.stop()
