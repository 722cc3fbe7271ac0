"""One llama-server against real RPC workers on loopback: its states, the placement read back
from its log, failures explained in words, a clean stop."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import socket
import sys
import time

import httpx
import psutil
import pytest
from cluster.rpc_workers import start_rpc_workers
from conftest import free_port

from gui.cluster.chat.client import chat
from gui.cluster.launching.placement import check_placement
from gui.cluster.llama import server_process as L
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.server_command import ServerOptions, ServerSpec
from gui.cluster.llama.server_process import _DEBUG_RE
from gui.cluster.llama.server_start import serving
from gui.cluster.planning.plan import Device, Plan

pytestmark = pytest.mark.engine
GiB = 1 << 30


def two_worker_plan(workers: list[str], host: int, counts: list[int]) -> Plan:
    devs = [Device(f"w{i}", f"worker{i}", ep, 0, "CPU", GiB, GiB) for i, ep in enumerate(workers)]
    return Plan(8, host, list(zip(devs, counts)))

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


async def test_default_launch_checks_each_devices_weights(engine, demo_model, procs):
    workers = start_rpc_workers(engine, procs, 2)
    info = inspect_model(demo_model)
    plan = two_worker_plan(workers, 1, [3, 5])
    spec = ServerSpec.for_plan(plan, demo_model, ServerOptions(ctx=512, port=free_port()))
    async with serving(engine.llama_server, spec, timeout=120) as srv:
        placement = srv.placement()
        assert placement.slots == {}  # no per-layer lines at the default level
        check = check_placement(plan, placement, info)
        assert check.ok and not check.per_layer, check.problems
        assert check.actual == {"host": [0], workers[0]: [1, 2, 3], workers[1]: [4, 5, 6, 7, 8]}
        assert check.report[1].startswith(f"{workers[0]} (RPC0) holds slots 1-3 as planned")
        assert check.report[2].startswith(f"{workers[1]} (RPC1) holds slots 4-8 as planned")
        # The same run against plans it does not run (-ts 3,5 launched, 4,4 or 2,6 compared).
        for counts, wrong in (([4, 4], "slots 1-4"), ([2, 6], "slots 1-2")):
            off = check_placement(two_worker_plan(workers, 1, counts), placement, info)
            assert not off.ok
            assert any(p.startswith(f"{workers[0]} (RPC0) holds slots 1-3") and wrong in p
                       for p in off.problems), off.problems
        fewer = check_placement(two_worker_plan(workers, 2, [2, 5]), placement, info)
        assert any("offloaded 8 of 9 slots" in p for p in fewer.problems)
        # Decoding prints no debug line at all at this level.
        async with httpx.AsyncClient() as client:
            done = await chat(client, spec.url, [{"role": "user", "content": "hi"}], max_tokens=16)
        assert done.timings["predicted_n"] == 16
        assert not any(_DEBUG_RE.match(ln) for ln in srv.startup_log + list(srv.log))


async def test_plan_launched_with_another_split_fails_the_check(engine, demo_model, procs):
    # What a wrong -ts on the command line looks like: launch -ts 2,6 for a plan of 3,5.
    workers = start_rpc_workers(engine, procs, 2)
    info = inspect_model(demo_model)
    plan = two_worker_plan(workers, 1, [3, 5])
    spec = ServerSpec.for_plan(plan, demo_model, ServerOptions(ctx=512, port=free_port()))
    spec = dataclasses.replace(spec, tensor_split=(2, 6))
    async with serving(engine.llama_server, spec, timeout=120) as srv:
        check = check_placement(plan, srv.placement(), info)
    assert not check.ok
    assert check.actual == {"host": [0], workers[0]: [1, 2], workers[1]: [3, 4, 5, 6, 7, 8]}
    assert any(p.startswith(f"{workers[0]} (RPC0) holds slots 1-2 (0.77 MiB of weights), the plan "
                            "gave it slots 1-3 (1.15 MiB)") for p in check.problems), check.problems


async def test_launch_two_workers_placement_matches_and_stop_leaves_nothing(engine, demo_model, procs):
    workers = start_rpc_workers(engine, procs, 2)
    # Per-layer lines on request (-lv 5), and the kept log without their per-token debug lines.
    spec = ServerSpec(model=demo_model, rpc=workers, ngl=7, tensor_split=[2, 5], verbosity=5, options=ServerOptions(ctx=512, port=free_port()))
    srv = L.ServerProcess(engine.llama_server, spec)
    seen: list[str] = []
    srv.on_state(lambda s, e: seen.append(s))
    await srv.start()
    try:
        await srv.wait_ready(120)
        assert srv.listening_url == spec.url
        check = check_placement(two_worker_plan(workers, 2, [2, 5]), srv.placement(),
                                inspect_model(demo_model))
        assert check.ok and check.per_layer, check.problems
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
        assert not any(_DEBUG_RE.match(ln) for ln in after)
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
        srv = L.ServerProcess(engine.llama_server, ServerSpec(model=demo_model, options=ServerOptions(ctx=256, port=port)))
        await srv.start()
        with pytest.raises(L.LaunchError, match=f"port {port} is already in use"):
            await srv.wait_ready(60)
        await srv.stop()
    assert srv.state == L.FAILED and srv.returncode not in (None, 0)


async def test_unreachable_worker_is_explained(engine, demo_model):
    dead = f"127.0.0.1:{free_port()}"
    srv = L.ServerProcess(engine.llama_server,
                          ServerSpec(model=demo_model, rpc=[dead], ngl=9, options=ServerOptions(ctx=256, port=free_port())))
    await srv.start()
    with pytest.raises(L.LaunchError, match=f"RPC worker at {dead} is unreachable"):
        await srv.wait_ready(60)
    await srv.stop()
    assert srv.state == L.FAILED


async def test_corrupt_model_is_explained(engine, tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    srv = L.ServerProcess(engine.llama_server, ServerSpec(model=bad, options=ServerOptions(ctx=256, port=free_port())))
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
    srv = L.ServerProcess(stuck, ServerSpec(model=tmp_path / "m.gguf", options=ServerOptions(port=free_port())))
    await srv.start()
    deadline = time.monotonic() + 10
    while "ignoring TERM" not in srv.log and time.monotonic() < deadline:  # the trap is set
        await asyncio.sleep(0.02)
    t0 = time.monotonic()
    await srv.stop(grace=0.5)
    assert srv.returncode == -9 and srv.state == L.STOPPED
    assert 0.5 <= time.monotonic() - t0 < 5


def test_the_log_follower_hands_on_each_line_once_while_the_bounded_log_rolls_over(tmp_path):
    """The app's log view follows llama-server's kept log, which drops old lines once full: each
    line reaches the view once, in order, and a relaunched server's lines start afresh."""
    spec = ServerSpec(model=str(tmp_path / "m.gguf"), options=ServerOptions(port=free_port()))
    first = L.ServerProcess("llama-server", spec, log_lines=3)  # (never started: its log is filled here)
    follower = L.LogFollower()
    seen: list[str] = []
    for i in range(10):
        first.log.append(f"line {i}")
        if i % 4 == 3:  # the view asks now and then, after the log has rolled over
            seen += follower.new_lines(first)
    seen += follower.new_lines(first)
    assert follower.new_lines(first) == []
    # Lines that fell out of the log between two calls are gone; none is handed on twice.
    assert seen == ["line 1", "line 2", "line 3", "line 5", "line 6", "line 7", "line 8", "line 9"]
    second = L.ServerProcess("llama-server", spec, log_lines=3)
    second.log.extend(["new 0", "new 1"])
    assert follower.new_lines(second) == ["new 0", "new 1"]
    assert follower.new_lines(None) == []


def test_a_loop_that_shuts_down_ends_the_server_and_leaves_nothing_open(engine, demo_model, monkeypatch):
    """The app quits while llama-server runs: its loop cancels every task, as ``asyncio.run``
    does, and closes. The server ends with it, and nothing of it is left for the collector to
    close later on the closed loop (that printed "Event loop is closed" at exit)."""
    left_for_the_collector: list = []
    monkeypatch.setattr(sys, "unraisablehook", left_for_the_collector.append)
    loop = asyncio.new_event_loop()
    try:
        srv = L.ServerProcess(engine.llama_server, ServerSpec(
            model=demo_model, options=ServerOptions(ctx=512, port=free_port())))
        loop.run_until_complete(srv.start())
        loop.run_until_complete(srv.wait_ready(120))
        server = psutil.Process(srv.pid)
        tasks = asyncio.all_tasks(loop)
        assert tasks  # the supervision runs
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    finally:
        loop.close()
    assert not server.is_running()
    del srv, tasks
    gc.collect()
    assert [u.exc_value for u in left_for_the_collector] == []
