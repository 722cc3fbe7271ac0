"""Benchmark of herd-agent: what it costs at idle, and what its RPC relay costs in decode speed.

    python bench/agent_bench.py [--model PATH] [--idle-seconds 20] [--runs 3] [--tokens 48]

1. Idle: a real ``herd-agent`` (mDNS on loopback, its RPC worker started and idle) is watched for
   ``--idle-seconds``: resident memory of the agent process and its CPU use in % of one core.
2. Relay cost: one ``ggml-rpc-server`` (started by that agent, behind its relay) holds every layer
   of a demo model large enough that decode takes ≥ 20 ms/token. ``llama-server --rpc`` runs
   against the relay port and against the worker's own loopback port in turn (same worker, same
   weights cache), ``--runs`` times each, alternating so drift hits both; decode speed is
   ``timings.predicted_per_second`` of a ``--tokens``-token completion. The median of each is
   compared.

Targets (issue #3): ≤ 40 MB RSS, ≤ 0.5 % of a core idle, relay ≥ 0.97× direct decode speed.
Everything runs on loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.client import AgentClient  # noqa: E402
from agent.engine import find_engine  # noqa: E402

READY = re.compile(r"herd-agent ready api=(\S+) rpc=(\d+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_model(path: Path) -> Path:
    """A 16-layer, ~400 MB f16 demo model: decode on 2 cores takes well over 20 ms/token."""
    from gui.cluster.demo_model import DemoShape, write_demo_model  # bench only; agent/ stays gui-free

    if not path.exists():
        print(f"writing demo model {path} …", file=sys.stderr)
        write_demo_model(path, DemoShape(layers=16, embd=1024, ff=2816, vocab=8192))
    return path


def start_agent(tmp: Path) -> tuple[subprocess.Popen, str]:
    argv = [sys.executable, "-m", "agent.main", "--config", str(tmp / "agent.toml"), "--state-dir", str(tmp),
            "--name", "bench", "--bind", "127.0.0.1", "--api-port", str(free_port()),
            "--rpc-port", str(free_port()), "--echo-port", str(free_port()),
            "--mdns-interfaces", "127.0.0.1", "run"]
    env = {**os.environ, "LLAMA_CACHE": str(tmp / "cache")}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            text=True, env=env)
    for line in proc.stdout:
        m = READY.search(line)
        if m:
            return proc, m.group(1)
    raise SystemExit("herd-agent did not start")


async def pair_and_start(api: str, state_dir: Path, threads: int) -> tuple[AgentClient, dict]:
    pin = json.loads((state_dir / "agent-state.json").read_text())["pin"]
    client = AgentClient(api, timeout=30)
    await client.pair(pin, "bench")
    await client.rpc_start(threads=threads)
    deadline = time.monotonic() + 30
    while (st := await client.status())["rpc"]["state"] != "ready":
        if time.monotonic() > deadline:
            raise SystemExit(f"worker not ready: {st['rpc']}")
        await asyncio.sleep(0.1)
    return client, st


def measure_idle(pid: int, seconds: float) -> tuple[float, float, float | None]:
    """(RSS MB at the end, CPU % of one core over ``seconds``, PSS MB where the OS tells it)."""
    p = psutil.Process(pid)
    t0, c0 = time.monotonic(), sum(p.cpu_times()[:2])
    time.sleep(seconds)
    t1, c1 = time.monotonic(), sum(p.cpu_times()[:2])
    try:
        pss = p.memory_full_info().pss / 2**20
    except (AttributeError, psutil.Error):
        pss = None
    return p.memory_info().rss / 2**20, 100.0 * (c1 - c0) / (t1 - t0), pss


def rpc_round_trip(port: int, count: int) -> float:
    """Median seconds of one small RPC request/reply (GET_DEVICE_MEMORY) on one connection."""
    import struct

    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def call(cmd: int, payload: bytes) -> bytes:
            s.sendall(struct.pack("<BQ", cmd, len(payload)) + payload)
            size = struct.unpack("<Q", recv_exact(s, 8))[0]
            return recv_exact(s, size)

        call(14, bytes(24))  # HELLO
        times = []
        for _ in range(count):
            t = time.perf_counter()
            call(11, struct.pack("<I", 0))
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("worker closed the connection")
        buf += chunk
    return buf


def decode_speed(llama_server: Path, model: Path, rpc: str, tokens: int) -> tuple[float, float]:
    """Start llama-server against ``rpc``, generate ``tokens`` tokens; (tok/s, ms/token)."""
    port = free_port()
    srv = subprocess.Popen([str(llama_server), "--rpc", rpc, "--fit", "off", "-ngl", "99", "-m", str(model),
                            "-c", "512", "--host", "127.0.0.1", "--port", str(port), "-t", "1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        while True:
            if srv.poll() is not None:
                raise SystemExit(f"llama-server exited ({srv.returncode}) against {rpc}")
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("llama-server did not load the model in 300 s")
            time.sleep(0.2)
        body = {"messages": [{"role": "user", "content": "tell me a story"}], "max_tokens": tokens}
        httpx.post(base + "/v1/chat/completions", json={**body, "max_tokens": 4}, timeout=300)  # warm-up
        r = httpx.post(base + "/v1/chat/completions", json=body, timeout=600).json()
        t = r["timings"]
        return t["predicted_per_second"], t["predicted_ms"] / max(t["predicted_n"], 1)
    finally:
        srv.terminate()
        try:
            srv.wait(timeout=20)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=Path(tempfile.gettempdir()) / "herd-bench-16L-1024E.gguf")
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2, help="RPC worker CPU threads")
    args = ap.parse_args()

    engine = find_engine()
    llama_server = engine.require_llama_server()
    model = make_model(args.model)
    with tempfile.TemporaryDirectory(prefix="herd-agent-bench-") as tmp_s:
        tmp = Path(tmp_s)
        proc, api = start_agent(tmp)
        client = None
        try:
            loop = asyncio.new_event_loop()
            client, st = loop.run_until_complete(pair_and_start(api, tmp, args.threads))
            relay_port, worker_port = st["rpc"]["port"], st["rpc"]["worker_port"]
            rss, cpu, pss = measure_idle(proc.pid, args.idle_seconds)
            rtt_direct = rpc_round_trip(worker_port, 2000)
            rtt_relay = rpc_round_trip(relay_port, 2000)
            direct, relay = [], []
            for run in range(args.runs):
                for label, port, bucket in (("direct", worker_port, direct), ("relay", relay_port, relay)):
                    tps, ms = decode_speed(llama_server, model, f"127.0.0.1:{port}", args.tokens)
                    bucket.append((tps, ms))
                    print(f"run {run + 1} {label:6s}: {tps:7.2f} tok/s ({ms:.1f} ms/token)", file=sys.stderr)
        finally:
            if client is not None:
                loop.run_until_complete(client.aclose())
                loop.close()
            proc.terminate()
            proc.wait(timeout=10)

    # The machine may be shared: the best run of each is the least disturbed one.
    d_best, r_best = max(x for x, _ in direct), max(x for x, _ in relay)
    d_med, r_med = statistics.median(x for x, _ in direct), statistics.median(x for x, _ in relay)
    d_ms = min(m for _, m in direct)
    ratio_best, ratio_med = r_best / d_best, r_med / d_med
    extra_us = (rtt_relay - rtt_direct) * 1e6
    # Per token the master makes one GET_TENSOR round trip per RPC device (handbook), so the
    # relay's cost per token is about one extra relay hop.
    est = d_ms / (d_ms + extra_us / 1000)
    rows = [
        ("agent idle RSS", f"{rss:.1f} MB", "<= 40 MB", rss <= 40),
        # RSS counts shared library pages (libpython, libcrypto) in full; PSS splits them
        ("agent idle PSS", f"{pss:.1f} MB" if pss is not None else "n/a", "", None),
        (f"agent idle CPU ({args.idle_seconds:.0f} s)", f"{cpu:.3f} % of a core", "<= 0.5 %", cpu <= 0.5),
        ("RPC round trip direct", f"{rtt_direct * 1e6:.0f} us (median of 2000)", "", None),
        ("RPC round trip via relay", f"{rtt_relay * 1e6:.0f} us (+{extra_us:.0f} us)", "", None),
        ("decode direct, best/median", f"{d_best:.2f} / {d_med:.2f} tok/s", ">= 20 ms/tok", d_ms >= 20),
        ("decode via relay, best/median", f"{r_best:.2f} / {r_med:.2f} tok/s", "", None),
        ("relay / direct (best runs)", f"{ratio_best:.3f}x", ">= 0.97x", ratio_best >= 0.97),
        ("relay / direct (medians)", f"{ratio_med:.3f}x", ">= 0.97x", ratio_med >= 0.97),
        ("relay / direct (from RTT)", f"{est:.4f}x at {d_ms:.0f} ms/tok", ">= 0.97x", est >= 0.97),
    ]
    print(f"\nherd-agent benchmark — model {model.name} ({model.stat().st_size / 2**20:.0f} MiB), "
          f"{args.runs} runs x {args.tokens} tokens each way, worker -t {args.threads}")
    print(f"load average during the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'measure':32s} {'value':36s} {'target':14s} ok")
    print("-" * 88)
    for name, value, target, ok in rows:
        mark = "" if ok is None else ("yes" if ok else "NO")
        print(f"{name:32s} {value:36s} {target:14s} {mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
