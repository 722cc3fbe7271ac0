"""Experts in RAM as a plan: which devices may hold another's experts, what moves in the memory
fit, what goes on llama-server's command line, and what the placement check makes of the log.

The model is a real mixture-of-experts GGUF written by herd's generator; its expert bytes are
counted from the file's own tensor table, not from herd's reading of it.
"""

from __future__ import annotations

import re

import gguf
import pytest

from gui.cluster.launching.placement import check_placement
from gui.cluster.launching.profile import load_profile, make_profile, save_profile
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.placement_log import parse_placement
from gui.cluster.llama.random_model import DemoShape, write_demo_model
from gui.cluster.llama.server_command import ServerSpec
from gui.cluster.planning.plan import Assignment, Device, Plan, PlanError, estimate, experts_in_ram

GAMING = "10.0.0.7:50052"
OLD = "10.0.0.9:50052"
GiB = 1 << 30
MiB = 1 << 20


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    path = write_demo_model(tmp_path_factory.mktemp("moe") / "moe.gguf", DemoShape(
        arch="qwen3moe", layers=6, embd=256, ff=512, experts=8, experts_used=2, expert_ff=256,
        kv_heads=2, quant="Q4_K_M", tied=True))
    reader = gguf.GGUFReader(path)
    per_block: dict[int, int] = {}
    for t in reader.tensors:
        m = re.match(r"blk\.(\d+)\.ffn_\w+_exps\.", t.name)
        if m:
            per_block[int(m.group(1))] = per_block.get(int(m.group(1)), 0) + int(t.n_bytes)
    return inspect_model(path), per_block


def devices():
    gpu = Device("gaming", "gaming", GAMING, 0, "Vulkan0", 8 * GiB, 8 * GiB, machine="gaming")
    cpu = Device("gaming", "gaming", GAMING, 1, "CPU", 30 * GiB, 32 * GiB, machine="gaming")
    old = Device("old", "old", OLD, 0, "CPU", 12 * GiB, 16 * GiB, machine="old")
    return gpu, cpu, old


def test_only_another_device_of_the_same_worker_can_hold_the_experts():
    gpu, cpu, old = devices()
    assignments = (Assignment(gpu, 4), Assignment(cpu, 0), Assignment(old, 3))
    Plan(6, 0, assignments, [("gaming/0", "gaming/1")])
    with pytest.raises(PlanError, match="only go to another device of the same worker"):
        Plan(6, 0, assignments, [("gaming/0", "old/0")])
    with pytest.raises(PlanError, match="its own experts' home"):
        Plan(6, 0, assignments, [("gaming/0", "gaming/0")])
    with pytest.raises(PlanError, match="not in the plan"):
        Plan(6, 0, assignments, [("gaming/0", "nas/0")])
    with pytest.raises(PlanError, match="two homes"):
        Plan(6, 0, assignments, [("gaming/0", "gaming/1"), ("gaming/0", "gaming/1")])
    with pytest.raises(PlanError, match="cannot send its own elsewhere"):
        Plan(6, 0, assignments, [("gaming/0", "gaming/1"), ("gaming/1", "gaming/0")])


def test_experts_in_ram_names_a_gpu_and_finds_its_cpu(moe):
    model, _ = moe
    gpu, cpu, old = devices()
    plan = Plan(6, 0, (Assignment(gpu, 4), Assignment(cpu, 0), Assignment(old, 3)))
    for name in ("gaming/0", "gaming/Vulkan0", "gaming"):
        assert experts_in_ram(plan, model, name).expert_homes == (("gaming/0", "gaming/1"),)
    with pytest.raises(PlanError, match="names 0 GPUs"):
        experts_in_ram(plan, model, "old")
    alone = Plan(6, 0, (Assignment(gpu, 7),))
    with pytest.raises(PlanError, match="has no CPU device beside it"):
        experts_in_ram(alone, model, "gaming/0")


def test_a_dense_model_has_no_experts_to_move(tmp_path):
    dense = inspect_model(write_demo_model(tmp_path / "d.gguf", DemoShape(layers=4, embd=128, ff=256)))
    gpu, cpu, _ = devices()
    with pytest.raises(PlanError, match="has no experts"):
        experts_in_ram(Plan(4, 0, (Assignment(gpu, 5), Assignment(cpu, 0))), dense, "gaming/0")


