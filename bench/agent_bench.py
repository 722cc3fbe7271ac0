"""Benchmark of herd-agent: what it costs at idle, and what its RPC relay costs in decode speed.

    python bench/agent_bench.py [--model PATH] [--idle-seconds 20] [--pairs 30] [--tokens 12]

1. Idle: a real ``herd-agent`` (mDNS on loopback, its RPC worker started and idle) is watched for
   ``--idle-seconds``: resident memory of the agent process and its CPU use in % of one core.
2. Relay round trip: 2000 small RPC requests (GET_DEVICE_MEMORY) straight to the agent's worker
   and through its relay, reached as herd reaches it: through a forwarder
   (:class:`gui.cluster.nodes.tunnel.Forwarder`, running in this process as in herd's) and mutual
   TLS; the difference is what the link adds per round trip.
3. Decode speed: a demo model large enough that decode takes ≥ 20 ms/token sits entirely on an
   RPC worker. Two workers run side by side, set up alike (``-t``, ``-c``): the agent's, reached
   through the forwarder and its relay, and a plain ``ggml-rpc-server`` reached directly; a ``llama-server`` is
   loaded against each. Then ``--pairs`` pairs of ``--tokens``-token completions go to both,
   alternating which goes first, so load from the rest of the machine hits both sides of a pair
   alike; the median of the per-pair speed ratios is the relay's cost. Decode speed is
   ``timings.predicted_per_second``.

Targets (issue #3): ≤ 40 MB RSS, ≤ 0.5 % of a core idle, relay ≥ 0.97× direct decode speed.
Everything runs on loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.client import AgentClient  # noqa: E402
from agent.engine_lookup import find_engine  # noqa: E402
from agent.identity import load_or_create  # noqa: E402
from bench.smoke import parse_args  # noqa: E402
from gui.cluster.nodes.tunnel import Forwarder  # noqa: E402

READY = re.compile(r"herd-agent ready api=(\S+) rpc=(\d+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_model(path: Path, layers: int = 32) -> Path:
    """A 32-layer, ~830 MB f16 demo model: decode on one core takes well over 20 ms/token even
    on a quiet machine (16 layers measured 17 ms/token here). ``layers``: fewer for a smoke run."""
    from gui.cluster.llama.random_model import DemoShape, write_demo_model  # bench only; agent/ stays gui-free

    if not path.exists():
        print(f"writing demo model {path} …", file=sys.stderr)
        write_demo_model(path, DemoShape(layers=layers, embd=1024, ff=2816, vocab=8192))
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


def agent_pin(state_dir: Path) -> str:
    """The PIN the agent shows (``herd-agent pin``, as a person reads it on the worker)."""
    out = subprocess.run([sys.executable, "-m", "agent.main", "--config", str(state_dir / "agent.toml"),
                          "--state-dir", str(state_dir), "pin"],
                         capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise SystemExit(f"herd-agent pin failed: {out.stderr.strip()}")
    return out.stdout.strip()


async def pair_and_start(api: str, state_dir: Path, threads: int) -> tuple[AgentClient, dict]:
    me = load_or_create(state_dir / "master", "master", "bench master")
    client = AgentClient(api, timeout=30, identity=me)
    await client.pair(agent_pin(state_dir), "bench")
    await client.rpc_start(threads=threads)
    deadline = time.monotonic() + 30
    while (st := await client.status_json())["rpc"]["state"] != "ready":
        if time.monotonic() > deadline:
            raise SystemExit(f"worker not ready: {st['rpc']}")
        await asyncio.sleep(0.1)
    return client, st


class LoopThread:
    """An asyncio loop in a thread of this process, as herd's bridge runs one: the agent client
    and the forwarder live there while the measurements here block."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro, timeout: float = 120):
        """Run ``coro`` on the loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


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


class LlamaServer:
    """One llama-server holding every layer of ``model`` on the RPC worker at ``rpc``."""

    def __init__(self, llama_server: Path, model: Path, rpc: str) -> None:
        self.rpc = rpc
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [str(llama_server), "--rpc", rpc, "--fit", "off", "-ngl", "99", "-m", str(model), "-c", "512",
             "--host", "127.0.0.1", "--port", str(port), "-t", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)

    def wait_ready(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"llama-server exited ({self.proc.returncode}) against {self.rpc}")
            try:
                if httpx.get(self.base + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"llama-server did not load the model in {timeout:.0f} s")
            time.sleep(0.2)

    def generate(self, tokens: int) -> tuple[float, float]:
        """(decode tok/s, ms/token) of one ``tokens``-token completion."""
        body = {"messages": [{"role": "user", "content": "tell me a story"}], "max_tokens": tokens}
        t = httpx.post(self.base + "/v1/chat/completions", json=body, timeout=600).json()["timings"]
        return t["predicted_per_second"], t["predicted_ms"] / max(t["predicted_n"], 1)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_direct_worker(rpc_server: Path, threads: int, cache_dir: Path) -> tuple[subprocess.Popen, int]:
    """A plain ggml-rpc-server on loopback, run as the agent runs its own (``-t``, ``-c``)."""
    port = free_port()
    proc = subprocess.Popen([str(rpc_server), "-H", "127.0.0.1", "-p", str(port), "-t", str(threads), "-c"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            env={**os.environ, "LLAMA_CACHE": str(cache_dir)})
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("ggml-rpc-server did not start")
            time.sleep(0.05)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, help="default: a demo model of --layers layers in the temp folder")
    ap.add_argument("--layers", type=int, default=32, help="layers of the demo model written when --model is not given")
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument("--pairs", type=int, default=30, help="paired relay/direct completions")
    ap.add_argument("--tokens", type=int, default=12,
                    help="tokens per completion (short ones keep the two halves of a pair close in time)")
    ap.add_argument("--threads", type=int, default=1,
                    help="RPC worker CPU threads (1 keeps the noise down on a busy 2-core machine)")
    args = parse_args(ap, {"layers": 2, "idle_seconds": 1.0, "pairs": 2, "tokens": 4})

    engine = find_engine()
    llama_server = engine.require_llama_server()
    model = make_model(args.model or Path(tempfile.gettempdir()) / f"herd-bench-{args.layers}L-1024E.gguf",
                       args.layers)
    with tempfile.TemporaryDirectory(prefix="herd-agent-bench-") as tmp_s:
        tmp = Path(tmp_s)
        proc, api = start_agent(tmp)
        client = forwarder = None
        loop = LoopThread()
        try:
            client, st = loop.run(pair_and_start(api, tmp, args.threads))
            worker_port = st["rpc"]["worker_port"]
            # llama-server reaches the agent's TLS relay through a forwarder in this process, as
            # herd's does; the forwarder admits only this process and those it starts (#25).
            forwarder = loop.run(Forwarder("127.0.0.1", st["rpc"]["port"], client.identity, client.pinned).start())
            relay_port = int(forwarder.endpoint.rpartition(":")[2])
            rss, cpu, pss = measure_idle(proc.pid, args.idle_seconds)
            rtt_direct = rpc_round_trip(worker_port, 2000)
            rtt_relay = rpc_round_trip(relay_port, 2000)
            # Both paths loaded at once (two workers, two llama-servers), then paired requests
            # close in time, alternating which goes first: load from the rest of the machine
            # then hits both sides of each pair alike.
            worker, direct_port = start_direct_worker(engine.require_rpc_server(), args.threads, tmp / "cache")
            servers = []
            try:
                for rpc in (f"127.0.0.1:{direct_port}", f"127.0.0.1:{relay_port}"):
                    servers.append(LlamaServer(llama_server, model, rpc))
                    servers[-1].wait_ready()
                    servers[-1].generate(4)  # warm-up
                direct_srv, relay_srv = servers
                direct, relay, ratios = [], [], []
                for i in range(args.pairs):
                    order = [(direct_srv, direct), (relay_srv, relay)]
                    for srv, bucket in (order if i % 2 == 0 else order[::-1]):
                        bucket.append(srv.generate(args.tokens))
                    ratios.append(relay[-1][0] / direct[-1][0])
                    print(f"pair {i + 1:2d}: direct {direct[-1][0]:6.2f} tok/s  relay {relay[-1][0]:6.2f} tok/s"
                          f"  ratio {ratios[-1]:.3f}", file=sys.stderr)
            finally:
                for srv in servers:
                    srv.close()
                worker.terminate()
                worker.wait(timeout=10)
        finally:
            if forwarder is not None:
                loop.run(forwarder.close())
            if client is not None:
                loop.run(client.aclose())
            loop.close()
            proc.terminate()
            proc.wait(timeout=10)
    report(args, model, (rss, cpu, pss), (rtt_direct, rtt_relay), direct, relay, ratios)
    return 0


def report(args, model: Path, idle: tuple, rtts: tuple[float, float], direct: list, relay: list,
           ratios: list[float]) -> None:
    """Print the table: ``idle`` (RSS MB, CPU %, PSS MB), ``rtts`` (direct, relay) in seconds,
    ``direct``/``relay`` (tok/s, ms/token) per completion, ``ratios`` relay ÷ direct per pair."""
    rss, cpu, pss = idle
    rtt_direct, rtt_relay = rtts
    d_tps, r_tps = statistics.median(x for x, _ in direct), statistics.median(x for x, _ in relay)
    d_ms, r_ms = statistics.median(m for _, m in direct), statistics.median(m for _, m in relay)
    ratio = statistics.median(ratios)
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    extra_us = (rtt_relay - rtt_direct) * 1e6
    # Per token the master makes one GET_TENSOR round trip per RPC device (docs/llama-cpp.md), so the
    # relay's cost per token is about one extra relay hop.
    est = d_ms / (d_ms + extra_us / 1000)
    rows = [
        ("agent idle RSS", f"{rss:.1f} MB", "<= 40 MB", rss <= 40),
        # RSS counts shared library pages (libpython, libcrypto) in full; PSS splits them
        ("agent idle PSS", f"{pss:.1f} MB" if pss is not None else "n/a", "", None),
        (f"agent idle CPU ({args.idle_seconds:.0f} s)", f"{cpu:.3f} % of a core", "<= 0.5 %", cpu <= 0.5),
        ("RPC round trip direct", f"{rtt_direct * 1e6:.0f} us (median of 2000)", "", None),
        ("RPC round trip via relay", f"{rtt_relay * 1e6:.0f} us (+{extra_us:.0f} us)", "", None),
        ("decode direct (median)", f"{d_tps:.2f} tok/s ({d_ms:.1f} ms/tok)", ">= 20 ms/tok", d_ms >= 20),
        ("decode via relay (median)", f"{r_tps:.2f} tok/s ({r_ms:.1f} ms/tok)", "", None),
        ("relay / direct (paired runs)", f"{ratio:.3f}x (median of {len(ratios)})", ">= 0.97x", ratio >= 0.97),
        ("  spread of the pair ratios", f"{q1:.3f}x .. {q3:.3f}x (quartiles)", "", None),
        ("relay / direct (from RTT)", f"{est:.4f}x at {d_ms:.0f} ms/tok", ">= 0.97x", est >= 0.97),
    ]
    print(f"\nherd-agent benchmark — model {model.name} ({model.stat().st_size / 2**20:.0f} MiB), "
          f"{args.pairs} pairs x {args.tokens} tokens, workers -t {args.threads}")
    print(f"load average during the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'measure':32s} {'value':36s} {'target':14s} ok")
    print("-" * 88)
    for name, value, target, ok in rows:
        mark = "" if ok is None else ("yes" if ok else "NO")
        print(f"{name:32s} {value:36s} {target:14s} {mark}")


if __name__ == "__main__":
    sys.exit(main())
