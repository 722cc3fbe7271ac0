"""Start-up progress by the byte, from a real load: two real agents, their real RPC workers
behind the relays that count the bytes, and the real llama-server sending the weights."""

from __future__ import annotations

import os

import pytest
from cluster.agents import pair_all, start_agent
from conftest import free_port

from agent.rpc_stream import HASH_THRESHOLD
from gui.cluster.launching import transfer as T
from gui.cluster.launching.launcher import ClusterLauncher
from gui.cluster.launching.request import LaunchRequest
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.random_model import DemoShape, write_demo_model
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.nodes import tunnel
from gui.cluster.nodes.discovery import Discovery
from gui.cluster.nodes.records import TokenStore
from gui.cluster.planning import plan as P

pytestmark = [pytest.mark.engine, pytest.mark.slow]
MiB = 1 << 20


def _reported_mib(placement, endpoint: str) -> float:
    """MiB of weights llama-server says it put on the worker at ``endpoint``."""
    return sum(mib for name, mib in placement.buffers.items() if f"[{endpoint}]" in name)


async def _load(engine, model, nodes, plan, disc, events):
    request = LaunchRequest(plan, inspect_model(model), ServerOptions(ctx=512, port=free_port()))
    launcher = ClusterLauncher(engine.llama_server, request, nodes, disc.client)
    launcher.on_transfer = events.append
    await launcher.start(120)
    placement = tunnel.unmap(launcher.server.placement(), launcher.forwarders)  # the workers' endpoints
    await launcher.stop()
    return placement


async def test_progress_events_follow_the_weights_to_the_slice_size(engine, procs, tmp_path, monkeypatch):
    monkeypatch.setattr(T, "POLL_INTERVAL", 0.05)  # several polls while loopback carries it
    # Wide layers (Q8_0 blocks of ≈ 3 MiB per tensor, an 8192×1536 output of 12 MiB: above
    # llama.cpp's 10 MiB cache threshold) so that the load lasts several polls.
    model = write_demo_model(tmp_path / "m.gguf", DemoShape(layers=8, embd=1536, ff=4096, vocab=8192,
                                                           quant="Q8_0"))
    env = dict(os.environ, LLAMA_CACHE=str(tmp_path / "rpc-cache"))  # an empty cache of its own
    agents = [start_agent(lambda argv, **kw: procs.popen(argv, env=env, **kw), tmp_path, name, mdns=False)
              for name in ("a", "b")]
    disc = Discovery(browse=False, tokens=TokenStore(tmp_path / "tokens.json"))
    try:
        nodes, devices = await pair_all(disc, agents)
        info = inspect_model(model)
        plan = P.plan_from_split(info, devices, {"a": 4, "b": 5})
        slices = T.slice_bytes(plan, info)
        events: list[T.TransferEvent] = []
        placement = await _load(engine, model, nodes, plan, disc, events)
        assert len(events) >= 3, events
        for ep, total in slices.items():
            seen = [w.received_bytes for ev in events for w in ev.workers if w.endpoint == ep]
            assert seen == sorted(seen), f"{ep}: bytes went backwards: {seen}"
            last = seen[-1]
            # against the plan's slice and against what llama-server reports for the slice
            assert abs(last / total - 1) <= 0.02, (ep, last, total)
            assert abs(last / MiB / _reported_mib(placement, ep) - 1) <= 0.02, (ep, last, placement.buffers)
        assert events[-1].done and events[-1].stall is None
        # some event showed a worker partly filled: progress moved during the load
        assert any(0 < w.fraction < 1 for ev in events for w in ev.workers), events
        first = events[-1].workers
        assert not any(w.cached_bytes for w in first)  # an empty cache supplied nothing

        # A second load of the same slices: the workers' -c caches supply the tensors over
        # 10 MiB, and progress says so while still counting every byte of the slice.
        big = sum(t.nbytes for t in info.tensors if t.nbytes > HASH_THRESHOLD and t.slot >= 0)
        events2: list[T.TransferEvent] = []
        await _load(engine, model, nodes, plan, disc, events2)
        end = events2[-1]
        assert end.done
        cached = sum(w.cached_bytes for w in end.workers)
        assert cached >= big > 0, (cached, big)
        for w in end.workers:
            assert abs(w.received_bytes / w.slice_bytes - 1) <= 0.02
    finally:
        await disc.stop()


def test_a_load_that_stops_is_named_with_the_node_receiving():
    clock = [100.0]
    tr = T.TransferTracker({"10.0.0.2:1": 1000, "10.0.0.3:1": 1000}, {"10.0.0.2:1": "a", "10.0.0.3:1": "b"},
                           clock=lambda: clock[0])

    def t(got, idle, age=1.0):
        return {"session": 1, "session_age_s": age, "idle_s": idle, "bytes_received": got,
                "tensor_bytes": got, "cached_bytes": 0, "hash_hits": 0, "hash_misses": 0}

    clock[0] += 2
    ev = tr.update({"10.0.0.2:1": t(1000, 0.5), "10.0.0.3:1": t(200, 0.1)})
    assert ev.stall is None and ev.workers[0].done and not ev.done
    clock[0] += 1
    ev = tr.update({"10.0.0.2:1": t(1000, 1.5), "10.0.0.3:1": t(400, 0.1)})
    assert ev.workers[1].rate_bps == pytest.approx(200.0) and ev.workers[1].eta_s == pytest.approx(3.0)
    clock[0] += 12
    ev = tr.update({"10.0.0.2:1": t(1000, 13.5), "10.0.0.3:1": t(400, 12.1)})
    assert ev.stall == "no bytes from b for 12 s" and ev.stalled_node == "b"
    # a load that was already over before the tracker was made does not count
    old = T.TransferTracker({"10.0.0.2:1": 1000}, {}, clock=lambda: clock[0])
    assert old.update({"10.0.0.2:1": t(1000, 50.0, age=60.0)}).workers[0].received_bytes == 0
