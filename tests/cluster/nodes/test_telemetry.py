"""Telemetry against a real llama-server (split over a real RPC worker) while a real chat
streams: samples keep arriving, and the decode rate derived from the /metrics counters agrees
with the reply's own timings."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from cluster.agents import start_agent
from cluster.rpc_workers import start_rpc_workers
from conftest import free_port
from hypothesis import given
from hypothesis import strategies as st

from agent.client import AgentClient, measure_echo_rtt
from agent.identity import load_or_create
from gui.cluster.chat.client import ChatDelta, ChatDone, ChatError, chat, stream_chat
from gui.cluster.llama.server_command import ServerOptions, ServerSpec
from gui.cluster.llama.server_start import serving
from gui.cluster.nodes import telemetry as T


def test_parse_prometheus_ignores_comments_and_labels():
    text = ("# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.\n"
            "# TYPE llamacpp:tokens_predicted_total counter\n"
            "llamacpp:tokens_predicted_total 40\n"
            'other{slot="1"} 2.5\n'
            "broken line-without-value\n")
    assert T.parse_prometheus(text) == {"llamacpp:tokens_predicted_total": 40.0, "other": 2.5}
    with pytest.raises(ValueError, match="llamacpp:prompt_tokens_total"):
        T.MetricsCounters.from_text(text)


def test_counter_rates_none_when_idle_or_server_restarted():
    a = T.MetricsCounters(10, 0.1, 100, 0.2)
    b = T.MetricsCounters(30, 0.2, 300, 0.6)
    r = T.counter_rates(a, b)
    assert r["decode_tps"] == pytest.approx(500.0) and r["prompt_tps"] == pytest.approx(200.0)
    assert T.counter_rates(b, b)["decode_tps"] is None
    assert T.counter_rates(b, a)["decode_tps"] is None  # counters went back: a restart


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=50), st.floats(0, 100))
def test_percentile_is_within_range_and_monotonic(xs, q):
    p = T.percentile(xs, q)
    assert min(xs) <= p <= max(xs)
    assert T.percentile(xs, 0) == min(xs) and T.percentile(xs, 100) == max(xs)
    assert T.percentile(xs, min(100.0, q + 5)) >= p


async def test_dead_source_gives_error_samples_not_exceptions():
    tele = T.Telemetry()
    async with httpx.AsyncClient() as client:
        url = f"http://127.0.0.1:{free_port()}"
        tele.add(T.ServerSampler(client, url, interval=0.05))
        tele.add(T.MetricsSampler(client, url, interval=0.05))
        got: list[T.Sample] = []
        tele.subscribe(got.append)
        tele.start()
        deadline = time.monotonic() + 10
        while len({s.kind for s in got}) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await tele.stop()
    states = [s.values.get("state") for s in got if s.kind == "server"]
    assert states and set(states) == {"down"}
    assert any("cannot reach" in s.values.get("error", "") for s in got if s.kind == "metrics")


async def test_interval_change_takes_effect_at_once():
    class Count(T.Sampler):
        kind = "count"

        async def sample(self):
            return {}

    tele = T.Telemetry()
    s = tele.add(Count("x", interval=30.0))
    tele.start()
    try:
        stream = tele.stream()
        first = await asyncio.wait_for(anext(stream), 5)
        tele.set_interval("count", 0.05)  # without the wake-up the next sample would take 30 s
        second = await asyncio.wait_for(anext(stream), 5)
        assert second.time > first.time and s.interval == 0.05
        await stream.aclose()
    finally:
        await tele.stop()


@pytest.fixture
async def split_server(engine, demo_model, procs):
    """A real llama-server with 5 of 9 slots on a real RPC worker; yields its URL."""
    workers = start_rpc_workers(engine, procs, 1)
    spec = ServerSpec(model=demo_model, rpc=workers, ngl=5, tensor_split=[5], options=ServerOptions(ctx=4096, port=free_port(), extra_args=["-np", "1"]))
    async with serving(engine.llama_server, spec, timeout=120) as srv:
        yield srv.url


# Long enough (about a second of decode here) that one late step on a busy machine, which the
# counters and the reply's timings may see differently, stays well inside the 3 % budget.
REPLY_TOKENS = 3000
# A prompt of several hundred tokens, as real chats have, so that the prompt counters move
# measurably.
LONG_PROMPT = "Tell a long story about " + " ".join(f"w{i}" for i in range(200))


@pytest.mark.engine
async def test_samples_arrive_while_streaming_and_decode_rate_matches_timings(split_server):
    url = split_server
    async with httpx.AsyncClient() as client:
        tele = T.Telemetry()
        tele.add(T.MetricsSampler(client, url, interval=0.05))
        tele.add(T.ServerSampler(client, url, interval=0.05))
        samples: list[T.Sample] = []
        tele.subscribe(samples.append)
        before = await T.read_counters(client, url)
        tele.start()
        deltas: list[float] = []
        done: ChatDone | None = None
        try:
            async for ev in stream_chat(client, url, [{"role": "user", "content": LONG_PROMPT}],
                                        max_tokens=REPLY_TOKENS, temperature=0):
                if isinstance(ev, ChatDelta):
                    deltas.append(time.time())
                else:
                    done = ev
            after = await T.read_counters(client, url)
            # Wait for the metrics sampler to see the finished request too.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not any(
                    s.kind == "metrics" and s.values.get("decode_tokens") for s in samples):
                await asyncio.sleep(0.02)
        finally:
            await tele.stop()
    assert done is not None and done.timings["predicted_n"] == REPLY_TOKENS and done.finish_reason == "length"
    reply_tps = done.predicted_per_second
    # Samples arrived while the reply was streaming, and the server sampler saw it busy.
    during = [s for s in samples if deltas[0] <= s.time <= deltas[-1]]
    assert len(during) >= 3, f"only {len(during)} samples during a {deltas[-1] - deltas[0]:.2f} s reply"
    assert any(s.kind == "server" and s.values.get("busy_slots") == 1 for s in during)
    # The counters' delta over exactly this request.
    exact = T.counter_rates(before, after)
    assert exact["decode_tokens"] == REPLY_TOKENS
    assert exact["decode_tps"] == pytest.approx(reply_tps, rel=0.03)
    # And the sampler's own figure for the interval in which the request ended.
    ended = [s for s in samples if s.kind == "metrics" and s.values.get("decode_tokens")]
    assert len(ended) == 1 and ended[0].values["decode_tokens"] == REPLY_TOKENS
    assert ended[0].values["decode_tps"] == pytest.approx(reply_tps, rel=0.03)
    # The prompt counters move when the prompt is processed, before the reply ends.
    prompted = [s for s in samples if s.kind == "metrics" and s.values.get("prompt_tokens")]
    assert len(prompted) == 1 and prompted[0].values["prompt_tokens"] == done.timings["prompt_n"]
    # The slot's prompt clock starts when the task starts, the counters' when the first prompt
    # batch is queued: preparing the prompt is in one and not the other (about a millisecond
    # for this prompt), so the times are compared, not the rates of a prompt this quick.
    counter_prompt_s = prompted[0].values["prompt_tokens"] / prompted[0].values["prompt_tps"]
    assert counter_prompt_s <= done.timings["prompt_ms"] / 1000 + 0.001
    assert done.timings["prompt_ms"] / 1000 - counter_prompt_s < 0.010
    # The reply's own figures go into the same stream.
    reply = tele.record_reply(url, done.timings)
    assert samples[-1] is reply and reply.kind == "reply"
    assert reply.values["predicted_per_second"] == reply_tps and reply.values["predicted_n"] == REPLY_TOKENS


@pytest.mark.engine
async def test_chat_reports_server_errors(split_server):
    async with httpx.AsyncClient() as client:
        done = await chat(client, split_server, [{"role": "user", "content": "hi"}], max_tokens=8)
        assert done.timings["predicted_n"] == 8 and len(done.text) > 0
        with pytest.raises(ChatError, match=r"did not accept the request \(HTTP 400"):
            await chat(client, split_server, [{"role": "user", "content": "hi"}], max_tokens=8,
                       n_probs="not a number")


async def test_link_and_node_samplers_against_a_real_agent(procs, tmp_path):
    agent = start_agent(procs.popen, tmp_path, "echoer", mdns=False)
    me = load_or_create(tmp_path / "master", "master", "test master")
    async with AgentClient(agent.api_url, identity=me) as client:
        await client.pair(agent.pin())
        tele = T.Telemetry()
        tele.add(T.LinkSampler(agent.node_id,
                               lambda n: measure_echo_rtt("127.0.0.1", agent.echo_port, n, timeout=0.5),
                               interval=0.2, probes=10))
        tele.add(T.NodeStatusSampler(agent.node_id, client.status, interval=0.2))
        got: list[T.Sample] = []
        tele.subscribe(got.append)
        tele.start()

        async def until(pred, timeout=10):
            deadline = time.monotonic() + timeout
            while not pred() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            return pred()

        try:
            assert await until(lambda: sum(s.kind == "link" for s in got) >= 2
                               and sum(s.kind == "node" for s in got) >= 2)
            link = [s for s in got if s.kind == "link"][-1].values
            assert link["lost"] == 0 and link["probes"] == 10
            assert 0 < link["rtt_min_ms"] <= link["rtt_median_ms"] <= link["rtt_p95_ms"]
            # Loopback round trips are far below a millisecond; the figures keep that resolution.
            assert link["rtt_min_ms"] < 1.0
            node = [s for s in got if s.kind == "node"][-1]
            assert node.source == agent.node_id
            assert node.values["ram_free_bytes"] > 0 and node.values["rpc_state"] == "stopped"
            assert isinstance(node.values["cpu_percent"], float)
            # The node goes away: its samplers report the loss instead of dying.
            agent.proc.kill()
            agent.proc.wait(timeout=5)
            n = len(got)
            assert await until(lambda: any(s.kind == "link" and "error" in s.values for s in got[n:])
                               and any(s.kind == "node" and "error" in s.values for s in got[n:]))
        finally:
            await tele.stop()
