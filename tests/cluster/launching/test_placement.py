"""Reading llama-server's placement report and checking it against a plan, on log lines copied
from real runs of build 11434 (the runs themselves are in tests/cluster/llama/test_server_process.py
and tests/cluster/planning/test_plan.py)."""

from __future__ import annotations

import dataclasses

import pytest

from gui.cluster.launching.placement import check_placement, expected_slots, layout_from_log, plan_expected_slots
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.placement_log import Placement, parse_placement
from gui.cluster.planning.plan import Device, Plan

GiB = 1 << 30
A, B = "127.0.0.1:48161", "127.0.0.1:56593"

# The 8-layer demo model on two workers with -ngl 8 -ts 3,5 at -lv 4 (host keeps slot 0).
LV4_LOG = f"""\
0.00.010.212 I cmn  common_param: device_info:
0.00.237.528 I llama_prepare_model_devices: using device RPC0 ({A}) (unknown id) - 24105 MiB free
0.00.237.704 I llama_prepare_model_devices: using device RPC1 ({B}) (unknown id) - 24105 MiB free
0.00.286.166 I load_tensors: offloading output layer to GPU
0.00.286.199 I load_tensors: offloading 7 repeating layers to GPU
0.00.286.210 I load_tensors: offloaded 8/9 layers to GPU
0.00.286.229 I load_tensors:   CPU_Mapped model buffer size =     1.38 MiB
0.00.286.241 I load_tensors: RPC0[{A}] model buffer size =     1.15 MiB
0.00.286.252 I load_tensors: RPC0[{B}] model buffer size =     2.04 MiB
0.00.033.282 I llama_kv_cache: RPC0[{B}] KV buffer size =     1.00 MiB
"""

# The same split at -lv 5: the per-layer lines come on top.
LV5_LAYERS = "".join(f"0.00.014.0{i:02d} D load_tensors: layer {i:3d} assigned to device "
                     f"{'CPU' if i < 1 else 'RPC0' if i < 4 else 'RPC1'}, is_swa = 0\n" for i in range(9))


@pytest.fixture(scope="module")
def info(demo_model):
    return inspect_model(demo_model)


def plan(host: int, a: int, b: int, order=(A, B)) -> Plan:
    devs = [Device(f"n{i}", f"node{i}", ep, 0, "CPU", GiB, GiB) for i, ep in enumerate(order)]
    return Plan(8, host, [(devs[0], a), (devs[1], b)])


def test_parse_reads_devices_summary_and_weights_at_lv4():
    p = parse_placement(LV4_LOG)
    assert p.devices == [("RPC0", A), ("RPC1", B)]
    assert p.offloaded == (8, 9)
    assert p.buffers == {"CPU_Mapped": 1.38, f"RPC0[{A}]": 1.15, f"RPC0[{B}]": 2.04}
    # RPC0[B] is device 0 *of B*, which is RPC1 in model order.
    assert p.device_bytes() == {"RPC0": round(1.15 * (1 << 20)), "RPC1": round(2.04 * (1 << 20))}
    assert p.host_buffers() == {"CPU_Mapped": 1.38} and p.slots == {}
    assert parse_placement(LV4_LOG.splitlines()) == p


def test_weights_per_device_confirm_the_plan(info):
    check = check_placement(plan(1, 3, 5), parse_placement(LV4_LOG), info)
    assert check.ok and not check.per_layer, check.problems
    assert check.actual == {"host": [0], A: [1, 2, 3], B: [4, 5, 6, 7, 8]}
    assert check.report == [
        "host keeps slot 0 as planned (1.38 MiB incl. token embeddings)",
        f"{A} (RPC0) holds slots 1-3 as planned (1.15 MiB of weights)",
        f"{B} (RPC1) holds slots 4-8 as planned (2.04 MiB of weights)"]
    assert layout_from_log(parse_placement(LV4_LOG), info) == check.actual


