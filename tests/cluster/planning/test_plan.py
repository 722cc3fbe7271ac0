"""The planner: llama.cpp's layer map and its exact inverse, plans, memory fit, placement.

The layer map is checked against a transcription of llama.cpp's rule
(src/llama-model.cpp:1558-1616, docs/llama-cpp.md) over thousands of random inputs, and every plan's command-line
form is read back through that same rule. The engine test runs real RPC workers and a real
llama-server and compares its own placement report with the plan.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time

import numpy as np
import pytest
from conftest import free_port
from hypothesis import given, settings
from hypothesis import strategies as st

from gui.cluster.launching.placement import check_placement, layout_from_log
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.placement_log import parse_placement
from gui.cluster.llama.server_command import layout_args
from gui.cluster.planning.plan import (
    Assignment,
    Device,
    Plan,
    PlanError,
    compute_buffer_bytes,
    estimate,
    layer_map,
    layer_map_inverse,
    model_order,
    parse_split,
    plan_by_memory,
    plan_from_split,
)

GiB = 1 << 30


def reference_layer_map(n_layer, ngl, ts):
    """llama.cpp's rule, transcribed verbatim (the oracle)."""
    n = n_layer + 1
    ngl = n if ngl < 0 else min(ngl, n)
    acc, s = [], np.float32(0)
    for x in ts:
        s = np.float32(s + np.float32(x))
        acc.append(s)
    acc = [np.float32(a / s) for a in acc]
    start = n - ngl
    return [-1 if i < start else
            next(k for k, a in enumerate(acc) if a > np.float32(np.float32(i - start) / np.float32(ngl)))
            for i in range(n)]


def rpc(node: str, port: int, index: int = 0, free: int = 8 * GiB, name: str = "CPU") -> Device:
    return Device(node, f"node-{node}", f"127.0.0.1:{port}", index, name, free, 2 * free)


def gpu(index: int, free: int = 4 * GiB) -> Device:
    return Device("master", "master", None, index, f"CUDA{index}", free, 2 * free, kind="gpu")


# -- strategies ---------------------------------------------------------------------------------

@st.composite
def layouts(draw, max_layers: int = 120, max_devices: int = 9):
    """(n_layer, n_devices, layout): a host run then contiguous, possibly empty, device runs."""
    n_layer = draw(st.integers(1, max_layers))
    n_dev = draw(st.integers(1, max_devices))
    n = n_layer + 1
    cuts = sorted(draw(st.lists(st.integers(0, n), min_size=n_dev + 1, max_size=n_dev + 1)))
    cuts[-1] = n
    layout = [-1] * cuts[0]
    for k in range(n_dev):
        layout += [k] * (cuts[k + 1] - cuts[k])
    return n_layer, n_dev, layout


