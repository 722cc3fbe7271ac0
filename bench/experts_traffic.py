"""What "experts in RAM" costs on the wire: the RPC traffic of one generated token, measured.

    python bench/experts_traffic.py [--layers 8] [--embd 512] [--experts 16] [--used 4]
                                    [--tokens 32] [--reps 3] [--delay-ms 0] [--smoke]

One worker PC is one Vulkan ``ggml-rpc-server -d Vulkan0,CPU`` on loopback (its GPU is Mesa's
software Vulkan device, as in ``tests/e2e/gpu.py``). Between it and llama-server (CPU engine, the
master) sits :class:`RpcTap`, a TCP proxy that parses llama.cpp's RPC stream: every request
(``cmd u8 | size u64 | payload``) by command, every reply (``size u64 | payload``, matched to its
request: the worker answers in order), the bytes each way, and of each ``COPY_TENSOR`` the tensor
it copies (shape and name from the request's two ``rpc_tensor`` descriptors).

llama-server runs the command line herd builds (``ServerSpec.for_plan``, started by
``ServerStart`` as every herd path starts it) for three placements of one qwen3moe Q4_K_M model
(herd's random-weights generator):

* **A, GPU**: every slot on the worker's GPU, whole layers;
* **B, experts in RAM**: the same, the blocks' expert tensors on the worker's CPU device
  (``experts_in_ram``: ``-ot blk\\.(…)\\.ffn_…_exps=RPC1[…]``);
* **C, worker CPU**: every slot on the worker's CPU device, whole layers (reference).

Per decode step (one generated token) it differences the counters of completions of 1 and
``1 + tokens`` tokens with the same prompt (``cache_prompt`` off), so prompt processing and the
first token cancel out. Round trips are the requests the worker answers (the client waits for
each); the others (``SET_TENSOR``, ``GRAPH_COMPUTE``, ``GRAPH_RECOMPUTE``) are one-way.

"Through the master" is what the same crossings would move if the two devices were on different
workers: llama.cpp then copies each tensor with a ``GET_TENSOR`` to the master and a
``SET_TENSOR`` back (``ggml_backend_tensor_copy``), i.e. the copied tensors' bytes once each way.

``--delay-ms D`` delays every chunk by D ms in each direction (a round trip gains 2·D), to see
the round trips in the decode speed as a LAN would show them.

Measured (AMD EPYC, 2 cores shared; lavapipe as the GPU), ``python bench/experts_traffic.py``,
per decode step, 32 steps × 3 runs (decode tok/s is the software GPU's and varies by ±50 % from
run to run on this machine; the counts are exact and the same in every run)::

    | placement                  | decode tok/s | bytes master→worker | bytes worker→master | round trips | GRAPH_COMPUTE | GRAPH_RECOMPUTE | SET_TENSOR | GET_TENSOR | COPY_TENSOR (refused) | round trips × 4 ms |
    |----------------------------|-----|---------|--------|----|----|---|----|----|---------|--------|
    | A GPU, whole layers        |   1.0 |  11,376 |  8,200 |  1 |  0 | 1 |  9 |  1 |  0 (0)  |   4 ms |
    | B GPU, experts in RAM      |   1.5 | 315,152 | 58,288 | 81 | 17 | 0 | 49 | 41 | 40 (40) | 324 ms |
    | C worker CPU, whole layers | 241.0 |  11,376 |  8,200 |  1 |  0 | 1 |  9 |  1 |  0 (0)  |   4 ms |

    B: COPY_TENSOR per token, by tensor: ffn_inp-N ×8, ffn_moe_topk-N ×8,
       ffn_moe_weights_norm-N (reshaped) ×8, ffn_norm-N (reshaped) ×8, l_out-N ×7, norm ×1

    | the crossings' traffic                                  | extra round trips | tensor bytes master→worker | tensor bytes worker→master |
    |---------------------------------------------------------|----|--------|--------|
    | measured (B)                                            | 80 | 49,408 | 49,408 |
    | through the master, estimate: 40 crossings × 2,048 B    | 40 | 81,920 | 81,920 |
    | on the worker (if its COPY_TENSOR did the copy)         | 40 |      0 |      0 |

Every COPY_TENSOR is refused (the worker's CPU buffer copies only from host buffers, its GPU
buffer only from its own kind), so the five tensors that cross per block go through the master:
ten round trips per block per token (``docs/llama-cpp.md``, "Per-token traffic"; the cost model's
``expert_crossings``). With ``--delay-ms 2`` the counts are the same; tok/s was A 1.5, B 1.2,
C 87.7.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.smoke import parse_args  # noqa: E402

#: ``enum rpc_cmd`` of ggml-rpc.cpp at the pinned build (protocol 7).
RPC_COMMANDS = ("ALLOC_BUFFER", "GET_ALIGNMENT", "GET_MAX_SIZE", "BUFFER_GET_BASE", "FREE_BUFFER",
                "BUFFER_CLEAR", "SET_TENSOR", "SET_TENSOR_HASH", "GET_TENSOR", "COPY_TENSOR",
                "GRAPH_COMPUTE", "GET_DEVICE_MEMORY", "INIT_TENSOR", "GET_ALLOC_SIZE", "HELLO",
                "DEVICE_COUNT", "GRAPH_RECOMPUTE", "MEMSET_TENSOR")
CMD = {name: i for i, name in enumerate(RPC_COMMANDS)}
#: The commands the worker answers (rpc_serve_client sends a reply): each one is a round trip.
REPLIED = frozenset(CMD[c] for c in ("ALLOC_BUFFER", "GET_ALIGNMENT", "GET_MAX_SIZE", "BUFFER_GET_BASE",
                                      "SET_TENSOR_HASH", "GET_TENSOR", "COPY_TENSOR", "GET_DEVICE_MEMORY",
                                      "GET_ALLOC_SIZE", "HELLO", "DEVICE_COUNT"))
#: ``rpc_tensor`` (packed): id u64, type u32, buffer u64, ne[4] u32, nb[4] u32, op u32,
#: op_params[16] i32, flags i32, src[10] u64, view_src, view_offs, data u64, name[64], use_count.
RPC_TENSOR_SIZE = 296
_NE, _NB, _NAME = 20, 36, 228
#: Bytes per element of the ggml types an activation has (F32, F16, I8, I16, I32, I64, F64, BF16).
_ELEMENT = {0: 4, 1: 2, 24: 1, 25: 2, 26: 4, 27: 8, 28: 8, 30: 2}
#: Bytes of a request's payload kept for parsing (a COPY_TENSOR request is two descriptors).
_KEEP = 2 * RPC_TENSOR_SIZE


def tensor_of(desc: bytes) -> tuple[str, int]:
    """``(name, bytes)`` of the tensor an ``rpc_tensor`` descriptor describes (ggml_nbytes)."""
    ttype = struct.unpack_from("<I", desc, 8)[0]
    ne = struct.unpack_from("<4I", desc, _NE)
    nb = struct.unpack_from("<4I", desc, _NB)
    name = desc[_NAME:_NAME + 64].split(b"\0", 1)[0].decode(errors="replace")
    if ttype in _ELEMENT:
        size = _ELEMENT[ttype] + sum((n - 1) * s for n, s in zip(ne, nb, strict=True))
    else:
        size = ne[3] * nb[3]
    return name, size


@dataclass
class Traffic:
    """Counters of everything that passed between llama-server and the worker.

    Attributes:
        up: bytes llama-server (the master) sent to the worker.
        down: bytes the worker sent back.
        requests: requests per command name.
        copied: bytes of the tensors the worker copied between its own devices (COPY_TENSOR).
        copies: COPY_TENSOR requests per name of the tensor copied.
        refused: COPY_TENSOR requests the worker answered "not done" (the client then copies
            through itself: GET_TENSOR, SET_TENSOR).
        connections: connections made to the worker.
    """

    up: int = 0
    down: int = 0
    requests: Counter = field(default_factory=Counter)
    copied: int = 0
    copies: Counter = field(default_factory=Counter)
    refused: int = 0
    connections: int = 0

    def copy(self) -> Traffic:
        """A snapshot (the proxy keeps counting into the original)."""
        return self + Traffic()

    def __add__(self, other: Traffic) -> Traffic:
        return self._combine(other, 1)

    def __sub__(self, other: Traffic) -> Traffic:
        return self._combine(other, -1)

    def _combine(self, other: Traffic, sign: int) -> Traffic:
        def counts(a: Counter, b: Counter) -> Counter:
            return Counter({k: a[k] + sign * b[k] for k in a.keys() | b.keys()})
        return Traffic(self.up + sign * other.up, self.down + sign * other.down,
                       counts(self.requests, other.requests), self.copied + sign * other.copied,
                       counts(self.copies, other.copies), self.refused + sign * other.refused,
                       self.connections + sign * other.connections)

    @property
    def round_trips(self) -> int:
        """Requests the client waited for a reply to."""
        return sum(n for c, n in self.requests.items() if CMD[c] in REPLIED)


class _Requests:
    """Parses one connection's client→server stream as it passes, chunk by chunk; the commands
    that wait for a reply go into ``replies`` (the worker answers them in order)."""

    def __init__(self, traffic: Traffic, replies: deque) -> None:
        self.t, self.replies = traffic, replies
        self.head = bytearray()
        self.cmd = -1
        self.left = 0
        self.body = bytearray()

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self.cmd < 0:  # reading the 9-byte header
                take = min(9 - len(self.head), len(view))
                self.head += view[:take]
                view = view[take:]
                if len(self.head) == 9:
                    self.cmd, self.left = struct.unpack("<BQ", self.head)
                    self.head.clear()
                    self.body.clear()
                    if self.left == 0:
                        self._done()
                continue
            take = min(self.left, len(view))
            if len(self.body) < _KEEP:
                self.body += view[:min(take, _KEEP - len(self.body))]
            self.left -= take
            view = view[take:]
            if self.left == 0:
                self._done()

    def _done(self) -> None:
        name = RPC_COMMANDS[self.cmd] if self.cmd < len(RPC_COMMANDS) else f"cmd{self.cmd}"
        self.t.requests[name] += 1
        if self.cmd == CMD["COPY_TENSOR"] and len(self.body) == _KEEP:
            tensor, size = tensor_of(bytes(self.body[:RPC_TENSOR_SIZE]))
            self.t.copied += size
            self.t.copies[tensor] += 1
        if self.cmd in REPLIED:
            self.replies.append(self.cmd)
        self.cmd = -1


class _Replies:
    """Parses the server→client stream: ``size u64 | payload`` per answered request, in the
    order of ``replies``; a COPY_TENSOR reply's one byte says whether the worker copied."""

    def __init__(self, traffic: Traffic, replies: deque) -> None:
        self.t, self.replies = traffic, replies
        self.head = bytearray()
        self.left = -1

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self.left < 0:
                take = min(8 - len(self.head), len(view))
                self.head += view[:take]
                view = view[take:]
                if len(self.head) == 8:
                    self.left = struct.unpack("<Q", self.head)[0]
                    self.head.clear()
                    self.cmd = self.replies.popleft()
                    if self.left == 0:
                        self.left = -1
                continue
            if self.cmd == CMD["COPY_TENSOR"] and self.left == 1 and view[0] == 0:
                self.t.refused += 1
            take = min(self.left, len(view))
            self.left -= take
            view = view[take:]
            if self.left == 0:
                self.left = -1


