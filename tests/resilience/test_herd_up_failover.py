"""``herd up`` carries on when a worker is lost: two real agents on loopback, ``herd up`` serving,
agent ``beta`` killed with -9. herd up must print which node was lost and why, relaunch on
``alpha`` at the same endpoint and say so; a chat then completes; Ctrl-C stops everything."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import httpx
import pytest
from cluster.agents import start_agent
from conftest import free_port
from e2e.herd_cli import HERD, HerdUp, gone, herd

from gui.cluster.chat.client import chat

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def _serving(procs, tmp_path, model, split: str, ctx: int, *more: str) -> tuple[HerdUp, object, int]:
    """Agents alpha and beta paired, and ``herd up`` serving ``model`` split over them (failover
    on, a one-second countdown; ``more`` herd up options): ``(herd up, beta, port)``."""
    env = dict(os.environ, HERD_CONFIG_DIR=str(tmp_path / "config"), LLAMA_CACHE=str(tmp_path / "cache"))
    alpha = start_agent(procs.popen, tmp_path, "alpha", mdns=False)
    beta = start_agent(procs.popen, tmp_path, "beta", mdns=False)
    for agent in (alpha, beta):
        r = herd(["pair", agent.api_url.removeprefix("https://"), "--pin", agent.pin()], env)
        assert r.returncode == 0, r.stderr
    port = free_port()
    up = HerdUp(procs.popen(HERD + ["up", model, "--no-mdns", "--split", split, "--ctx", str(ctx),
                                    "--port", str(port), "--threads", "1", "--countdown", "1",
                                    "--server-args", "-np 1", *more],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    up.wait_for("Serving", 180)
    return up, beta, port


async def test_herd_up_relaunches_on_the_survivor(engine, demo_model, procs, tmp_path):
    up, beta, port = _serving(procs, tmp_path, demo_model, "alpha=4,beta=5", 512)
    first = up.server_pids()
    beta.proc.kill()
    beta.proc.wait(timeout=10)
    up.wait_for("failover: beta (127.0.0.1) was lost: its agent does not answer", 10)
    up.wait_for("failover: relaunching on alpha in 1 s", 15)
    up.wait_for(f"failover: serving again at http://127.0.0.1:{port} on alpha", 60)
    assert gone(first), "the old llama-server is still running"
    async with httpx.AsyncClient() as client:
        done = await chat(client, f"http://127.0.0.1:{port}", [{"role": "user", "content": "Still there?"}],
                          max_tokens=8)
    assert done.timings["predicted_n"] == 8
    servers = up.server_pids()
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=30) == 0, "\n".join(up.lines)
    assert gone(servers)


async def test_a_conversation_with_real_weights_goes_on_after_a_failover(engine, smollm2, procs, tmp_path):
    """Real weights (SmolLM2-135M-Instruct) split over two agents: the answer is the same words
    before a worker is lost and, with the conversation so far, after herd up relaunched on the
    survivor — the meaning survives the move, not only the endpoint."""
    up, beta, port = _serving(procs, tmp_path, smollm2, "alpha=15,beta=16", 1024)
    url = f"http://127.0.0.1:{port}"
    system = {"role": "system", "content": "You are a helpful assistant."}
    question = {"role": "user", "content": "What is the capital of France?"}
    async with httpx.AsyncClient() as client:
        first = await chat(client, url, [system, question], max_tokens=24, temperature=0, seed=1)
    assert "Paris" in first.text, first.text
    beta.proc.kill()
    beta.proc.wait(timeout=10)
    up.wait_for(f"failover: serving again at {url} on alpha", 120)
    conversation = [system, question, {"role": "assistant", "content": first.text},
                    {"role": "user", "content": "Which city did you name? Answer with the city only."}]
    async with httpx.AsyncClient() as client:
        again = await chat(client, url, conversation, max_tokens=24, temperature=0, seed=1)
    assert "Paris" in again.text, again.text
    servers = up.server_pids()
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=30) == 0, "\n".join(up.lines)
    assert gone(servers)


async def test_a_stream_through_the_front_door_goes_on_after_a_lost_worker(engine, smollm2, procs, tmp_path):
    """``herd up --lan`` (its front door on loopback here, ``--host 127.0.0.1``) serving SmolLM2
    over two agents; a client streams a reply, beta is killed mid-reply: the client's stream
    pauses while herd up relaunches on alpha and goes on with the rest of the reply — one reply,
    the same id, no error (#34)."""
    up, beta, port = _serving(procs, tmp_path, smollm2, "alpha=15,beta=16", 1024, "--lan", "--host", "127.0.0.1")
    body = {"model": "any", "messages": [{"role": "user", "content": "Count from 1 to 50, separated by commas."}],
            "max_tokens": 120, "temperature": 0, "stream": True}
    events, partial = [], None
    async with httpx.AsyncClient(timeout=180) as client:
        async with client.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                if line.startswith("data: {"):
                    events.append(json.loads(line[6:]))
                    texts = [e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices")]
                    if partial is None and sum(1 for t in texts if t) == 8:
                        partial = "".join(texts)
                        beta.proc.kill()  # the worker is lost mid-reply
    up.wait_for("failover: serving again", 5)  # (it did: the reply went on)
    assert not any("error" in e for e in events), events[-1]
    assert {e["id"] for e in events} == {events[0]["id"]}
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    assert partial and text.startswith(partial) and len(text) > len(partial)
    assert not text[len(partial):].lstrip().startswith(partial.strip()[:6])
    servers = up.server_pids()
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=30) == 0, "\n".join(up.lines)
    assert gone(servers)
