"""Experts in RAM in the predicted speed: each block whose experts live on the other device of its
worker sends five tensors between the two devices per token, and they go through the master —
two round trips each, and their bytes both ways (measured by ``bench/experts_traffic.py``:
the worker refuses the server-side copy between a GPU buffer and a CPU buffer).

The model is a real qwen3moe GGUF from herd's generator; the link and compute figures are plain
numbers, so the differences below are the cost model's arithmetic alone.
"""

from __future__ import annotations

import pytest

from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.random_model import DemoShape, write_demo_model
from gui.cluster.planning.cost_model import (
    DeviceSpeed,
    LinkSpeed,
    Measurements,
    prompt_cost,
    step_cost,
)
from gui.cluster.planning.plan import Assignment, Device, Plan

GiB = 1 << 30


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    return inspect_model(write_demo_model(tmp_path_factory.mktemp("moe") / "moe.gguf", DemoShape(
        arch="qwen3moe", layers=6, embd=256, ff=512, experts=8, experts_used=2, expert_ff=256,
        kv_heads=2, quant="Q4_K_M", tied=True)))


def plans() -> tuple[Plan, Plan]:
    """Blocks 0-3 on a gaming PC's GPU, blocks 4-5 and the output on an old PC; then the same with
    the GPU's experts in the gaming PC's RAM."""
    gpu = Device("gaming", "gaming", "10.0.0.7:50052", 0, "Vulkan0", 8 * GiB, 8 * GiB)
    cpu = Device("gaming", "gaming", "10.0.0.7:50052", 1, "CPU", 30 * GiB, 32 * GiB)
    old = Device("old", "old", "10.0.0.9:50052", 0, "CPU", 12 * GiB, 16 * GiB)
    whole = Plan(6, 0, (Assignment(gpu, 4), Assignment(cpu, 0), Assignment(old, 3)))
    return whole, whole.with_experts_on("gaming/0", "gaming/1")


def measurements(rtt_s: float, bytes_per_s: float | None) -> Measurements:
    speed = DeviceSpeed((0.001,) * 7, (0.0001,) * 7)
    return Measurements(compute={"gaming": speed, "old": speed},
                        links={"gaming": LinkSpeed(rtt_s, bytes_per_s), "old": LinkSpeed(0.002, bytes_per_s)},
                        host=speed)


def test_each_block_with_its_experts_in_ram_adds_ten_round_trips_of_its_workers_link(moe):
    whole, split = plans()
    wifi = measurements(rtt_s=0.004, bytes_per_s=None)
    before, after = step_cost(whole, moe, wifi), step_cost(split, moe, wifi)
    # 4 blocks × 5 crossings × 2 round trips × 4 ms, on the gaming PC's link only
    assert after.rtt_s[0] - before.rtt_s[0] == pytest.approx(4 * 10 * 0.004)
    assert (after.rtt_s[1:], after.transfer_s) == (before.rtt_s[1:], before.transfer_s)
    # the GPU and the CPU compute at one speed here: the experts' share moves, the sum stays
    assert sum(after.compute_s) == pytest.approx(sum(before.compute_s))
    assert after.compute_s[0] < before.compute_s[0] and after.compute_s[1] > before.compute_s[1] == 0
    # a link twice as quick costs half as much
    lan = measurements(rtt_s=0.002, bytes_per_s=None)
    assert step_cost(split, moe, lan).total_s - step_cost(whole, moe, lan).total_s == pytest.approx(4 * 10 * 0.002)


def test_the_crossing_tensors_bytes_go_both_ways_over_the_link(moe):
    whole, split = plans()
    slow = measurements(rtt_s=0.0, bytes_per_s=1e6)
    before, after = step_cost(whole, moe, slow), step_cost(split, moe, slow)
    # per block: three hidden states (256 f32) and the router's 2 experts and 2 weights (4 bytes each)
    per_block = 3 * 256 * 4 + 2 * 2 * 4
    assert after.transfer_s[0] - before.transfer_s[0] == pytest.approx(2 * 4 * per_block / 1e6)
    assert after.rtt_s == before.rtt_s


def test_a_prompt_micro_batch_pays_the_round_trips_once_and_the_bytes_per_token(moe):
    whole, split = plans()
    m = measurements(rtt_s=0.004, bytes_per_s=1e6)
    # 512 tokens: one micro-batch, so the pipeline whole layers would allow gains nothing
    before, after = prompt_cost(whole, moe, m, 512), prompt_cost(split, moe, m, 512)
    per_block = 512 * (3 * 256 * 4 + 2 * 2 * 4)
    assert after.total_s - before.total_s == pytest.approx(4 * 10 * 0.004 + 2 * 4 * per_block / 1e6)