class RpcTap:
    """A TCP proxy on loopback in front of one ``ggml-rpc-server`` that counts what passes
    (:attr:`traffic`, over every connection: llama-server's short probes and its session).

    ``delay`` seconds are added to each direction; chunks are queued with their due time, so a
    bulk transfer keeps its throughput and only latency grows.
    """

    def __init__(self, target: tuple[str, int], delay: float = 0.0) -> None:
        self.target, self.delay = target, delay
        self.traffic = Traffic()
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> int:
        """Listen on a free loopback port; returns it."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        """Stop listening and drop the open connections."""
        if self._server is not None:
            self._server.close()
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    async def _accept(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        self.traffic.connections += 1
        s_reader, s_writer = await asyncio.open_connection(*self.target)
        for w in (c_writer, s_writer):  # Nagle would hold back the small RPC messages
            w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        replies: deque = deque()
        requests, answers = _Requests(self.traffic, replies), _Replies(self.traffic, replies)
        tasks = [asyncio.ensure_future(self._pump(c_reader, s_writer, "up", requests.feed)),
                 asyncio.ensure_future(self._pump(s_reader, c_writer, "down", answers.feed))]
        self._tasks.update(tasks)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
                self._tasks.discard(t)
            for w in (c_writer, s_writer):
                w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: str,
                    parse) -> None:
        queue: asyncio.Queue = asyncio.Queue()

        async def send() -> None:
            while (item := await queue.get())[1]:
                wait = item[0] - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(item[1])
                await writer.drain()

        sender = asyncio.ensure_future(send())
        try:
            while chunk := await reader.read(1 << 18):
                setattr(self.traffic, direction, getattr(self.traffic, direction) + len(chunk))
                parse(chunk)
                queue.put_nowait((time.monotonic() + self.delay, chunk))
            queue.put_nowait((0.0, b""))
            await sender
        finally:
            sender.cancel()


# --------------------------------------------------------------------------------------------
# the worker, the placements, the measurement

#: What lets the Vulkan build use Mesa's software device (a CPU-type device), as in the GPU tests.
GPU_ENV = {"GGML_VK_VISIBLE_DEVICES": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_worker(rpc_server: Path, threads: int, log: Path) -> tuple[subprocess.Popen, int, list[tuple[int, int]]]:
    """``ggml-rpc-server -d Vulkan0,CPU`` on loopback, as an agent with a GPU runs it; returns
    the process, its port and its devices' ``(free, total)`` bytes (asked over RPC)."""
    from agent import rpc_protocol

    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen([str(rpc_server), "-H", "127.0.0.1", "-p", str(port), "-t", str(threads),
                                 "-d", "Vulkan0,CPU"], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env={**os.environ, **GPU_ENV})
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                rpc_protocol.hello(s)
                memory = rpc_protocol.device_memory(s)
            if len(memory) != 2:
                raise SystemExit(f"the worker offers {len(memory)} devices, expected Vulkan0 and CPU")
            return proc, port, memory
        except (OSError, rpc_protocol.RpcProtocolError):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise SystemExit("ggml-rpc-server -d Vulkan0,CPU did not start: install the Vulkan engine "
                                 "(`herd engine install --from-source --backend vulkan`) and "
                                 "mesa-vulkan-drivers (lavapipe)") from None
            time.sleep(0.1)


