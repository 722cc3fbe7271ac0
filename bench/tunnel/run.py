"""Benchmark: the encrypted RPC link (#13) against the plain relay it replaced, side by side in one run.

    python bench/tunnel/run.py [--rounds 4] [--tokens 64] [--upload-mib 1024]

On loopback, with every relay in a process of its own (as on a real cluster: the agent's
relay on the worker, the forwarder in herd on the master):

* **decode**: one real ``ggml-rpc-server`` holds every layer of a demo model; ``llama-server``
  reaches it either through the plain relay (a TCP splice, what the agent ran before) or
  through the master's forwarder and the agent's TLS relay (mutual TLS 1.3, both keys pinned).
  The two are launched alternately, ``--rounds`` times each, and decode tokens/s is read from
  llama-server's own timings (the best completion of each launch);
* **upload**: ``--upload-mib`` MiB written as fast as possible through each path into a TCP
  sink standing in for the worker, with one core kept busy by a spinning process (the machine
  has two), in Mbit/s;
* **round trip**: the median time of a 64-byte message echoed back through each path (the
  shape of one RPC request and reply), which is what decode speed depends on.

Prints a Markdown table and writes it, with the machine and the raw samples, to results.md and
results.json beside this file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from agent.engine_lookup import find_engine  # noqa: E402
from agent.identity import load_or_create  # noqa: E402
from gui.cluster.llama.random_model import DemoShape, write_demo_model  # noqa: E402

# A relay process: `relay.py MODE LISTEN_PORT TARGET_PORT DIR` (MODE plain | tls-relay | forwarder)
RELAY = r"""
import asyncio, sys
from pathlib import Path
sys.path.insert(0, sys.argv[5])
from agent.identity import load_or_create, server_context, client_context
from agent.relay import RpcRelay
mode, listen, target, folder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
agent = load_or_create(folder, "agent", "bench agent")
master = load_or_create(folder, "master", "bench master")
async def main():
    if mode == "plain":
        relay = RpcRelay("127.0.0.1", listen, is_allowed=lambda ip, fp: True, target=lambda: ("127.0.0.1", target))
    elif mode == "tls-relay":
        relay = RpcRelay("127.0.0.1", listen, is_allowed=lambda ip, fp: fp == master.fingerprint,
                         target=lambda: ("127.0.0.1", target),
                         ssl=server_context(agent, [master.cert_pem], require=True))
    else:
        from gui.cluster.nodes.tunnel import Forwarder
        relay = Forwarder("127.0.0.1", target, master, agent.cert_pem.decode())._relay
        relay.port = listen
    await relay.start()
    print("ready", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""

SINK = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
print("ready", flush=True)
buf = bytearray(1 << 20)
while True:
    c, _ = s.accept()
    want = int.from_bytes(c.recv(8, socket.MSG_WAITALL), "little")  # no half-close: TLS has none
    n = 0
    while n < want:
        k = c.recv_into(buf)
        if not k:
            break
        n += k
    c.sendall(str(n).encode()); c.close()
"""


#: Demo models (every layer on the one worker): ``small`` decodes fast, so the link's latency
#: weighs the most; ``medium`` is nearer a real small model (≈ 0.3 B weights).
SHAPES = {
    "small": DemoShape(layers=8, embd=512, ff=1536, vocab=8192),
    "medium": DemoShape(layers=16, embd=1024, ff=4096, vocab=32000),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Procs:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, argv, wait_ready: bool = True, **kw) -> subprocess.Popen:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             stdin=subprocess.DEVNULL, **kw)
        self.procs.append(p)
        if wait_ready:
            line = p.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"{argv[:3]} did not start: {line!r}")
        return p

    def relay(self, mode: str, listen: int, target: int, folder: Path) -> subprocess.Popen:
        return self.start([sys.executable, "-c", RELAY, mode, str(listen), str(target), str(folder), str(REPO)])

    def close(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


async def decode_once(engine, model: Path, rpc_port: int, tokens: int, runs: int) -> float:
    port = free_port()
    srv = subprocess.Popen([str(engine.require_llama_server()), "--rpc", f"127.0.0.1:{rpc_port}",
                            "--fit", "off", "-ngl", "99", "-m", str(model), "-c", "512", "-t", "1",
                            "--host", "127.0.0.1", "--port", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as h:
            deadline = time.monotonic() + 120
            while True:
                if srv.poll() is not None:
                    raise RuntimeError("llama-server exited")
                try:
                    if (await h.get("/health")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("llama-server not healthy in 120 s")
                await asyncio.sleep(0.2)
            best = 0.0
            for _ in range(runs):
                r = await h.post("/completion", json={"prompt": "Once upon a time", "n_predict": tokens,
                                                      "temperature": 0, "cache_prompt": False,
                                                      "ignore_eos": True})
                r.raise_for_status()
                best = max(best, float(r.json()["timings"]["predicted_per_second"]))
            return best
    finally:
        srv.terminate()
        srv.wait(30)


def upload_once(port: int, mib: int) -> float:
    chunk = os.urandom(1 << 20)
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        s.sendall((mib << 20).to_bytes(8, "little"))
        for _ in range(mib):
            s.sendall(chunk)
        got = int(s.recv(64).decode() or 0)
        elapsed = time.perf_counter() - start
    if got != mib << 20:
        raise RuntimeError(f"the sink received {got} bytes, not {mib << 20}")
    return (mib << 20) * 8 / elapsed / 1e6


ECHO = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(4)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while (d := c.recv(65536)):
        c.sendall(d)
"""


def rtt_once(port: int, n: int = 2000) -> float:
    """Median round trip of a 64-byte message, in microseconds (one RPC request/reply's shape)."""
    msg = os.urandom(64)
    rtts = []
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(n):
            t = time.perf_counter()
            s.sendall(msg)
            got = 0
            while got < 64:
                got += len(s.recv(64 - got))
            rtts.append(time.perf_counter() - t)
    return statistics.median(rtts) * 1e6


def machine() -> str:
    model = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}"


