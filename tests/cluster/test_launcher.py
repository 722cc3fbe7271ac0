"""The launcher against the real llama-server and real RPC workers on loopback: states, the
placement read back from llama-server's log, failures explained in words, a clean stop."""

from __future__ import annotations

import asyncio
import socket
import time

import httpx
import psutil
import pytest
from cluster.rpc_workers import start_rpc_workers
from conftest import free_port

from gui.cluster import launcher as L
from gui.cluster.chat import chat

pytestmark = pytest.mark.engine

# Lines as llama-server build 11434 prints them at -lv 5 (copied from a real run).
REAL_LOG = """\
0.00.011.067 I llama_prepare_model_devices: using device RPC0 (127.0.0.1:50161) (unknown id) - 24105 MiB free
0.00.011.246 I llama_prepare_model_devices: using device RPC1 (127.0.0.1:50162) (unknown id) - 24105 MiB free
0.00.014.005 D load_tensors: layer   0 assigned to device CPU, is_swa = 0
0.00.014.032 D load_tensors: layer   1 assigned to device CPU, is_swa = 0
0.00.014.043 D load_tensors: layer   2 assigned to device RPC0, is_swa = 0
0.00.014.055 D load_tensors: layer   3 assigned to device RPC0, is_swa = 0
0.00.014.066 D load_tensors: layer   4 assigned to device RPC0, is_swa = 0
0.00.014.077 D load_tensors: layer   5 assigned to device RPC1, is_swa = 0
0.00.014.088 D load_tensors: layer   6 assigned to device RPC1, is_swa = 0
0.00.014.099 D load_tensors: layer   7 assigned to device RPC1, is_swa = 0
0.00.014.110 D load_tensors: layer   8 assigned to device RPC1, is_swa = 0
0.00.019.096 I load_tensors: RPC0[127.0.0.1:50162] model buffer size =     1.65 MiB
""".splitlines()


def test_parse_placement_reads_device_order_and_layers():
    p = L.parse_placement(REAL_LOG)
    assert p.devices == [("RPC0", "127.0.0.1:50161"), ("RPC1", "127.0.0.1:50162")]
    assert p.by_endpoint() == {"host": [0, 1], "127.0.0.1:50161": [2, 3, 4],
                               "127.0.0.1:50162": [5, 6, 7, 8]}


def test_compare_placement_names_each_difference():
    p = L.parse_placement(REAL_LOG)
    same = L.compare_placement(L.expected_slots(2, [("127.0.0.1:50161", 3), ("127.0.0.1:50162", 4)]), p)
    assert same.ok and same.problems == []
    off = L.compare_placement(L.expected_slots(1, [("127.0.0.1:50161", 4), ("127.0.0.1:50162", 4)]), p)
    assert not off.ok
    assert any("127.0.0.1:50161 holds layer slots 2-4, the plan gave it 1-4" in s for s in off.problems)
    assert any(s.startswith("host holds layer slots 0-1") for s in off.problems)
    empty = L.compare_placement({"host": [0]}, L.Placement())
    assert not empty.ok and "-lv 5" in empty.problems[0]


def test_expected_slots_multi_device_node_and_zero_counts():
    # A worker exposing two devices appears twice in device order; a zero count takes no slot.
    exp = L.expected_slots(0, [("a:1", 2), ("b:1", 0), ("a:1", 3)])
    assert exp == {"a:1": [0, 1, 2, 3, 4]}


def test_spec_args_use_whole_number_split_and_what_placement_needs(tmp_path):
    spec = L.ServerSpec(model=tmp_path / "m.gguf", rpc=["10.0.0.2:50052", "10.0.0.3:50052"], ngl=7,
                        tensor_split=[3, 4], ctx=1024, port=18000, extra_args=["--threads", "2"])
    a = spec.args()
    assert a[a.index("--rpc") + 1] == "10.0.0.2:50052,10.0.0.3:50052"
    assert a[a.index("--fit") + 1] == "off"
    assert a[a.index("-ngl") + 1] == "7" and a[a.index("-ts") + 1] == "3,4"
    assert "--metrics" in a and a[a.index("-lv") + 1] == "5"
    assert a[-2:] == ["--threads", "2"]


@pytest.mark.parametrize("line, words", [
    # Faults this machine cannot produce (one llama.cpp build, no GPU): the lines ggml prints.
    ("ggml-rpc.cpp:612: RPC server version mismatch: 6.0.0 vs 7.0.0", "different llama.cpp RPC protocol"),
    ("ggml-rpc.cpp:300: Remote RPC server crashed or returned malformed response", "crashed"),
])
def test_explain_failure_rpc_lines(line, words):
    assert words in L.explain_failure(["0.00.001 I other", line], -6)