def placements(model, endpoint: str, memory: list[tuple[int, int]]) -> list[tuple[str, object]]:
    """The plans compared, ``(label, plan)``: A GPU, B experts in RAM, C the worker's CPU."""
    from gui.cluster.planning.plan import Device, Plan, experts_in_ram

    (gfree, gtotal), (cfree, ctotal) = memory
    gpu = Device("worker", "worker", endpoint, 0, "Vulkan0", gfree, gtotal, machine="worker")
    cpu = Device("worker", "worker", endpoint, 1, "CPU", cfree, ctotal, machine="worker")
    slots = model.n_layer + 1
    on_gpu = Plan(model.n_layer, 0, ((gpu, slots), (cpu, 0)))
    return [("A GPU, whole layers", on_gpu),
            ("B GPU, experts in RAM", experts_in_ram(on_gpu, model, "worker/Vulkan0")),
            ("C worker CPU, whole layers", Plan(model.n_layer, 0, ((gpu, 0), (cpu, slots))))]


PROMPT = "The quick brown fox jumps over the lazy dog."


async def complete(client, url: str, n: int) -> dict:
    """A completion of exactly ``n`` tokens of :data:`PROMPT`, the prompt processed afresh."""
    r = await client.post(url + "/completion", json={
        "prompt": PROMPT, "n_predict": n, "cache_prompt": False, "ignore_eos": True, "temperature": 0})
    r.raise_for_status()
    body = r.json()
    if body["timings"]["predicted_n"] != n:
        raise SystemExit(f"asked for {n} tokens, got {body['timings']['predicted_n']}")
    return body


