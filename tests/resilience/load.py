"""Load on a real herd-agent and on a real cluster: an open-loop request generator for the
agent's API, and concurrent chat streams. Shared by ``tests/resilience/test_load.py`` (bounded)
and ``bench/agent_load.py`` (the full run, printed as a table)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from cluster.agents import pair_all, start_agent
from conftest import free_port

from gui.cluster.chat.client import ChatDone, chat
from gui.cluster.launching.launcher import ClusterLauncher
from gui.cluster.launching.request import LaunchRequest
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.nodes.discovery import Discovery
from gui.cluster.nodes.records import TokenStore
from gui.cluster.planning import plan as P

# What a master's app does all day: liveness pings, status for the dashboard, the worker log.
MIX = (("GET", "/api/v1/ping", False), ("GET", "/api/v1/status", True),
       ("GET", "/api/v1/info", False), ("GET", "/api/v1/rpc/log?tail=20", True))
# A key each answer of the mix carries: a 200 with some other JSON is not an answer.
ANSWER_KEY = {"/api/v1/ping": "id", "/api/v1/status": "id", "/api/v1/info": "id",
              "/api/v1/rpc/log?tail=20": "lines"}


@dataclass
class LoadResult:
    """Outcome of :func:`load_agent`.

    Attributes:
        sent: requests sent.
        errors: {description: count} of failed requests (network errors, non-200 answers).
        latencies: seconds per successful request, from its scheduled start (so a stalled
            server shows up as latency rather than a lower rate).
        answered: {path: count} of successful requests (200 with a JSON body that carries the
            path's :data:`ANSWER_KEY`).
        elapsed: seconds the run took.
    """

    sent: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    answered: dict[str, int] = field(default_factory=dict)
    elapsed: float = 0.0

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def percentile(self, q: float) -> float:
        """The ``q`` quantile (0..1) of the latencies, in seconds."""
        xs = sorted(self.latencies)
        if not xs:
            return float("nan")
        return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


async def load_agent(base_url: str, tls, rate: float, seconds: float,
                     timeout: float = 5.0) -> LoadResult:
    """Send ``rate`` requests/s for ``seconds`` (open loop: request *k* starts at ``k/rate``
    whatever happened to the earlier ones), cycling through :data:`MIX`.

    The generator uses aiohttp's client: at a few hundred requests/s a heavier client's own CPU
    time would be measured instead of the agent's.
    """
    import aiohttp

    result = LoadResult()
    total = int(rate * seconds)
    # ``tls``: the paired master's keys (an ssl context, mutual TLS): every call carries them
    connector = aiohttp.TCPConnector(limit=64, ssl=tls)
    async with aiohttp.ClientSession(base_url, connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        async def one(k: int, due: float) -> None:
            method, path, _auth = MIX[k % len(MIX)]
            try:
                async with session.request(method, path) as r:
                    body = await r.read()
                    if r.status != 200:
                        key = f"HTTP {r.status} {path}"
                        result.errors[key] = result.errors.get(key, 0) + 1
                        return
                doc = json.loads(body)
                if not isinstance(doc, dict) or ANSWER_KEY[path] not in doc:
                    raise ValueError(f"an answer without {ANSWER_KEY[path]!r}")
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
                key = f"{type(exc).__name__} {path}"
                result.errors[key] = result.errors.get(key, 0) + 1
                return
            result.latencies.append(time.perf_counter() - due)
            result.answered[path] = result.answered.get(path, 0) + 1

        start = time.perf_counter()
        tasks = []
        for k in range(total):
            due = start + k / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(one(k, due)))
            result.sent += 1
        await asyncio.gather(*tasks)
        result.elapsed = time.perf_counter() - start
    return result


async def chat_streams(base_url: str, n: int, max_tokens: int) -> list[ChatDone]:
    """``n`` streamed chat completions at once; returns each one's final message."""
    async with httpx.AsyncClient(timeout=300) as client:
        return await asyncio.gather(*(
            chat(client, base_url, [{"role": "user", "content": f"Stream number {i}, go."}],
                 max_tokens=max_tokens, seed=i)
            for i in range(n)))


@contextlib.asynccontextmanager
async def loopback_cluster(llama_server, model: Path, popen, tmp: Path, *, parallel: int, ctx: int,
                           threads: int | None = None) -> AsyncIterator[ClusterLauncher]:
    """Two real agents ``a`` and ``b`` on loopback, paired, and a llama-server over them (split
    a=4, b=5, ``-np parallel``); yields the started launcher and stops everything after."""
    agents = [start_agent(popen, tmp, name, mdns=False) for name in ("a", "b")]
    disc = Discovery(browse=False, tokens=TokenStore(tmp / "tokens.json"))
    launcher = None
    try:
        nodes, devices = await pair_all(disc, agents)
        plan = P.plan_from_split(inspect_model(model), devices, {"a": 4, "b": 5})
        extra = ["-np", str(parallel)] + (["--threads", str(threads)] if threads else [])
        request = LaunchRequest(plan, inspect_model(model), ServerOptions(ctx=ctx, port=free_port(), extra_args=extra),
                                threads=threads)
        launcher = ClusterLauncher(llama_server, request, nodes, disc.client)
        check = await launcher.start(120)
        if not check.ok:
            raise AssertionError(f"placement not as planned: {check.problems}")
        yield launcher
    finally:
        if launcher is not None:
            await launcher.stop()
        await disc.stop()