@pytest.mark.parametrize("host, a, b, words", [
    (1, 4, 4, [f"{A} (RPC0) holds slots 1-3 (1.15 MiB of weights), the plan gave it slots 1-4 (1.54 MiB)",
               f"{B} (RPC1) holds slots 4-8 (2.04 MiB of weights), the plan gave it slots 5-8 (1.65 MiB)"]),
    (1, 2, 6, [f"{A} (RPC0) holds slots 1-3 (1.15 MiB of weights), the plan gave it slots 1-2"]),
    (2, 2, 5, ["llama-server offloaded 8 of 9 slots (the host keeps 0), the plan offloads 7"]),
])
def test_a_different_split_is_named_device_by_device(info, host, a, b, words):
    check = check_placement(plan(host, a, b), parse_placement(LV4_LOG), info)
    assert not check.ok
    for w in words:
        assert any(p.startswith(w) for p in check.problems), check.problems
    # What llama-server did is still read off the bytes.
    assert check.actual == {"host": [0], A: [1, 2, 3], B: [4, 5, 6, 7, 8]}


def test_workers_in_another_order_are_reported(info):
    check = check_placement(plan(1, 3, 5, order=(B, A)), parse_placement(LV4_LOG), info)
    assert not check.ok
    assert any(p.startswith(f"llama-server's device order is RPC0 {A}, RPC1 {B}; the plan expected "
                            f"RPC0 {B}, RPC1 {A}") for p in check.problems)


def test_weights_that_fit_no_run_of_slots(info):
    log = LV4_LOG.replace(f"RPC0[{A}] model buffer size =     1.15", f"RPC0[{A}] model buffer size =     1.30")
    check = check_placement(plan(1, 3, 5), parse_placement(log), info)
    assert not check.ok
    assert check.problems[0].startswith(f"{A} (RPC0) has 1.30 MiB of weights, which is no run of whole "
                                        "slots from slot 1")
    assert "cannot be told because an earlier device's could not" in check.problems[1]
    assert layout_from_log(parse_placement(log), info) == {"host": [0]}


def test_slots_smaller_than_the_rounding_are_not_guessed(info):
    # Bytes can only be ambiguous when a slot is within the ±0.005 MiB of the printed figure.
    tiny = dataclasses.replace(info, slot_bytes=(1000,) * 8 + (2000,), tensors=())
    log = LV4_LOG.replace("1.15 MiB", "0.00 MiB").replace("2.04 MiB", "0.01 MiB")
    check = check_placement(plan(1, 3, 5), parse_placement(log), tiny)
    assert not check.ok
    assert any("bytes alone cannot tell; use --verify-layers" in p for p in check.problems)


def test_the_output_slot_counts_with_its_own_size(info):
    # Output slot (the last) bigger than a block: 3 blocks + output is not 4 blocks.
    assert info.slot_bytes[8] != info.slot_bytes[7]
    check = check_placement(plan(1, 4, 4), parse_placement(LV4_LOG), info)
    assert not check.ok
    swapped = LV4_LOG.replace("2.04 MiB", "1.54 MiB").replace("1.15 MiB", "1.65 MiB")
    # 4 blocks (1.54) on B and 3 blocks + output (1.65) on A would be out of model order.
    bad = check_placement(plan(1, 3, 5), parse_placement(swapped), info)
    assert not bad.ok


def test_per_layer_lines_are_checked_slot_by_slot(info):
    p = parse_placement(LV4_LOG + LV5_LAYERS)
    assert p.by_endpoint() == {"host": [0], A: [1, 2, 3], B: [4, 5, 6, 7, 8]}
    check = check_placement(plan(1, 3, 5), p, info)
    assert check.ok and check.per_layer
    off = check_placement(plan(1, 4, 4), p, info)
    assert f"{A} holds layer slots 1-3, the plan gave it 1-4" in off.problems


def test_no_report_in_the_log_fails_with_the_reason():
    check = check_placement(plan(1, 3, 5), Placement())
    assert not check.ok and "needs -lv 4 or higher" in check.problems[0]
    only_summary = check_placement(plan(1, 3, 5), parse_placement(LV4_LOG))  # no model sizes
    assert only_summary.ok and only_summary.actual == {"host": [0]}
    assert "not checked" in only_summary.report[0]


