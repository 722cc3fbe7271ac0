"""Benchmark: the encrypted RPC link (#13) against the plain relay it replaced, side by side in one run.

    python bench/tunnel/run.py [--rounds 4] [--tokens 64] [--upload-mib 1024] [--smoke]

On loopback, laid out as on a real cluster: each of the agent's relays in a process of its own
(the worker's), the master's forwarder (:class:`gui.cluster.nodes.tunnel.Forwarder`) in this
process, as herd runs it, and every client of a path — llama-server, the upload and the round
trip — a process this one started, as herd starts llama-server. The forwarder admits only
connections from its own process tree (#25): one in a process of its own refused llama-server.

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
results.json beside this file (``--smoke``: into a temporary folder).
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
from bench.smoke import parse_args, results_folder  # noqa: E402
from gui.cluster.llama.random_model import DemoShape, write_demo_model  # noqa: E402
from gui.cluster.nodes.tunnel import Forwarder  # noqa: E402

# An agent's relay process: `relay.py MODE LISTEN_PORT TARGET_PORT DIR` (MODE plain | tls-relay)
RELAY = r"""
import asyncio, sys
from pathlib import Path
sys.path.insert(0, sys.argv[5])
from agent.identity import load_or_create, server_context
from agent.relay import RpcRelay
mode, listen, target, folder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
agent = load_or_create(folder, "agent", "bench agent")
master = load_or_create(folder, "master", "bench master")
async def main():
    if mode == "plain":
        relay = RpcRelay("127.0.0.1", listen, is_allowed=lambda ip, fp: True, target=lambda: ("127.0.0.1", target))
    else:
        relay = RpcRelay("127.0.0.1", listen, is_allowed=lambda ip, fp: fp == master.fingerprint,
                         target=lambda: ("127.0.0.1", target),
                         ssl=server_context(agent, [master.cert_pem], require=True))
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
    log = model.with_suffix(".llama-server.log")
    with log.open("wb") as out:
        srv = subprocess.Popen([str(engine.require_llama_server()), "--rpc", f"127.0.0.1:{rpc_port}",
                                "--fit", "off", "-ngl", "99", "-m", str(model), "-c", "512", "-t", "1",
                                "--host", "127.0.0.1", "--port", str(port)],
                               stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as h:
            deadline = time.monotonic() + 120
            while True:
                if srv.poll() is not None:
                    last = log.read_text(errors="replace").strip().splitlines()[-3:]
                    raise RuntimeError("llama-server exited: " + " / ".join(last))
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
        # Waited for off the loop: a stopping llama-server still talks to the worker through
        # this process's forwarder, which must keep running meanwhile.
        await asyncio.to_thread(srv.wait, 30)


# A client of one path, in a process of its own (as llama-server is, to herd's forwarder):
# `client.py upload PORT MIB` prints the Mbit/s of MIB MiB written into a sink; `client.py rtt
# PORT N` the median round trip, in µs, of N 64-byte messages echoed back (one RPC request and
# reply's shape).
CLIENT = r"""
import os, socket, statistics, sys, time
mode, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with socket.create_connection(("127.0.0.1", port)) as s:
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if mode == "upload":
        chunk = os.urandom(1 << 20)
        start = time.perf_counter()
        s.sendall((n << 20).to_bytes(8, "little"))
        for _ in range(n):
            s.sendall(chunk)
        got = int(s.recv(64).decode() or 0)
        elapsed = time.perf_counter() - start
        if got != n << 20:
            sys.exit(f"the sink received {got} bytes, not {n << 20}")
        print((n << 20) * 8 / elapsed / 1e6)
    else:
        msg = os.urandom(64)
        rtts = []
        for _ in range(n):
            t = time.perf_counter()
            s.sendall(msg)
            got = 0
            while got < 64:
                k = len(s.recv(64 - got))
                if not k:
                    sys.exit("the echo closed the connection")
                got += k
            rtts.append(time.perf_counter() - t)
        print(statistics.median(rtts) * 1e6)
"""


async def client(mode: str, port: int, n: int) -> float:
    """Run :data:`CLIENT` against ``port`` (``mode`` upload: ``n`` MiB, in Mbit/s; rtt: ``n``
    messages, median µs). Awaited, so this process's forwarder keeps serving meanwhile."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", CLIENT, mode, str(port), str(n),
                                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"the {mode} client on port {port} failed: {err.decode().strip()[-500:]}")
    return float(out)


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


class Paths:
    """The two paths to one target port on this machine: the plain relay, and the tunnel — this
    process's :class:`Forwarder` (as herd's) → mutual TLS → the agent's TLS relay; each relay of
    the agent in a process of its own."""

    def __init__(self, procs: Procs, work: Path) -> None:
        self.procs, self.work = procs, work
        self.master = load_or_create(work, "master", "bench master")
        self.agent_cert = load_or_create(work, "agent", "bench agent").cert_pem.decode()
        self.forwarders: list[Forwarder] = []

    async def open(self, target: int) -> tuple[int, int]:
        """(plain relay's port, forwarder's port), both leading to ``target``."""
        plain, tls = free_port(), free_port()
        self.procs.relay("plain", plain, target, self.work)
        self.procs.relay("tls-relay", tls, target, self.work)
        forwarder = await Forwarder("127.0.0.1", tls, self.master, self.agent_cert).start()
        self.forwarders.append(forwarder)
        return plain, int(forwarder.endpoint.rpartition(":")[2])

    async def close(self) -> None:
        for f in self.forwarders:
            await f.close()
        self.forwarders.clear()
        self.procs.close()


async def measure_decode(engine, paths: Paths, work: Path, models: dict[str, Path], args, samples) -> None:
    worker = free_port()
    paths.procs.start([str(engine.require_rpc_server()), "-H", "127.0.0.1", "-p", str(worker), "-t", "1"],
                      wait_ready=False, env={**os.environ, "LLAMA_CACHE": str(work / "cache")})
    wait_port(worker)
    plain, tunnel = await paths.open(worker)
    for name, model in models.items():
        for _ in range(args.rounds):  # alternate, so drift in the machine's load hits both
            samples.setdefault(f"{name}_plain", []).append(
                await decode_once(engine, model, plain, args.tokens, args.runs))
            samples.setdefault(f"{name}_tunnel", []).append(
                await decode_once(engine, model, tunnel, args.tokens, args.runs))


async def measure_upload(paths: Paths, args, samples) -> None:
    sink = free_port()
    paths.procs.start([sys.executable, "-c", SINK, str(sink)])
    plain, tunnel = await paths.open(sink)
    burner = paths.procs.start([sys.executable, "-c", "while True: pass"], wait_ready=False)
    for _ in range(args.rounds):
        samples.setdefault("plain_up", []).append(await client("upload", plain, args.upload_mib))
        samples.setdefault("tunnel_up", []).append(await client("upload", tunnel, args.upload_mib))
    burner.kill()


async def measure_round_trip(paths: Paths, args, samples) -> None:
    echo = free_port()
    paths.procs.start([sys.executable, "-c", ECHO, str(echo)])
    plain, tunnel = await paths.open(echo)
    for _ in range(args.rounds):
        for label, port in (("direct", echo), ("plain", plain), ("tunnel", tunnel)):
            samples.setdefault(f"{label}_rtt", []).append(await client("rtt", port, args.messages))


async def main_async(args) -> int:
    engine = find_engine(probe=True)
    work = Path(tempfile.mkdtemp(prefix="herd-tunnel-bench-"))
    models = {name: write_demo_model(work / f"{name}.gguf", shape) for name, shape in SHAPES.items()
              if name in args.shapes}
    samples: dict[str, list[float]] = {}
    for step in (lambda paths: measure_decode(engine, paths, work, models, args, samples),
                 lambda paths: measure_upload(paths, args, samples),
                 lambda paths: measure_round_trip(paths, args, samples)):
        paths = Paths(Procs(), work)
        try:
            await step(paths)
        finally:
            await paths.close()
    report(args, models, samples)
    return 0


def report(args, models: dict[str, Path], samples: dict[str, list[float]]) -> None:
    """Print the table; write it and the raw samples to results.md/.json (smoke: a temporary folder)."""
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
            "messages": args.messages,
            "models": {n: str(SHAPES[n]) for n in models},
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    text = "\n".join([f"Run of {meta['when']} on {meta['machine']}; `{meta['command']}`.", "", *table, ""])
    print(text)
    out = results_folder(args.smoke, HERE)
    (out / "results.md").write_text(text)
    (out / "results.json").write_text(json.dumps({"meta": meta, "samples": samples}, indent=2))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=4, help="launches per path (alternating)")
    p.add_argument("--tokens", type=int, default=64, help="tokens per completion")
    p.add_argument("--runs", type=int, default=3, help="completions per launch (the best counts)")
    p.add_argument("--upload-mib", type=int, default=1024, help="MiB per upload sample")
    p.add_argument("--messages", type=int, default=2000, help="64-byte messages per round-trip sample")
    p.add_argument("--shapes", default="small,medium", type=lambda t: t.split(","),
                   help=f"demo models to decode with (of {', '.join(SHAPES)})")
    args = parse_args(p, {"rounds": 1, "tokens": 8, "runs": 1, "upload_mib": 16, "messages": 200,
                          "shapes": ["small"]})
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