def test_explain_failure_out_of_memory_line():
    # Running a device out of memory can't be produced on this machine; the line is the real
    # message ggml prints when a backend buffer allocation fails.
    lines = ["E ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 9000000000"]
    assert "ran out of memory" in L.explain_failure(lines, 1)
    assert "signal SIGKILL" in L.explain_failure([], -9)


async def test_launch_two_workers_placement_matches_and_stop_leaves_nothing(engine, demo_model, procs):
    workers = start_rpc_workers(engine, procs, 2)
    spec = L.ServerSpec(model=demo_model, rpc=workers, ngl=7, tensor_split=[2, 5], ctx=512,
                        port=free_port())
    srv = L.ServerProcess(engine.llama_server, spec)
    seen: list[str] = []
    srv.on_state(lambda s, e: seen.append(s))
    await srv.start()
    try:
        await srv.wait_ready(120)
        assert srv.listening_url == spec.url
        check = L.compare_placement(L.expected_slots(2, [(workers[0], 2), (workers[1], 5)]),
                                    srv.placement())
        assert check.ok, check.problems
        assert check.actual[workers[1]] == [4, 5, 6, 7, 8]  # the output slot is on the last device
        # After ready the kept log drops llama-server's per-token debug lines, keeps the rest.
        n_before = len(srv.log)
        async with httpx.AsyncClient() as client:
            done = await chat(client, spec.url, [{"role": "user", "content": "hi"}], max_tokens=64)
        assert done.timings["predicted_n"] == 64
        deadline = time.monotonic() + 5
        while not any("print_timing" in ln for ln in srv.log) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        after = list(srv.log)[n_before:]
        assert any("print_timing" in ln for ln in after)
        assert not any(L._DEBUG_RE.match(ln) for ln in after)
        assert srv.placement().by_endpoint() == check.actual  # still read from the startup log
        pid = srv.pid
    finally:
        await srv.stop()
    assert seen[0] == L.STARTING and L.READY in seen and seen[-1] == L.STOPPED
    assert seen.index(L.STARTING) < seen.index(L.READY) < seen.index(L.STOPPING)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert srv.returncode is not None


async def test_port_in_use_is_explained(engine, demo_model):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        srv = L.ServerProcess(engine.llama_server, L.ServerSpec(model=demo_model, ctx=256, port=port))
        await srv.start()
        with pytest.raises(L.LaunchError, match=f"port {port} is already in use"):
            await srv.wait_ready(60)
        await srv.stop()
    assert srv.state == L.FAILED and srv.returncode not in (None, 0)


async def test_unreachable_worker_is_explained(engine, demo_model):
    dead = f"127.0.0.1:{free_port()}"
    srv = L.ServerProcess(engine.llama_server,
                          L.ServerSpec(model=demo_model, rpc=[dead], ngl=9, ctx=256, port=free_port()))
    await srv.start()
    with pytest.raises(L.LaunchError, match=f"RPC worker at {dead} is unreachable"):
        await srv.wait_ready(60)
    await srv.stop()
    assert srv.state == L.FAILED


async def test_corrupt_model_is_explained(engine, tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    srv = L.ServerProcess(engine.llama_server, L.ServerSpec(model=bad, ctx=256, port=free_port()))
    await srv.start()
    with pytest.raises(L.LaunchError, match="could not load the model"):
        await srv.wait_ready(60)
    await srv.stop()



async def test_stop_kills_a_server_that_ignores_terminate(tmp_path):
    # A llama-server stuck on shutdown can't be produced on demand; a program that ignores
    # SIGTERM stands in for it.
    stuck = tmp_path / "stuck-server"
    stuck.write_text("#!/bin/sh\ntrap '' TERM\necho ignoring TERM\nwhile :; do sleep 0.1; done\n")
    stuck.chmod(0o755)
    srv = L.ServerProcess(stuck, L.ServerSpec(model=tmp_path / "m.gguf", port=free_port()))
    await srv.start()
    deadline = time.monotonic() + 10
    while "ignoring TERM" not in srv.log and time.monotonic() < deadline:  # the trap is set
        await asyncio.sleep(0.02)
    t0 = time.monotonic()
    await srv.stop(grace=0.5)
    assert srv.returncode == -9 and srv.state == L.STOPPED
    assert 0.5 <= time.monotonic() - t0 < 5