def test_a_worker_with_two_devices(info):
    # RPCk[ep] is device k of that worker; model order numbers all devices across workers.
    a0, a1 = (Device("a", "a", A, i, f"D{i}", GiB, GiB) for i in (0, 1))
    b0 = Device("b", "b", B, 0, "CPU", GiB, GiB)
    p2 = Plan(8, 0, [(a0, 2), (a1, 3), (b0, 4)])
    mib = [sum(info.slot_bytes[s:e]) / (1 << 20) for s, e in ((0, 2), (2, 5), (5, 9))]
    log = (f"I llama_prepare_model_devices: using device RPC0 ({A}) (x)\n"
           f"I llama_prepare_model_devices: using device RPC1 ({A}) (x)\n"
           f"I llama_prepare_model_devices: using device RPC2 ({B}) (x)\n"
           "I load_tensors: offloaded 9/9 layers to GPU\n"
           f"I load_tensors: RPC1[{A}] model buffer size = {mib[1]:8.2f} MiB\n"
           f"I load_tensors: RPC0[{A}] model buffer size = {mib[0]:8.2f} MiB\n"
           f"I load_tensors: RPC0[{B}] model buffer size = {mib[2]:8.2f} MiB\n")
    check = check_placement(p2, parse_placement(log), info)
    assert check.ok, check.problems
    assert check.actual == {A: [0, 1, 2, 3, 4], B: [5, 6, 7, 8]}
    # Swap the two buffers of worker A: its device 0 then claims 3 slots.
    swapped = log.replace(f"RPC1[{A}]", "X").replace(f"RPC0[{A}]", f"RPC1[{A}]").replace("X", f"RPC0[{A}]")
    assert not check_placement(p2, parse_placement(swapped), info).ok


def test_expected_slots_multi_device_node_and_zero_counts():
    # A worker exposing two devices appears twice in device order; a zero count takes no slot.
    assert expected_slots(0, [("a:1", 2), ("b:1", 0), ("a:1", 3)]) == {"a:1": [0, 1, 2, 3, 4]}
    assert plan_expected_slots(plan(2, 0, 7)) == {"host": [0, 1], B: [2, 3, 4, 5, 6, 7, 8]}


def test_host_weights_memory_mapped_or_loaded(info):
    # Memory-mapped (the default) the host's buffer is the file range from token_embd to the end
    # of its last block, output tensors in between included; loaded (-lm none) it is the sum.
    assert check_placement(plan(1, 3, 5), parse_placement(LV4_LOG), info).ok
    loaded = LV4_LOG.replace("  CPU_Mapped model buffer size =     1.38", "         CPU model buffer size =     0.88")
    assert check_placement(plan(1, 3, 5), parse_placement(loaded), info).ok
    for log in (LV4_LOG.replace("1.38 MiB", "1.50 MiB"), loaded.replace("0.88 MiB", "1.38 MiB")):
        check = check_placement(plan(1, 3, 5), parse_placement(log), info)
        assert not check.ok
        assert check.problems[0].startswith("the host's weights are ")
        assert "but keeping slot 0 and the token embeddings takes" in check.problems[0]


# --- repacked host weights: log excerpts from three kinds of CPU ------------------------------

# Intel Xeon with AMX (system_info: AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1): the 8-layer F16 demo
# model with 2 host slots and one worker — the AMX buffer holds the host blocks' F16 matrices.
AMX_LOG = f"""\
llama_prepare_model_devices: using device RPC0 ({A}) (unknown id) - 24105 MiB free
load_tensors: offloaded 7/9 layers to GPU
load_tensors:          AMX model buffer size =     0.77 MiB
load_tensors:   CPU_Mapped model buffer size =     1.51 MiB
load_tensors: RPC0[{A}] model buffer size =     2.80 MiB
"""

# AMD EPYC with AVX2/AVX-512 (REPACK = 1): Q4_K_M llama (8 layers, 256 wide), 2 host slots and
# one worker: the host blocks' Q4_K matrices go to CPU_REPACK, their Q6_K ones stay mapped.
REPACK_Q4_K_M_LOG = f"""\
0.00.016.752 I llama_prepare_model_devices: using device RPC0 ({A}) (unknown id) - 24105 MiB free
0.00.024.704 I load_tensors: offloaded 7/9 layers to GPU
0.00.024.711 I load_tensors:   CPU_Mapped model buffer size =     1.36 MiB
0.00.024.712 I load_tensors:   CPU_REPACK model buffer size =     0.77 MiB
0.00.024.713 I load_tensors: RPC0[{A}] model buffer size =     3.36 MiB
"""