@dataclass
class Measured:
    """One placement's traffic over ``steps`` decode steps, and its decode speeds."""

    label: str
    argv: list[str]
    traffic: Traffic
    steps: int
    tok_s: list[float]

    def per_token(self, value: float) -> float:
        return value / self.steps


async def measure(label: str, plan, model, llama_server: Path, options, tap: RpcTap, tokens: int,
                  reps: int) -> Measured:
    """Start llama-server for ``plan`` as herd does and count the traffic of ``reps`` × ``tokens``
    decode steps (completions of 1 + tokens minus completions of 1)."""
    import httpx

    from gui.cluster.llama.server_command import ServerSpec
    from gui.cluster.llama.server_start import serving

    spec = ServerSpec.for_plan(plan, model.path, options)
    async with serving(llama_server, spec, timeout=600) as server, httpx.AsyncClient(timeout=600) as client:
        await complete(client, server.url, 4)  # warm-up: graphs built and sent once
        total, tok_s = Traffic(), []
        for _ in range(reps):
            s0 = tap.traffic.copy()
            await complete(client, server.url, 1)
            s1 = tap.traffic.copy()
            long = await complete(client, server.url, 1 + tokens)
            s2 = tap.traffic.copy()
            total = total + ((s2 - s1) - (s1 - s0))
            tok_s.append(long["timings"]["predicted_per_second"])
        return Measured(label, server.spec.argv(llama_server.name), total, tokens * reps, tok_s)


