"""The cost model and the fastest-plan search, the search checked against brute force."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gui.cluster.llama.model import ModelInfo
from gui.cluster.llama.server_command import layout_args
from gui.cluster.planning.cost_model import (
    DeviceSpeed,
    LinkSpeed,
    Measurements,
    hop_bytes,
    relative_error,
    step_cost,
)
from gui.cluster.planning.optimize import fastest, fastest_plan
from gui.cluster.planning.plan import Assignment, Device, Plan, PlanError, estimate, plan_by_memory

MiB = 1 << 20


def make_model(n_layer: int, block: int = MiB, output: int = 2 * MiB, embd: int = 256,
               vocab: int = 4096, slot_bytes: tuple[int, ...] | None = None, tied: bool = False) -> ModelInfo:
    """A model description without a file: the optimiser only reads these numbers."""
    slots = slot_bytes or (block,) * n_layer + (output,)
    return ModelInfo(
        path=Path("synthetic.gguf"), file_bytes=sum(slots), architecture="llama", name="synthetic",
        n_layer=n_layer, context_length=4096, embedding_length=embd, feed_forward_length=embd * 3,
        n_head=embd // 64, n_head_kv=(embd // 64,) * n_layer, head_dim_k=64, head_dim_v=64,
        vocab_size=vocab, file_type=1, quantization="F16", slot_bytes=slots,
        input_bytes=embd * vocab * 2, token_embd_bytes=embd * vocab * 2, tied_embeddings=tied,
        tensor_bytes=sum(slots) + embd * vocab * 2)


def worker(node: int, index: int = 0, free: int = 1 << 34) -> Device:
    return Device(f"n{node}", f"node{node}", f"10.9.0.{node}:50052", index, "CPU", free, free)


# -- the cost model ------------------------------------------------------------------------------

def test_step_cost_adds_compute_round_trips_and_transfers():
    model = make_model(3, embd=256, vocab=1000)
    a, b = worker(1), worker(2)
    m = Measurements(
        compute={a.key: DeviceSpeed((0.001, 0.002, 0.003, 0.010)), "n2": DeviceSpeed.uniform(3, 0.004, 0.020)},
        links={"n1": LinkSpeed(0.0005, 1e6), b.endpoint: LinkSpeed(0.002, None)},
        host=DeviceSpeed.uniform(3, 0.1), host_fixed_s=0.0003)
    plan = Plan(3, 1, [(a, 2), (b, 1)])
    cost = step_cost(plan, model, m)
    assert cost.host_s == pytest.approx(0.0003 + 0.1)
    assert cost.compute_s == pytest.approx((0.002 + 0.003, 0.020))
    assert cost.rtt_s == (0.0005, 0.002)
    # a: hidden state in and out over 1 MB/s; b: throughput unknown, so no transfer time.
    assert cost.transfer_s == pytest.approx((2 * 256 * 4 / 1e6, 0.0))
    assert cost.total_s == pytest.approx(0.1003 + 0.005 + 0.020 + 0.0025 + 2048 / 1e6)
    assert cost.tokens_per_s == pytest.approx(1 / cost.total_s)


def test_output_device_returns_logits():
    model = make_model(2, embd=128, vocab=32000)
    assert hop_bytes(model, holds_output=False) == 2 * 128 * 4
    assert hop_bytes(model, holds_output=True) == 128 * 4 + 32000 * 4


def test_unused_devices_cost_nothing_and_unmeasured_ones_are_named():
    model = make_model(2)
    a, b = worker(1), worker(2)
    m = Measurements({a.key: DeviceSpeed.uniform(2, 0.001)}, {"n1": LinkSpeed(0.001)})
    assert step_cost(Plan(2, 0, [(a, 3), (b, 0)]), model, m).total_s == pytest.approx(0.004)
    with pytest.raises(PlanError, match=r"no compute measurement for node2 CPU \(n2/0\)"):
        step_cost(Plan(2, 0, [(a, 2), (b, 1)]), model, m)
    m2 = Measurements({a.key: DeviceSpeed.uniform(2, 0.001), b.key: DeviceSpeed.uniform(2, 0.001)},
                      {"n1": LinkSpeed(0.001)})
    with pytest.raises(PlanError, match=r"no link measurement for node2 CPU \(10.9.0.2:50052\)"):
        step_cost(Plan(2, 0, [(a, 2), (b, 1)]), model, m2)
    with pytest.raises(PlanError, match="covers 2 slots, the model has 3"):
        step_cost(Plan(2, 0, [(a, 3)]), model, Measurements({a.key: DeviceSpeed((1, 1))}, {"n1": LinkSpeed(0)}))


def test_relative_error():
    assert relative_error([110.0, 90.0], [100.0, 100.0]) == pytest.approx([0.1, -0.1])


# -- the optimiser against brute force -----------------------------------------------------------

def compositions(total: int, parts: int):
    """Every way to write ``total`` as ``parts`` non-negative whole numbers, in order."""
    for cuts in itertools.combinations(range(total + parts - 1), parts - 1):
        prev, out = -1, []
        for c in cuts:
            out.append(c - prev - 1)
            prev = c
        out.append(total + parts - 2 - prev)
        yield out


def brute_force(model, devices, m, ctx, host_free):
    """The best cost over every plan: all worker subsets and orders, all counts, host included."""
    workers = list(dict.fromkeys(d.endpoint for d in devices if d.kind == "rpc"))
    gpus = [d for d in devices if d.kind == "gpu"]
    best = math.inf
    for r in range(len(workers) + 1):
        for order in itertools.permutations(workers, r):
            devs = [d for ep in order for d in sorted((x for x in devices if x.endpoint == ep),
                                                       key=lambda x: x.index)] + gpus
            for counts in compositions(model.n_layer + 1, len(devs) + 1):
                plan = Plan(model.n_layer, counts[0], tuple(Assignment(d, c) for d, c in zip(devs, counts[1:])))
                if not all(f.fits for f in estimate(plan, model, ctx, host_free)):
                    continue
                best = min(best, step_cost(plan, model, m).total_s)
    return best


@st.composite
def instances(draw):
    n_layer = draw(st.integers(1, 4))
    block = draw(st.sampled_from([MiB, 3 * MiB]))
    slot_bytes = tuple(draw(st.sampled_from([block, block + MiB])) for _ in range(n_layer)) + \
        (draw(st.sampled_from([MiB, 4 * MiB])),)
    model = make_model(n_layer, slot_bytes=slot_bytes, vocab=draw(st.sampled_from([512, 65536])),
                       tied=draw(st.booleans()))
    devices, compute, links = [], {}, {}
    speeds = st.floats(1e-4, 5e-3)
    for node in range(draw(st.integers(1, 3))):
        for index in range(draw(st.integers(1, 2))):
            free = draw(st.integers(0, 14)) * MiB
            d = worker(node, index, free)
            devices.append(d)
            compute[d.key] = DeviceSpeed(tuple(draw(speeds) for _ in range(n_layer + 1)))
        links[f"n{node}"] = LinkSpeed(draw(st.floats(0, 3e-3)), draw(st.sampled_from([None, 1e6, 1e8])))
    if draw(st.booleans()):
        g = Device("master", "master", None, 0, "CUDA0", draw(st.integers(0, 14)) * MiB, 1 << 30, kind="gpu")
        devices.append(g)
        compute[g.key] = DeviceSpeed(tuple(draw(speeds) for _ in range(n_layer + 1)))
    host = draw(st.one_of(st.none(), st.builds(lambda s: DeviceSpeed(s), st.lists(speeds, min_size=n_layer + 1,
                                                                                  max_size=n_layer + 1))))
    host_free = draw(st.one_of(st.none(), st.integers(0, 30).map(lambda x: x * MiB)))
    ctx = draw(st.sampled_from([64, 2048]))
    return model, devices, Measurements(compute, links, host, draw(st.floats(0, 1e-3))), ctx, host_free


@settings(max_examples=120, deadline=None)
@given(instances())
def test_fastest_matches_brute_force(case):
    model, devices, m, ctx, host_free = case
    want = brute_force(model, devices, m, ctx, host_free)
    if math.isinf(want):
        with pytest.raises(PlanError, match="no plan fits"):
            fastest(model, devices, m, ctx, host_free)
        return
    got = fastest(model, devices, m, ctx, host_free)
    assert got.cost.total_s == pytest.approx(want, rel=1e-9, abs=1e-12)
    # The reported cost is the cost model's own figure for the returned plan, and the plan fits.
    assert got.cost == step_cost(got.plan, model, m)
    assert all(f.fits for f in estimate(got.plan, model, ctx, host_free))
    # Its command line reads back to the same layout (workers without slots are left out).
    back = Plan.from_llama_args(layout_args(*got.plan.layout()), devices, model.n_layer)
    assert [back.devices()[a].key if a >= 0 else None for a in back.layer_map()] == \
           [got.plan.devices()[a].key if a >= 0 else None for a in got.plan.layer_map()]


def test_a_slow_far_worker_is_left_out_and_memory_still_rules():
    model = make_model(8, block=MiB, output=MiB, vocab=1000)
    fast, slow = worker(1), worker(2)
    m = Measurements({fast.key: DeviceSpeed.uniform(8, 0.001), slow.key: DeviceSpeed.uniform(8, 0.002)},
                     {"n1": LinkSpeed(0.0002, 1e8), "n2": LinkSpeed(0.030, 1e6)})
    plan = fastest_plan(model, [slow, fast], m, ctx=256)
    assert plan.rpc_endpoints() == [fast.endpoint]
    assert plan.host_layers == 0 and layout_args(*plan.layout())[-1] == "9"
    # When the fast worker has room for 5 slots only (the last 5, with the output layer: its
    # weights, KV cache and compute buffers), it takes those 5 and the rest go to the slow one.
    room = estimate(Plan(8, 0, [(slow, 4), (fast, 5)]), model, 256)[1].need_bytes
    small = Device(fast.node_id, fast.node_name, fast.endpoint, 0, "CPU", room, 1 << 34)
    plan = fastest_plan(model, [slow, small], m, ctx=256)
    assert plan.host_layers == 0
    assert [(d.node_id, c) for d, c in plan.assignments if c] == [(slow.node_id, 4), (small.node_id, 5)]
    assert all(f.fits for f in estimate(plan, model, 256))
    assert len(plan.rpc_endpoints()) == 2


def test_fastest_never_loses_to_the_memory_split():
    # Four workers with the same memory, one of them four times faster than the slowest.
    model = make_model(12, block=2 * MiB, output=3 * MiB, vocab=4096)
    devs = [worker(i, free=1 << 30) for i in range(4)]
    m = Measurements({d.key: DeviceSpeed.uniform(12, 0.0005 * (i + 1)) for i, d in enumerate(devs)},
                     {d.node_id: LinkSpeed(0.0003, 1.25e7) for d in devs},
                     host=DeviceSpeed.uniform(12, 0.004))
    by_memory = plan_by_memory(model, devs, ctx=1024)
    assert by_memory.counts() == [4, 3, 3, 3]  # llama.cpp rounds the first share up
    best = fastest(model, devs, m, ctx=1024)
    assert best.plan.counts() == [13, 0, 0, 0] and best.plan.rpc_endpoints() == [devs[0].endpoint]
    assert best.cost.total_s < 0.5 * step_cost(by_memory, model, m).total_s


def test_nothing_fits_says_so():
    model = make_model(4)
    d = worker(1, free=MiB // 2)
    m = Measurements({d.key: DeviceSpeed.uniform(4, 0.001)}, {"n1": LinkSpeed(0.001)},
                     host=DeviceSpeed.uniform(4, 0.01))
    with pytest.raises(PlanError, match="no plan fits"):
        fastest(model, [d], m, ctx=128, host_free_bytes=MiB)
    # Without a host measurement the host is never given layers, so memory is the only way out.
    with pytest.raises(PlanError, match="no plan fits"):
        fastest(model, [d], Measurements(m.compute, m.links), ctx=128)


def test_missing_measurements_are_named():
    model = make_model(2)
    a = worker(1)
    with pytest.raises(PlanError, match="no compute measurement for node1"):
        fastest(model, [a], Measurements({}, {"n1": LinkSpeed(0)}), ctx=64)


def test_unmeasured_devices_can_be_skipped():
    model = make_model(4)
    a, b0, b1 = worker(1), worker(2, 0), worker(2, 1)
    m = Measurements({a.key: DeviceSpeed.uniform(4, 0.004), b1.key: DeviceSpeed.uniform(4, 0.001)},
                     {"n1": LinkSpeed(0.001), "n2": LinkSpeed(0.001)})
    with pytest.raises(PlanError, match=r"no compute measurement for node2 CPU \(n2/0\)"):
        fastest(model, [a, b0, b1], m, ctx=64)
    plan = fastest_plan(model, [a, b0, b1], m, ctx=64, skip_unmeasured=True)
    # b's measured second device takes everything; its unmeasured first device holds nothing.
    assert {d.key: c for d, c in plan.assignments} == {"n2/0": 0, "n2/1": 5, "n1/0": 0}
    assert layout_args(*plan.layout())[-1] == "0,5"


def test_fastest_shares_out_the_ram_of_one_computer_among_its_devices():
    # Two CPU workers on one PC (the same machine), each reporting that PC's free RAM: room for
    # three quarters of the model. Sized one by one, the search would split the whole model
    # between them, which together they cannot hold; Fastest searches again with that RAM
    # shared out, and the slow host keeps the rest.
    model = make_model(8)
    whole = estimate(Plan(8, 0, [(worker(1), 9)]), model, 512)[0].need_bytes
    free = whole * 3 // 4
    a = Device("n1", "a", "10.0.0.1:50052", 0, "CPU", free, free, machine="pc")
    b = Device("n2", "b", "10.0.0.2:50052", 0, "CPU", free, free, machine="pc")
    m = Measurements(compute={d.key: DeviceSpeed.uniform(8, 0.001) for d in (a, b)},
                     links={d.endpoint: LinkSpeed(0.0001, 1e9) for d in (a, b)},
                     host=DeviceSpeed.uniform(8, 1.0), host_fixed_s=0.0)
    result = fastest(model, [a, b], m, 512, host_free_bytes=1 << 40)
    assert all(f.fits for f in estimate(result.plan, model, 512, host_free_bytes=1 << 40)), result.plan.describe()
    assert result.plan.host_layers > 0 and {d.free_bytes for d in result.plan.devices()} == {free}
    # and where the host has no room either, it says why in words
    with pytest.raises(PlanError, match="share its memory|no plan fits"):
        fastest(model, [a, b], m, 512, host_free_bytes=whole // 8)
    # on two computers the same devices give a plan that fits
    far = [Device("n1", "a", "10.0.0.1:50052", 0, "CPU", free, free, machine="pc1"),
           Device("n2", "b", "10.0.0.2:50052", 0, "CPU", free, free, machine="pc2")]
    assert all(f.fits for f in estimate(fastest(model, far, m, 512, host_free_bytes=1 << 40).plan, model, 512))


# -- experts in RAM --------------------------------------------------------------------------------

def _moe(n_layer: int) -> ModelInfo:
    """A mixture-of-experts model: three quarters of each block's bytes are experts, a token
    reads 2 of 8 of them."""
    from dataclasses import replace
    base = make_model(n_layer, block=8 * MiB, output=2 * MiB)
    return replace(base, expert_count=8, expert_used_count=2, expert_slot_bytes=(6 * MiB,) * n_layer + (0,))


def _gaming(gpu_free: int, cpu_free: int) -> tuple[Device, Device]:
    gpu = Device("g", "gaming", "10.9.0.7:50052", 0, "Vulkan0", gpu_free, gpu_free)
    cpu = Device("g", "gaming", "10.9.0.7:50052", 1, "CPU", cpu_free, cpu_free)
    return gpu, cpu


def _brute_force(model, gpu, cpu, m, ctx):
    """Every plan of host + the gaming PC's two devices, with and without its experts in RAM,
    that fits by estimate(): the least predicted step."""
    n = model.n_layer + 1
    best = None
    for h in range(n + 1):
        for g in range(n + 1 - h):
            plan = Plan(model.n_layer, h, [(gpu, g), (cpu, n - h - g)])
            for p in (plan, plan.with_experts_on(gpu.key, cpu.key)):
                if p.expert_homes and not p.expert_moves():
                    continue
                if all(f.fits for f in estimate(p, model, ctx)):
                    total = step_cost(p, model, m).total_s
                    if best is None or total < best[0] - 1e-12:
                        best = (total, p)
    return best


@pytest.mark.parametrize("gpu_free", [20 * MiB, 40 * MiB, 200 * MiB])
def test_fastest_keeps_a_gpus_experts_in_ram_exactly_when_that_is_fastest(gpu_free):
    model = _moe(6)
    gpu, cpu = _gaming(gpu_free + (1 << 30), 1 << 34)  # the GPU keeps 1 GiB free besides
    m = Measurements(compute={gpu.key: DeviceSpeed.uniform(6, 0.001), cpu.key: DeviceSpeed.uniform(6, 0.008)},
                     links={"g": LinkSpeed(0.0002, 1e8)}, host=DeviceSpeed.uniform(6, 0.02), host_fixed_s=0.0001)
    result = fastest(model, [gpu, cpu], m, 512)
    want_total, want = _brute_force(model, gpu, cpu, m, 512)
    assert result.cost.total_s == pytest.approx(want_total)
    assert bool(result.plan.expert_homes) == bool(want.expert_homes), (result.plan.describe(), want.describe())
    assert all(f.fits for f in estimate(result.plan, model, 512))


def test_fastest_uses_the_gpu_for_every_block_when_experts_go_to_ram():
    # a GPU with room for two whole blocks, or for every block without its experts
    model = _moe(6)
    gpu, cpu = _gaming(40 * MiB + (1 << 30), 1 << 34)
    m = Measurements(compute={gpu.key: DeviceSpeed.uniform(6, 0.001), cpu.key: DeviceSpeed.uniform(6, 0.008)},
                     links={"g": LinkSpeed(0.0002, 1e8)}, host=DeviceSpeed.uniform(6, 0.02), host_fixed_s=0.0001)
    plain = Plan(6, 0, [(gpu, 2), (cpu, 5)])
    result = fastest(model, [gpu, cpu], m, 512)
    assert result.plan.expert_homes == (("g/0", "g/1"),), result.plan.describe()
    assert result.plan.counts()[0] >= 6
    assert result.cost.total_s < step_cost(plain, model, m).total_s
