"""The one launch path and its one state (#33), without Qt: a real llama-server started,
killed (the failover supervisor relaunches it) and stopped through
:class:`~gui.cluster.cluster_launch.ClusterLaunch`, its listeners told each move; and
the checks' findings read once into typed refusals, for the app's Start and ``herd up``."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time

import pytest
from conftest import free_port

from gui.cluster.failover.supervisor import FailoverPolicy
from gui.cluster.launching import doctor as doc
from gui.cluster.cluster_launch import ClusterLaunch, LaunchRefused
from gui.cluster.launching.preflight_reading import Refusal, read_findings
from gui.cluster.launching.request import LaunchRequest
from gui.cluster.launching.state import (
    FAILED,
    LOADING,
    READY,
    RELAUNCHING,
    STARTING,
    STOPPED,
    STOPPING,
    LaunchState,
)
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.nodes.records import Node
from gui.cluster.planning.plan import Device, Plan

GiB = 1 << 30


def _no_client(node):
    raise AssertionError(f"a plan on this computer alone asks no agent ({node})")


def _host_request(demo_model, **options) -> LaunchRequest:
    """The demo model wholly on this computer (8 layers and the output: 9 slots)."""
    opts = dict(ctx=512, port=free_port(), extra_args=("--threads", "1")) | options
    return LaunchRequest(Plan(8, 9, []), inspect_model(demo_model), ServerOptions(**opts))


async def _until(predicate, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


@pytest.mark.engine
@pytest.mark.slow
async def test_start_loading_ready_relaunching_ready_stopped(engine, demo_model):
    launch = ClusterLaunch()
    moves: list[tuple[LaunchState, str]] = []
    launch.subscribe(lambda state, error: moves.append((state, error)))
    request = _host_request(demo_model)
    assert launch.check(request, [], engine).may_start
    try:
        check = await launch.start(request, [], _no_client, engine.llama_server,
                                   policy=FailoverPolicy(countdown=0), timeout=120)
        assert check.ok and launch.state == READY and launch.is_serving and launch.placement is check
        assert launch.request == request and launch.plan == request.plan
        # (``loading`` is llama-server's /health answering 503: a model this small may skip it)
        assert [s for s, _ in moves] in ([STARTING, LOADING, READY], [STARTING, READY]), moves

        # a second start while one runs is refused, and says why
        with pytest.raises(LaunchRefused, match="already running; stop it first") as refused:
            await launch.start(request, [], _no_client, engine.llama_server)
        assert refused.value.refusal == Refusal.ALREADY_RUNNING and launch.state == READY

        # llama-server dies: the launch says so, the failover supervisor relaunches it
        del moves[:]
        os.kill(launch.supervisor.server.pid, signal.SIGKILL)
        await _until(lambda: moves and moves[-1][0] == READY)
        states = [s for s, _ in moves]
        assert states[0] == FAILED and moves[0][1], moves  # (with llama-server's reason)
        assert states[1] == RELAUNCHING and states[-1] == READY and launch.is_serving, moves
        assert set(states[2:-1]) <= {STARTING, LOADING}, moves
    finally:
        del moves[:]
        await launch.stop()
    assert [s for s, _ in moves] == [STOPPING, STOPPED]
    assert launch.state == STOPPED and not launch.is_running and not launch.is_serving and launch.request is None


@pytest.mark.engine
async def test_a_refused_start_names_why_and_moves_nothing(engine, demo_model):
    launch = ClusterLaunch()
    moves = []
    launch.subscribe(lambda state, error: moves.append(state))
    # a context whose KV cache cannot fit in the memory this computer reports
    huge = _host_request(demo_model, ctx=inspect_model(demo_model).context_length or 4096)
    reading = launch.check(huge, [], engine, host_free_bytes=1 << 20)
    assert reading.refusal() == Refusal.DOES_NOT_FIT and not reading.may_start
    assert reading.misfits and all(f.code == "does-not-fit" and f.message for f in reading.misfits)
    assert launch.state == STOPPED and moves == []

    # the plan's nodes: one does not answer, one is not paired
    dev = Device("id-a", "alpha", "127.0.0.1:50052", 0, "CPU", GiB, 2 * GiB)
    dev_b = Device("id-b", "beta", "127.0.0.1:50053", 0, "CPU", GiB, 2 * GiB)
    nodes = [Node(id="id-a", name="alpha", host="127.0.0.1", api_port=7001, rpc_port=50052, paired=True,
                  reachable=False),
             Node(id="id-b", name="beta", host="127.0.0.1", api_port=7002, rpc_port=50053, paired=False)]
    request = dataclasses.replace(_host_request(demo_model), plan=Plan(8, 0, [(dev, 4), (dev_b, 5)]))
    reading = launch.check(request, nodes, engine, host_free_bytes=GiB)
    assert reading.refusal() == Refusal.NODES_UNANSWERED and reading.unanswered == ("alpha", "beta")
    assert reading.silent_only == ()  # (beta is not paired: starting without alpha would not do)
    reading = launch.check(request, nodes[:1] + [dataclasses.replace(nodes[1], paired=True)], engine,
                           host_free_bytes=GiB)
    assert reading.silent_only == ("alpha",)
    assert launch.state == STOPPED and moves == []


def test_the_findings_are_read_once_into_blocking_warnings_and_one_refusal():
    wifi = doc.Finding(doc.WARNING, "beta", "the link is Wi-Fi", "wifi")
    fine = doc.Finding(doc.OK, "master", "engine found")
    old = doc.Finding(doc.ERROR, "alpha", "runs another llama.cpp build", "version-mismatch")
    misfit = doc.Finding(doc.ERROR, "this PC", "needs 3 GiB, 1 GiB free", "does-not-fit")
    no_engine = doc.Finding(doc.ERROR, "master", "the engine is missing", "engine-missing")
    lost = doc.Finding(doc.ERROR, "gamma", "not reachable", "unreachable")

    reading = read_findings([fine, wifi])
    assert reading.may_start and reading.refusal() is None and reading.warnings == (wifi,)
    assert reading.noteworthy == (wifi,)
    reading = read_findings([wifi, old, fine, lost])
    assert reading.blocking == (old, lost) and reading.noteworthy == (wifi, old, lost)
    assert reading.refusal() == Refusal.NODES_UNANSWERED and reading.silent_only == ()
    assert read_findings([old]).refusal() == Refusal.BLOCKED
    assert read_findings([lost, no_engine]).refusal() == Refusal.ENGINE_MISSING
    assert read_findings([lost, no_engine, misfit]).refusal() == Refusal.DOES_NOT_FIT
    assert read_findings([lost, lost]).silent_only == ("gamma",)