# The same CPU, a tied Q4_0 model (4 layers) all on the host: the output layer's copy of the
# token embeddings is repacked too, so it takes memory of its own.
REPACK_TIED_LOG = """\
0.00.012.526 I load_tensors: offloaded 0/5 layers to GPU
0.00.012.543 I load_tensors:   CPU_Mapped model buffer size =     1.49 MiB
0.00.012.556 I load_tensors:   CPU_REPACK model buffer size =     1.69 MiB
"""


def _one_worker_plan(n_layer: int, host: int) -> Plan:
    return Plan(n_layer, host, [(Device("n0", "node0", A, 0, "CPU", GiB, GiB), n_layer + 1 - host)])


@pytest.fixture(scope="module")
def q4_k_m(tmp_path_factory):
    from gui.cluster.llama.random_model import DemoShape, write_demo_model
    path = tmp_path_factory.mktemp("q4km") / "q4km.gguf"
    return inspect_model(write_demo_model(path, DemoShape(layers=8, embd=256, ff=768, quant="Q4_K_M")))


@pytest.fixture(scope="module")
def q4_0_tied(tmp_path_factory):
    from gui.cluster.llama.random_model import DemoShape, write_demo_model
    path = tmp_path_factory.mktemp("q40") / "q40.gguf"
    return inspect_model(write_demo_model(path, DemoShape(layers=4, embd=256, ff=512, quant="Q4_0", tied=True)))


def test_amx_buffer_holds_the_host_blocks_matrices(info):
    check = check_placement(_one_worker_plan(8, 2), parse_placement(AMX_LOG), info)
    assert check.ok, check.problems
    assert check.actual == {"host": [0, 1], A: list(range(2, 9))}
    assert "AMX holds 14 F16 matrices" in check.report[0]  # 7 per block: q, k, v, o, gate, up, down


def test_cpu_repack_takes_the_q4_k_matrices_and_leaves_q6_k_mapped(q4_k_m):
    check = check_placement(_one_worker_plan(8, 2), parse_placement(REPACK_Q4_K_M_LOG), q4_k_m)
    assert check.ok, check.problems
    # Block 0 is a "more bits" block of the Q4_K_M mix (its attn_v and ffn_down are Q6_K, which
    # this CPU does not repack); block 1 is all Q4_K: 5 + 7 matrices.
    assert "CPU_REPACK holds 12 Q4_K matrices" in check.report[0]


def test_repacked_output_copy_of_tied_embeddings_is_counted(q4_0_tied):
    check = check_placement(Plan(4, 5), parse_placement(REPACK_TIED_LOG), q4_0_tied)
    assert check.ok, check.problems
    # 4 blocks × 7 matrices, and the output layer's copy of token_embd.
    assert "CPU_REPACK holds 29 Q4_0 matrices" in check.report[0]


@pytest.mark.parametrize("log, change", [
    (AMX_LOG, ("0.77 MiB", "0.70 MiB")),               # a repacked buffer of no grouping's size
    (AMX_LOG, ("1.51 MiB", "1.80 MiB")),               # the mapped range does not fit
    (REPACK_Q4_K_M_LOG, ("0.77 MiB", "0.95 MiB")),
])
def test_repacked_host_buffers_of_the_wrong_size_are_a_problem(info, q4_k_m, log, change):
    model = info if log is AMX_LOG else q4_k_m
    check = check_placement(_one_worker_plan(8, 2), parse_placement(log.replace(*change)), model)
    assert not check.ok
    assert any("llama.cpp repacks some for this CPU" in p for p in check.problems), check.problems


def test_host_keeping_another_count_is_told_with_repacked_buffers(info):
    # llama-server kept 2 slots but the plan asked for 3: the summary line says so.
    check = check_placement(_one_worker_plan(8, 3), parse_placement(AMX_LOG), info)
    assert not check.ok
    assert any("the plan offloads 6" in p for p in check.problems), check.problems


def test_unknown_extra_buffer_is_reported_not_checked(info):
    # A repacking buffer type whose layout herd does not know (an ARM CPU's KleidiAI): its size
    # is shown, the mapped part is still checked.
    log = AMX_LOG.replace("         AMX model", "CPU_KLEIDIAI model")
    check = check_placement(_one_worker_plan(8, 2), parse_placement(log), info)
    assert check.ok, check.problems
    assert "size of CPU_KLEIDIAI not checked" in check.report[0]