# --------------------------------------------------------------------------------------------
# the table


def fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x - round(x)) < 0.05 else f"{x:,.1f}"


def median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def table(results: list[Measured], rtt_ms: float) -> str:
    """The Markdown table of per-token figures, one row per placement."""
    cols = ["placement", "decode tok/s", "bytes master→worker", "bytes worker→master", "round trips",
            "GRAPH_COMPUTE", "GRAPH_RECOMPUTE", "SET_TENSOR", "GET_TENSOR", "COPY_TENSOR (refused)",
            f"round trips × {rtt_ms:g} ms"]
    lines = ["| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]
    for r in results:
        t, p = r.traffic, r.per_token
        lines.append("| " + " | ".join([
            r.label, f"{median(r.tok_s):.1f}", fmt(p(t.up)), fmt(p(t.down)), fmt(p(t.round_trips)),
            *(fmt(p(t.requests[c])) for c in ("GRAPH_COMPUTE", "GRAPH_RECOMPUTE", "SET_TENSOR", "GET_TENSOR")),
            f"{fmt(p(t.requests['COPY_TENSOR']))} ({fmt(p(t.refused))})",
            f"{p(t.round_trips) * rtt_ms:.0f} ms"]) + " |")
    return "\n".join(lines)


def crossings_table(a: Measured, b: Measured, model) -> str:
    """B's expert crossings per token: measured, and the two ways they could go."""
    n = b.per_token(b.traffic.requests["COPY_TENSOR"])
    blocks = model.n_layer
    hidden = model.activation_bytes
    base_rt = a.per_token(a.traffic.round_trips)
    rows = [
        ("measured (B)", fmt(b.per_token(b.traffic.round_trips) - base_rt),
         fmt(b.per_token(b.traffic.copied)), fmt(b.per_token(b.traffic.copied))),
        (f"through the master, estimate: {fmt(n)} crossings × n_embd×4 = {hidden:,} B", fmt(n),
         fmt(n * hidden), fmt(n * hidden)),
        ("on the worker (if its COPY_TENSOR did the copy)", fmt(n), "0", "0"),
    ]
    lines = [f"Expert crossings per token ({fmt(n / blocks)} per block, {blocks} blocks):", "",
             ("| the crossings' traffic | extra round trips | tensor bytes master→worker | "
              "tensor bytes worker→master |"), "|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--embd", type=int, default=512)
    ap.add_argument("--experts", type=int, default=16)
    ap.add_argument("--used", type=int, default=4, help="experts each token is routed to")
    ap.add_argument("--expert-ff", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=32, help="decode steps per measured completion")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="CPU threads of the worker and of llama-server")
    ap.add_argument("--delay-ms", type=float, default=0.0, help="added one-way delay of the link")
    ap.add_argument("--rtt-ms", type=float, default=4.0, help="the Wi-Fi round trip the last column assumes")
    ap.add_argument("--only", default="ABC", help="placements to run, e.g. AB")
    args = parse_args(ap, {"layers": 2, "embd": 256, "experts": 4, "used": 2, "tokens": 2, "reps": 1})
    model, size, results = asyncio.run(run(args))
    report(args, model, size, results)
    return 0