@st.composite
def clusters(draw):
    """Random devices: RPC nodes with 1–3 devices each (uneven memory), then 0–2 local GPUs."""
    devices = []
    for node in range(draw(st.integers(0, 4))):
        for index in range(draw(st.integers(1, 3))):
            free = draw(st.integers(1, 64)) * GiB // 4
            devices.append(rpc(f"n{node}", 50000 + node, index, free, f"CUDA{index}"))
    for index in range(draw(st.integers(0 if devices else 1, 2))):
        devices.append(gpu(index, draw(st.integers(1, 64)) * GiB // 4))
    return devices


@st.composite
def plans(draw):
    """A valid plan over a random cluster, with zero counts sprinkled in."""
    devices = draw(clusters())
    n_layer = draw(st.integers(1, 100))
    n = n_layer + 1
    cuts = sorted(draw(st.lists(st.integers(0, n), min_size=len(devices) + 1, max_size=len(devices) + 1)))
    cuts[-1] = n
    counts = [cuts[k + 1] - cuts[k] for k in range(len(devices))]
    return Plan(n_layer, cuts[0], tuple(Assignment(d, c) for d, c in zip(devices, counts))), devices


# -- the layer map ------------------------------------------------------------------------------

@settings(max_examples=2000, deadline=None)
@given(n_layer=st.integers(1, 150), ngl=st.integers(-1, 160),
       ts=st.lists(st.floats(0, 1e12, allow_nan=False, allow_infinity=False), min_size=1, max_size=10)
       .filter(lambda t: np.float32(sum(np.float32(x) for x in t)) > 0))
def test_layer_map_equals_llama_cpp_rule(n_layer, ngl, ts):
    assert layer_map(n_layer, ngl, ts) == reference_layer_map(n_layer, ngl, ts)


@settings(max_examples=3000, deadline=None)
@given(layouts())
def test_inverse_reproduces_every_layout_exactly(case):
    n_layer, n_dev, layout = case
    ngl, ts = layer_map_inverse(layout, n_dev)
    assert all(isinstance(c, int) for c in ts)
    assert reference_layer_map(n_layer, ngl, ts) == layout if ngl else layout == [-1] * (n_layer + 1)


def test_normalised_fractions_are_not_an_inverse_but_counts_are():
    # Why plans are passed as whole numbers: the same layout as fractions lands elsewhere.
    rng = np.random.default_rng(7)
    off_by_fractions = 0
    for _ in range(500):
        n_layer = int(rng.integers(8, 90))
        counts = [int(c) for c in rng.integers(0, 20, size=3)]
        if sum(counts) == 0 or sum(counts) > n_layer + 1:
            continue
        layout = [-1] * (n_layer + 1 - sum(counts)) + [k for k, c in enumerate(counts) for _ in range(c)]
        assert layer_map(n_layer, sum(counts), counts) == layout
        fractions = [np.float32(c / sum(counts)) for c in counts]
        off_by_fractions += layer_map(n_layer, sum(counts), fractions) != layout
    assert off_by_fractions > 0


def test_output_layer_lands_on_last_device_with_slots():
    # 4 blocks + output; the last device is empty, so the output goes to device 1.
    assert layer_map(4, 5, [2, 3, 0]) == [0, 0, 1, 1, 1]
    assert layer_map(4, 1, [0, 1]) == [-1, -1, -1, -1, 1]  # only the output is offloaded


def test_host_keeps_everything_with_ngl_zero_and_leading_slots_otherwise():
    assert layer_map(6, 0, [1, 1]) == [-1] * 7
    assert layer_map(6, 3, [1, 2]) == [-1, -1, -1, -1, 0, 1, 1]
    assert layer_map(6, -1, [1]) == [0] * 7
    assert layer_map(6, 99, [1]) == [0] * 7


def test_layer_map_rejects_negative_and_all_zero_splits():
    with pytest.raises(PlanError, match="negative"):
        layer_map(4, 5, [1, -1])
    with pytest.raises(PlanError, match="zero"):
        layer_map(4, 5, [0, 0])


def test_inverse_rejects_impossible_layouts():
    with pytest.raises(PlanError, match="host slots must all come first"):
        layer_map_inverse([0, -1, 1], 2)
    with pytest.raises(PlanError, match="model order"):
        layer_map_inverse([1, 0], 2)
    with pytest.raises(PlanError, match="outside"):
        layer_map_inverse([0, 2], 2)


# -- plans and their arguments ------------------------------------------------------------------

@settings(max_examples=1500, deadline=None)
@given(plans())
def test_llama_args_read_back_through_llama_cpp_rule(case):
    plan, devices = case
    args = layout_args(*plan.layout())
    assert args[args.index("--fit") + 1] == "off"
    assert int(args[args.index("-ngl") + 1]) == plan.offloaded
    back = Plan.from_llama_args(args, devices, plan.n_layer)
    # Same slots on the same devices (devices of unused workers are not in the args at all).
    assert [back.devices()[a].key if a >= 0 else None for a in back.layer_map()] == \
           [plan.devices()[a].key if a >= 0 else None for a in plan.layer_map()]
    if "-ts" in args:
        ts = args[args.index("-ts") + 1].split(",")
        assert all(t.isdigit() for t in ts)
        assert len(ts) == len(plan.active_assignments())
        # And the oracle agrees on where llama-server puts each slot.
        active = plan.active_assignments()
        oracle = reference_layer_map(plan.n_layer, plan.offloaded, [int(t) for t in ts])
        assert [active[k] if k >= 0 else -1 for k in oracle] == plan.layer_map()


def test_llama_args_of_an_uneven_multi_device_node():
    a, b0, b1, b2 = rpc("a", 1), rpc("b", 2, 0), rpc("b", 2, 1), rpc("b", 2, 2)
    plan = Plan(10, 2, [(a, 3), (b0, 0), (b1, 5), (b2, 1)])
    assert layout_args(*plan.layout()) == ["--rpc", "127.0.0.1:1,127.0.0.1:2", "--fit", "off",
                                 "-ngl", "9", "-ts", "3,0,5,1"]
    assert plan.layer_map() == [-1, -1, 0, 0, 0, 2, 2, 2, 2, 2, 3]
    assert plan.expected_placement()[10] == "RPC3"  # b's third device: fourth RPC device overall
    assert plan.expected_placement()[2] == "RPC0"
    assert plan.expected_placement()[0] == "CPU"


def test_unused_worker_is_left_out_of_rpc_and_its_numbers():
    a, b, c = rpc("a", 1), rpc("b", 2), rpc("c", 3)
    plan = Plan(4, 0, [(a, 2), (b, 0), (c, 3)])
    assert plan.rpc_endpoints() == ["127.0.0.1:1", "127.0.0.1:3"]
    assert layout_args(*plan.layout())[-1] == "2,3"
    assert plan.device_names() == ["RPC0", None, "RPC1"]


def test_local_gpus_follow_rpc_devices_and_always_take_a_number():
    a, g0, g1 = rpc("a", 1), gpu(0), gpu(1)
    plan = Plan(5, 1, [(a, 2), (g0, 0), (g1, 3)])
    assert layout_args(*plan.layout()) == ["--rpc", "127.0.0.1:1", "--fit", "off", "-ngl", "5", "-ts", "2,0,3"]
    assert plan.device_names() == ["RPC0", "CUDA0", "CUDA1"]
    only_host = Plan(5, 6, [(a, 0), (g0, 0)])
    assert layout_args(*only_host.layout()) == ["--fit", "off", "-ngl", "0"]


@pytest.mark.parametrize("build, message", [
    (lambda a, b: Plan(4, 1, [(a, 2), (b, 1)]), r"= 4 slots, but the model has 5"),
    (lambda a, b: Plan(4, 1, [(a, -1), (b, 5)]), r"assignments\[0\]\.count .*negative"),
    (lambda a, b: Plan(4, 1, [(a, 2.0), (b, 2)]), r"assignments\[0\]\.count .*whole number"),
    (lambda a, b: Plan(4, True, [(a, 2), (b, 2)]), r"host_layers: expected a whole number"),
    (lambda a, b: Plan(4, 1, [(a, 2), (a, 2)]), r"listed twice"),
    (lambda a, b: Plan(0, 1, []), r"n_layer"),
    (lambda a, b: Plan(4, 1, [(gpu(0), 2), (a, 2)]), r"after a local GPU"),
    (lambda a, b: Plan(4, 1, [(a, 2), (rpc("b", 2, 1), 2)]), r"expected device 0 of 127.0.0.1:2"),
])
def test_invalid_plans_say_what_is_wrong(build, message):
    with pytest.raises(PlanError, match=message):
        build(rpc("a", 1), rpc("b", 2))


def test_from_llama_args_errors_name_the_problem():
    devs = [rpc("a", 1), rpc("b", 2)]
    with pytest.raises(PlanError, match="127.0.0.1:9: unknown device"):
        Plan.from_llama_args(["--rpc", "127.0.0.1:9", "-ngl", "3"], devs, 4)
    with pytest.raises(PlanError, match="-ts has 3 values"):
        Plan.from_llama_args(["--rpc", "127.0.0.1:1,127.0.0.1:2", "-ngl", "3", "-ts", "1,1,1"], devs, 4)
    with pytest.raises(PlanError, match="-ngl: expected a whole number or 'all'"):
        Plan.from_llama_args(["-ngl", "auto"], devs, 4)
    assert Plan.from_llama_args(["--rpc", "127.0.0.1:1", "-ngl", "all"], devs, 4).counts() == [5]
    with pytest.raises(PlanError, match="missing value"):
        Plan.from_llama_args(["--rpc"], devs, 4)


def test_from_llama_args_without_ts_splits_by_free_memory_like_llama_cpp():
    devs = [rpc("a", 1, free=3 * GiB), rpc("b", 2, free=1 * GiB)]
    plan = Plan.from_llama_args(["--rpc=127.0.0.1:1,127.0.0.1:2", "-ngl", "8"], devs, 7)
    assert plan.layer_map() == [0 if k == 0 else 1 for k in layer_map(7, 8, [3 * GiB, 1 * GiB])]
    assert plan.counts() == [6, 2]


def test_ipv6_endpoints_in_brackets_are_accepted_and_bare_ones_refused():
    assert Device("v6", "v6", "[fe80::1]:50052").endpoint == "[fe80::1]:50052"
    with pytest.raises(PlanError, match="endpoint must be 'host:port'"):
        Device("v6", "v6", "fe80::1:50052")


def test_plan_json_round_trip():
    plan = Plan(6, 1, [(rpc("a", 1), 3), (rpc("b", 2), 0), (gpu(0), 3)])
    assert Plan.from_json(plan.to_json()) == plan


def test_model_order_groups_devices_by_endpoint():
    b1, a0, b0, g = rpc("b", 2, 1), rpc("a", 1, 0), rpc("b", 2, 0), gpu(0)
    assert model_order([g, b1, a0, b0]) == [b0, b1, a0, g]
    assert model_order([g, b1, a0, b0], ["127.0.0.1:1"]) == [a0, b0, b1, g]


# -- memory fit and default plans --------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_info(demo_model):
    return inspect_model(demo_model)


def test_estimate_counts_every_weight_once_and_kv_per_block(demo_info):
    devs = [rpc("a", 1), rpc("b", 2)]
    plan = Plan(8, 2, [(devs[0], 3), (devs[1], 4)])
    fits = estimate(plan, demo_info, ctx=1024, host_free_bytes=GiB)
    assert [f.slots for f in fits] == [range(2, 5), range(5, 9), range(0, 2)]
    assert fits[-1].is_host
    assert sum(f.weights_bytes for f in fits) == demo_info.tensor_bytes
    assert fits[0].kv_bytes == 3 * demo_info.kv_bytes_per_layer(1024)
    assert fits[1].kv_bytes == 3 * demo_info.kv_bytes_per_layer(1024)  # 3 blocks + output
    # The logits live in the host's output buffer, wherever the output layer runs.
    assert fits[1].compute_bytes == fits[0].compute_bytes
    assert fits[-1].compute_bytes > fits[0].compute_bytes

    assert all(f.fits and f.short_by_bytes == 0 for f in fits)


def test_estimate_reports_who_is_short_and_by_how_much(demo_info):
    tight = rpc("a", 1, free=5 << 20)
    plan = Plan(8, 0, [(tight, 9)])
    fit = estimate(plan, demo_info, ctx=2048)[0]
    assert not fit.fits
    assert fit.short_by_bytes == fit.need_bytes - (5 << 20) > 0
    assert "short by" in fit.describe() and "node-a" in fit.describe()


def test_plan_by_memory_is_llama_cpps_free_memory_split(demo_info):
    devs = [rpc("a", 1, free=6 * GiB), rpc("b", 2, 0, free=GiB), rpc("b", 2, 1, free=2 * GiB)]
    plan = plan_by_memory(demo_info, devs, ctx=4096)
    assert plan.host_layers == 0
    assert plan.layer_map() == layer_map(8, 9, [6 * GiB, GiB, 2 * GiB])


def test_plan_by_memory_keeps_layers_on_the_host_when_devices_are_full(demo_info):
    per_layer = demo_info.slot_bytes[0] + demo_info.kv_bytes_per_layer(512)
    room = 3 * per_layer + compute_buffer_bytes(demo_info, 512, True, True)  # about 3 blocks each
    devs = [rpc("a", 1, free=room), rpc("b", 2, free=room)]
    plan = plan_by_memory(demo_info, devs, ctx=512)
    assert 0 < plan.host_layers < 9
    assert all(f.fits for f in estimate(plan, demo_info, 512)[:-1])
    one_more = Plan.from_layout(8, plan.devices(), layer_map(8, plan.offloaded + 1, [room, room]))
    assert not all(f.fits for f in estimate(one_more, demo_info, 512)[:-1])


def test_plan_from_split_by_node_name_id_and_host(demo_info):
    devs = [rpc("a", 1), rpc("b", 2, 0, free=3 * GiB), rpc("b", 2, 1, free=GiB), gpu(0)]
    plan = plan_from_split(demo_info, devs, parse_split("node-b=4,a=3"))
    # b is named first, so it is first in --rpc; its two devices share 4 slots by free memory.
    assert plan.rpc_endpoints() == ["127.0.0.1:2", "127.0.0.1:1"]
    assert plan.counts() == [3, 1, 3, 0]
    assert plan.host_layers == 2
    with_host = plan_from_split(8, devs, {"host": 1, "b/1": 8})
    assert with_host.counts() == [0, 8, 0, 0] and with_host.host_layers == 1


@pytest.mark.parametrize("split, message", [
    ({"zed": 3}, r"'zed': unknown node or device"),
    ({"a": 10}, r"gives 10 slots but the model has only 9"),
    ({"host": 1, "a": 3}, r"host 1 \+ devices 3 = 4 slots"),
    ({"a": -2}, r"negative"),
    ({"b": 2, "b/0": 1}, r"already has a count"),
])
def test_plan_from_split_errors(split, message):
    devs = [rpc("a", 1), rpc("b", 2, 0), rpc("b", 2, 1)]
    with pytest.raises(PlanError, match=message):
        plan_from_split(8, devs, split)


def test_split_key_naming_several_nodes_is_refused():
    devs = [rpc("a", 1, name="CUDA0"), rpc("b", 2, 0, name="CUDA0"), rpc("b", 2, 1, name="CUDA1")]
    with pytest.raises(PlanError, match=r"'CUDA0': names devices of several nodes; use one of a/0, b/0"):
        plan_from_split(8, devs, {"CUDA0": 2})
    plan = plan_from_split(8, devs, {"CUDA1": 2})
    assert {d.key: c for d, c in plan.assignments} == {"b/0": 0, "b/1": 2, "a/0": 0}


@pytest.mark.parametrize("text, message", [
    ("a", "expected NODE=COUNT"), ("a=x", "not a whole number"), ("a=1,a=2", "twice"), ("", "empty"),
])
def test_parse_split_errors(text, message):
    with pytest.raises(PlanError, match=message):
        parse_split(text)


# -- placement read back from the real llama-server (more in test_placement.py) ----------------

def _start_rpc_workers(engine, procs, count: int) -> list[str]:
    """``count`` real ggml-rpc-server processes on 127.0.0.1, each accepting connections."""
    endpoints = []
    for _ in range(count):
        port = free_port()
        procs.popen([engine.rpc_server, "-H", "127.0.0.1", "-p", str(port), "-t", "1"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        endpoints.append(f"127.0.0.1:{port}")
    deadline = time.monotonic() + 20
    for ep in endpoints:
        while True:
            try:
                with socket.create_connection(("127.0.0.1", int(ep.rsplit(":", 1)[1])), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"ggml-rpc-server on {ep} did not start listening")
                time.sleep(0.05)
    return endpoints


def _wait_for_log(proc: subprocess.Popen, log_path, ready, timeout: float = 90.0) -> str:
    """Poll llama-server's log until ``ready(text)`` holds; fail on exit or timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        if ready(text):
            return text
        if proc.poll() is not None:
            pytest.fail(f"llama-server exited with {proc.returncode}:\n{text[-3000:]}")
        time.sleep(0.1)
    pytest.fail(f"llama-server's log is incomplete after {timeout} s:\n{log_path.read_text(errors='replace')[-3000:]}")


@pytest.mark.engine
@pytest.mark.parametrize("host, counts", [(2, [4, 3]), (0, [1, 8]), (1, [0, 8])])
def test_real_llama_server_places_layers_where_the_plan_says(engine, demo_model, procs, tmp_path, host, counts):
    endpoints = _start_rpc_workers(engine, procs, 2)
    devs = [Device(f"w{i}", f"worker{i}", ep, 0, "CPU", GiB, 2 * GiB) for i, ep in enumerate(endpoints)]
    plan = Plan(8, host, [(devs[0], counts[0]), (devs[1], counts[1])])
    log_path = tmp_path / "llama-server.log"
    with open(log_path, "wb") as log:
        proc = procs.popen([engine.llama_server, "-m", demo_model, *layout_args(*plan.layout()), "-c", "256",
                            "--host", "127.0.0.1", "--port", str(free_port()), "-lv", "5"],
                           stdout=log, stderr=subprocess.STDOUT)
        # Placement lines come first; the compute buffers (one per active device, then the CPU's)
        # are reserved after the weights are loaded.
        n_buffers = len(plan.active_assignments()) + 1
        text = _wait_for_log(proc, log_path, lambda t: parse_placement(t).n_slots >= plan.n_slots
                             and t.count("compute buffer size") >= n_buffers)
    placement = parse_placement(text)
    info = inspect_model(demo_model)
    check = check_placement(plan, placement, info)
    assert check.ok and check.per_layer, check.problems
    assert placement.slots == plan.expected_placement()
    # The weights per device alone (what -lv 4 prints) give the very same layout.
    placement.slots.clear()
    assert layout_from_log(placement, info) == check.actual
    assert check_placement(plan, placement, info).ok
    # llama-server's own device list: RPCk is the k-th --rpc endpoint, as device_names() says.
    listed = dict(re.findall(r"using device (RPC\d+) \(([^)]+)\)", text))
    assert listed == {name: dev.endpoint for dev, name in zip(plan.devices(), plan.device_names()) if name}
    # The memory estimate against the buffers llama-server reports for each worker.
    for fit in estimate(plan, info, ctx=256)[:-1]:
        if not fit.slots:
            continue
        ep = re.escape(fit.device.endpoint)
        mib = {kind: float(re.search(rf"RPC0\[{ep}\] {kind} buffer size = +([\d.]+) MiB", text).group(1))
               for kind in ("model", "KV", "compute")}
        assert mib["model"] == pytest.approx(fit.weights_bytes / (1 << 20), abs=0.01)
        assert mib["KV"] == pytest.approx(fit.kv_bytes / (1 << 20), abs=0.01)
        # never under by more than 5 % (a launch would run out of memory), over by at most 10 %
        assert 0.95 * mib["compute"] <= fit.compute_bytes / (1 << 20) <= 1.10 * mib["compute"], \
            (fit.compute_bytes / (1 << 20), mib["compute"])


def _write_tied_model(path, layers: int = 4, e: int = 128, f: int = 352, v: int = 2048):
    """A loadable llama GGUF without ``output.weight``: the output reuses the token embeddings."""
    import gguf

    rng = np.random.default_rng(0)

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(512)
    w.add_embedding_length(e)
    w.add_block_count(layers)
    w.add_feed_forward_length(f)
    w.add_head_count(e // 64)
    w.add_head_count_kv(e // 64)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("test")
    w.add_token_list([f"t{i}" for i in range(v)])
    w.add_tensor("token_embd.weight", mat(v, e))
    w.add_tensor("output_norm.weight", np.ones(e, dtype=np.float32))
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(e, dtype=np.float32))
        for name, (r, c) in {"attn_q": (e, e), "attn_k": (e, e), "attn_v": (e, e), "attn_output": (e, e),
                             "ffn_gate": (f, e), "ffn_up": (f, e), "ffn_down": (e, f)}.items():
            w.add_tensor(p + name + ".weight", mat(r, c))
        w.add_tensor(p + "ffn_norm.weight", np.ones(e, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.engine
def test_tied_model_sends_a_copy_of_the_embeddings_with_the_output_layer(engine, procs, tmp_path):
    model = _write_tied_model(tmp_path / "tied.gguf")
    info = inspect_model(model)
    assert info.tied_embeddings
    (ep,) = _start_rpc_workers(engine, procs, 1)
    plan = Plan(4, 3, [(Device("w", "worker", ep, 0, "CPU", GiB, GiB), 2)])  # block 3 + output
    log_path = tmp_path / "llama-server.log"
    with open(log_path, "wb") as log:  # -lv 4: the weights per device, no per-layer lines
        proc = procs.popen([engine.llama_server, "-m", model, *layout_args(*plan.layout()), "-c", "256",
                            "--host", "127.0.0.1", "--port", str(free_port()), "-lv", "4"],
                           stdout=log, stderr=subprocess.STDOUT)
        text = _wait_for_log(proc, log_path, lambda t: "CPU compute buffer size" in t)
    check = check_placement(plan, parse_placement(text), info)
    assert check.ok and not check.per_layer, check.problems
    assert check.actual == {"host": [0, 1, 2], ep: [3, 4]}
    got = float(re.search(rf"RPC0\[{re.escape(ep)}\] model buffer size = +([\d.]+) MiB", text).group(1))
    want = estimate(plan, info, ctx=256)[0].weights_bytes
    assert want == info.slot_bytes[3] + info.slot_bytes[4] and info.slot_bytes[4] > info.token_embd_bytes
    assert got == pytest.approx(want / (1 << 20), abs=0.01)


def test_a_gpu_keeps_llama_cpps_headroom_free_and_a_cpu_device_none(demo_info):
    from gui.cluster.planning.plan import GPU_HEADROOM_BYTES, is_gpu
    # One worker with a GPU and its CPU (``-d Vulkan0,CPU``): two devices, two rows.
    vk, cpu = rpc("a", 1, 0, free=GiB, name="Vulkan0"), rpc("a", 1, 1, free=GiB, name="CPU")
    assert is_gpu(vk) and not is_gpu(cpu) and is_gpu(gpu(0))
    plan = Plan(8, 0, [(vk, 4), (cpu, 5)])
    f_vk, f_cpu, host = estimate(plan, demo_info, ctx=512)
    assert f_vk.headroom_bytes == GPU_HEADROOM_BYTES and f_cpu.headroom_bytes == 0
    # 1 GiB free is plenty for the CPU's share, but the GPU must also keep 1 GiB free.
    assert f_cpu.fits and not f_vk.fits
    assert f_vk.short_by_bytes == f_vk.need_bytes + GPU_HEADROOM_BYTES - GiB
    assert "keeps 1024 MiB free" in f_vk.describe()
    roomy = rpc("a", 1, 0, free=GiB + f_vk.need_bytes + GPU_HEADROOM_BYTES, name="Vulkan0")
    assert estimate(Plan(8, 0, [(roomy, 4), (cpu, 5)]), demo_info, ctx=512)[0].fits
    # A GPU that holds nothing needs nothing.
    assert estimate(Plan(8, 0, [(vk, 0), (cpu, 9)]), demo_info, ctx=512)[0].fits


def test_a_device_of_windowed_blocks_needs_the_same_compute_buffer_at_any_context(demo_info):
    """Sliding-window attention: a device copies in only the masks its blocks read, so one that
    holds windowed blocks alone needs no more at 32768 tokens than at 4096, and one that holds
    the global block grows with the context (by its f16 mask, one micro-batch wide)."""
    from dataclasses import replace as dc_replace

    swa = dc_replace(demo_info, sliding_window=128, swa_layers=tuple(i != 5 for i in range(demo_info.n_layer)))
    devs = [rpc("a", 1), rpc("b", 2)]
    plan = Plan(8, 2, [(devs[0], 3), (devs[1], 4)])  # a: blocks 2-4 (windowed), b: 5-7 and the output
    short, long = estimate(plan, swa, ctx=4096), estimate(plan, swa, ctx=32768)
    assert short[0].compute_bytes == long[0].compute_bytes
    assert long[1].compute_bytes - short[1].compute_bytes >= (32768 - 4096) * 512 * 2 * 0.9
    # a dense model's device grows with the context wherever it is
    dense_short, dense_long = estimate(plan, demo_info, ctx=4096), estimate(plan, demo_info, ctx=32768)
    assert dense_long[0].compute_bytes > dense_short[0].compute_bytes


def test_a_mixture_of_experts_compute_buffer_follows_its_routed_experts(demo_info):
    """A mixture of experts' feed-forward intermediates are as wide as the experts each token
    is routed to, not the dense width the file may also state."""
    from dataclasses import replace as dc_replace

    moe = dc_replace(demo_info, expert_count=8, expert_used_count=2, expert_feed_forward_length=64,
                     expert_slot_bytes=demo_info.slot_bytes)
    plan = Plan(8, 2, [(rpc("a", 1), 7)])
    base = estimate(plan, moe, ctx=4096)[0].compute_bytes
    wider_dense = dc_replace(moe, feed_forward_length=moe.feed_forward_length * 8)
    assert estimate(plan, wider_dense, ctx=4096)[0].compute_bytes == base
    more_routed = dc_replace(moe, expert_used_count=4)
    assert estimate(plan, more_routed, ctx=4096)[0].compute_bytes > base