def test_the_memory_fit_moves_exactly_the_experts_of_the_gpus_blocks(moe):
    model, per_block = moe
    gpu, cpu, old = devices()
    whole = Plan(6, 0, (Assignment(gpu, 4), Assignment(cpu, 0), Assignment(old, 3)))
    split = whole.with_experts_on("gaming/0", "gaming/1")
    before, after = estimate(whole, model, 4096), estimate(split, model, 4096)
    moved = sum(per_block[b] for b in range(4))
    assert before[0].weights_bytes - after[0].weights_bytes == moved
    assert after[1].weights_bytes - before[1].weights_bytes == moved
    assert after[1].compute_bytes > 0 and before[1].compute_bytes == 0  # it now works on the experts
    assert [f.kv_bytes for f in after] == [f.kv_bytes for f in before]
    assert after[2].weights_bytes == before[2].weights_bytes
    assert split.with_experts_on("gaming/0", None) == whole


def test_the_command_line_names_the_workers_cpu_device_wherever_it_is_reached(moe):
    model, _ = moe
    gpu, cpu, old = devices()
    plan = Plan(6, 0, (Assignment(old, 3), Assignment(gpu, 4), Assignment(cpu, 0)), [("gaming/0", "gaming/1")])
    spec = ServerSpec.for_plan(plan, model.path)
    args = spec.args()
    assert args[args.index("--rpc") + 1] == f"{OLD},{GAMING}"
    ot = args[args.index("-ot") + 1]
    assert ot == rf"blk\.(3|4|5)\.ffn_(up|down|gate|gate_up)_(ch|)exps=RPC1[{GAMING}]"
    assert args.index("-ot") > args.index("--rpc")  # llama-server looks the buffer type up then
    # The tunnel's local forwarders replace the addresses; the override follows its worker.
    routed = spec.with_rpc(["127.0.0.1:40001", "127.0.0.1:40002"]).args()
    assert routed[routed.index("-ot") + 1].endswith("=RPC1[127.0.0.1:40002]")
    # the output slot (6) has no experts; blocks of other devices are not named
    assert all(re.search(ot.split("=")[0], f"blk.{b}.ffn_up_exps.weight") for b in (3, 4, 5))
    assert not any(re.search(ot.split("=")[0], f"blk.{b}.ffn_up_exps.weight") for b in (0, 1, 2))


def _log(weights: dict[str, float], n_slots: int, offloaded: int) -> str:
    """The lines llama-server prints at ``-lv 4`` for these buffers (the format of its log)."""
    lines = [f"llama_prepare_model_devices: using device RPC0 ({GAMING}) (unknown id) - 8192 MiB free",
             f"llama_prepare_model_devices: using device RPC1 ({GAMING}) (unknown id) - 30000 MiB free",
             f"load_tensors: offloaded {offloaded}/{n_slots} layers to GPU"]
    lines += [f"load_tensors: {name} model buffer size = {mib:8.2f} MiB" for name, mib in weights.items()]
    return "\n".join(lines)


def test_the_placement_check_finds_experts_that_stayed_with_their_layers(moe):
    model, per_block = moe
    gpu, cpu, _ = devices()
    plan = Plan(6, 0, (Assignment(gpu, 7), Assignment(cpu, 0)), [("gaming/0", "gaming/1")])
    fits = estimate(plan, model, 512)
    host = fits[-1].weights_bytes / MiB
    moved = estimate(plan, model, 512)
    as_planned = {"CPU_Mapped": host, f"RPC0[{GAMING}]": moved[0].weights_bytes / MiB,
                  f"RPC1[{GAMING}]": moved[1].weights_bytes / MiB}
    check = check_placement(plan, parse_placement(_log(as_planned, 7, 7)), model)
    assert check.ok, check.problems
    assert any("keeps the experts of slots 0-5" in line for line in check.report), check.report
    # llama-server without -ot: every tensor with its layer, nothing on the CPU device
    whole = {"CPU_Mapped": host, f"RPC0[{GAMING}]": model.block_bytes(0, 7) / MiB}
    check = check_placement(plan, parse_placement(_log(whole, 7, 7)), model)
    assert not check.ok
    assert not any("keeps the experts" in line for line in check.report)


def test_a_profile_keeps_the_experts_home(moe, tmp_path):
    model, _ = moe
    gpu, cpu, _ = devices()
    plan = Plan(6, 0, (Assignment(gpu, 7), Assignment(cpu, 0)), [("gaming/0", "gaming/1")])

    class Node:  # the fields a profile records about a live node
        id, name, host, api_port, rpc_port, fingerprint, hardware = "gaming", "gaming", "10.0.0.7", 50050, 50052, "", ""

    path = tmp_path / "p.json"
    save_profile(path, make_profile(plan, model, [Node()]))
    assert load_profile(path).plan.expert_homes == (("gaming/0", "gaming/1"),)
    text = path.read_text().replace('"experts": "gaming/1"', '"experts": "nas/1"')
    path.write_text(text)
    with pytest.raises(ValueError, match=r"expert_homes\[0\]: device 'nas/1' is not in the plan"):
        load_profile(path)