async def run(args) -> tuple[object, int, list[Measured]]:
    """Measure the placements ``args.only`` asks for; returns the model, its file's size and the
    measurements (the file and the workers' logs are removed)."""
    from agent.engine_lookup import find_engine
    from gui.cluster.llama.model import inspect_model
    from gui.cluster.llama.random_model import DemoShape, write_demo_model

    vulkan, cpu = find_engine(backend="vulkan"), find_engine()
    if not vulkan.complete:
        raise SystemExit("no Vulkan build of llama.cpp: run `herd engine install --from-source --backend vulkan`")
    folder = Path(tempfile.mkdtemp(prefix="herd-experts-traffic-"))
    shape = DemoShape(arch="qwen3moe", layers=args.layers, embd=args.embd, ff=args.embd * 2,
                      experts=args.experts, experts_used=args.used, expert_ff=args.expert_ff, kv_heads=2,
                      quant="Q4_K_M", tied=True)
    try:
        model = inspect_model(write_demo_model(folder / "moe.gguf", shape))
        return model, model.path.stat().st_size, await measure_all(args, model, folder, vulkan, cpu)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def measure_all(args, model, folder: Path, vulkan, cpu) -> list[Measured]:
    """Each placement of ``args.only`` on a worker of its own."""
    from gui.cluster.llama.server_command import ServerOptions

    # lavapipe crashes in flash attention at this build (tests/e2e/gpu.py): -fa off for all three.
    # --cache-ram 0: llama-server otherwise saves a finished request's KV cache to RAM when the next
    # one arrives (GET_TENSOR of every cache tensor), which lands in the next request's counts.
    options = ServerOptions(ctx=512, host="127.0.0.1", port=free_port(),
                            extra_args=("-fa", "off", "--threads", str(args.threads), "--cache-ram", "0"))
    results = []
    for which in args.only:
        # A fresh worker per placement: the Vulkan worker, serving a second llama-server session
        # after one with whole layers, died with "corrupted double-linked list" (lavapipe, b11434).
        log = folder / f"worker-{which}.log"
        worker, port, memory = start_worker(vulkan.require_rpc_server(), args.threads, log)
        tap = RpcTap(("127.0.0.1", port), args.delay_ms / 1000)
        try:
            endpoint = f"127.0.0.1:{await tap.start()}"
            label, plan = next(p for p in placements(model, endpoint, memory) if p[0][0] == which)
            print(f"measuring {label} …", file=sys.stderr, flush=True)
            results.append(await measure(label, plan, model, cpu.require_llama_server(), options, tap,
                                         args.tokens, args.reps))
        except Exception:
            print(f"the worker's last words:\n{log.read_text(errors='replace')[-2000:]}", file=sys.stderr)
            raise
        finally:
            await tap.close()
            worker.terminate()
            worker.wait(timeout=30)
    return results


def report(args, model, size: int, results: list[Measured]) -> None:
    """Print the setup, the tables and each placement's command line."""
    cpu_name = next((ln.split(":", 1)[1].strip() for ln in subprocess.run(
        ["lscpu"], check=False, capture_output=True, text=True).stdout.splitlines() if ln.startswith("Model name")), "?")
    print(f"\nqwen3moe Q4_K_M, {model.n_layer} blocks, n_embd {model.embedding_length}, "
          f"{model.expert_count} experts ({model.expert_used_count} used), vocab {model.vocab_size}; "
          f"{size / (1 << 20):.1f} MiB. Worker: ggml-rpc-server -d Vulkan0,CPU (lavapipe), "
          f"link: loopback + {args.delay_ms:g} ms each way. CPU: {cpu_name}, {os.cpu_count()} cores.")
    print(f"Per decode step (one token), {args.tokens} steps × {args.reps} runs:\n")
    print(table(results, args.rtt_ms))
    for r in results:
        print(f"\n{r.label}: {' '.join(r.argv[1:])}")
        copies = Counter()
        for name, n in r.traffic.copies.items():  # "ffn_inp-3" → "ffn_inp-N": per block, summed
            copies[re.sub(r"-\d+", "-N", name)] += n
        if any(copies.values()):
            per = ", ".join(f"{k} ×{fmt(r.per_token(v))}" for k, v in sorted(copies.items()) if v)
            print(f"  COPY_TENSOR per token, by tensor: {per}")
    by = {r.label[0]: r for r in results}
    if "A" in by and "B" in by:
        print()
        print(crossings_table(by["A"], by["B"], model))


if __name__ == "__main__":
    sys.exit(main())