async def main_async(args) -> int:
    engine = find_engine(probe=True)
    work = Path(tempfile.mkdtemp(prefix="herd-tunnel-bench-"))
    models = {name: write_demo_model(work / f"{name}.gguf", shape) for name, shape in SHAPES.items()
              if name in args.shapes}
    load_or_create(work, "agent", "bench agent")
    load_or_create(work, "master", "bench master")
    procs = Procs()
    samples: dict[str, list[float]] = {"plain_up": [], "tunnel_up": []}
    try:
        worker = free_port()
        procs.start([str(engine.require_rpc_server()), "-H", "127.0.0.1", "-p", str(worker), "-t", "1"],
                    wait_ready=False, env={**os.environ, "LLAMA_CACHE": str(work / "cache")})
        wait_port(worker)
        plain, tls, fwd = free_port(), free_port(), free_port()
        procs.relay("plain", plain, worker, work)
        procs.relay("tls-relay", tls, worker, work)
        procs.relay("forwarder", fwd, tls, work)
        for name, model in models.items():
            for _ in range(args.rounds):  # alternate, so drift in the machine's load hits both
                samples.setdefault(f"{name}_plain", []).append(
                    await decode_once(engine, model, plain, args.tokens, args.runs))
                samples.setdefault(f"{name}_tunnel", []).append(
                    await decode_once(engine, model, fwd, args.tokens, args.runs))
        procs.close()
        procs = Procs()
        sink = free_port()
        procs.start([sys.executable, "-c", SINK, str(sink)])
        plain, tls, fwd = free_port(), free_port(), free_port()
        procs.relay("plain", plain, sink, work)
        procs.relay("tls-relay", tls, sink, work)
        procs.relay("forwarder", fwd, tls, work)
        burner = procs.start([sys.executable, "-c", "while True: pass"], wait_ready=False)
        for _ in range(args.rounds):
            samples["plain_up"].append(upload_once(plain, args.upload_mib))
            samples["tunnel_up"].append(upload_once(fwd, args.upload_mib))
        burner.kill()
        procs.close()
        procs = Procs()
        echo = free_port()
        procs.start([sys.executable, "-c", ECHO, str(echo)])
        plain, tls, fwd = free_port(), free_port(), free_port()
        procs.relay("plain", plain, echo, work)
        procs.relay("tls-relay", tls, echo, work)
        procs.relay("forwarder", fwd, tls, work)
        for _ in range(args.rounds):
            samples.setdefault("direct_rtt", []).append(rtt_once(echo))
            samples.setdefault("plain_rtt", []).append(rtt_once(plain))
            samples.setdefault("tunnel_rtt", []).append(rtt_once(fwd))
    finally:
        procs.close()

    med = {k: statistics.median(v) for k, v in samples.items()}
    rows = []
    for name in models:
        p_, t_ = med[f"{name}_plain"], med[f"{name}_tunnel"]
        rows += [(f"decode ({name} model), plain relay (before #13)", f"{p_:.1f} tok/s", "1.00"),
                 (f"decode ({name} model), tunnel (forwarder + TLS relay)", f"{t_:.1f} tok/s", f"{t_ / p_:.3f}")]
    rows += [
        ("upload, plain relay, one core busy", f"{med['plain_up']:.0f} Mbit/s", "1.00"),
        ("upload, tunnel, one core busy", f"{med['tunnel_up']:.0f} Mbit/s", f"{med['tunnel_up'] / med['plain_up']:.3f}"),
    ]
    rows += [
        ("64-byte round trip, direct (no relay)", f"{med['direct_rtt']:.0f} µs", ""),
        ("64-byte round trip, plain relay", f"{med['plain_rtt']:.0f} µs", "1.00"),
        ("64-byte round trip, tunnel", f"{med['tunnel_rtt']:.0f} µs", f"{med['tunnel_rtt'] / med['plain_rtt']:.2f}"),
    ]
    table = ["| path | median | vs plain |", "|---|---|---|"] + [f"| {a} | {b} | {c} |" for a, b, c in rows]
    meta = {"machine": machine(), "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "rounds": args.rounds, "tokens": args.tokens, "runs": args.runs, "upload_mib": args.upload_mib,
            "models": {n: str(SHAPES[n]) for n in models},
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    text = "\n".join([f"Run of {meta['when']} on {meta['machine']}; `{meta['command']}`.", "", *table, ""])
    print(text)
    (HERE / "results.md").write_text(text)
    (HERE / "results.json").write_text(json.dumps({"meta": meta, "samples": samples}, indent=2))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=4, help="launches per path (alternating)")
    p.add_argument("--tokens", type=int, default=64, help="tokens per completion")
    p.add_argument("--runs", type=int, default=3, help="completions per launch (the best counts)")
    p.add_argument("--upload-mib", type=int, default=1024, help="MiB per upload sample")
    p.add_argument("--shapes", default="small,medium", type=lambda t: t.split(","),
                   help=f"demo models to decode with (of {', '.join(SHAPES)})")
    return asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
