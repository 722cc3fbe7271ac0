"""What herd's front door costs (#34): decode tokens/s and time to first token through the front
door against llama-server directly, side by side in one run, for 1 stream and 8 concurrent
streams.

One real llama-server (``-np 8``) serves the demo's real SmolLM2-135M-Instruct on loopback; the
front door (:class:`~gui.cluster.serving.front_door.FrontDoor`, the one ``herd up --lan`` and the
app's *Share on the LAN* open) runs in front of it in a process of its own, so that the clients'
work does not share its interpreter. Each repetition streams the same chat completions both ways, the order alternating, with
prompt caching off so that neither way finds the other's prompt in the cache. A stream's time
to first token is from sending the request to its first content chunk; its decode rate is the
chunks after the first over the time from the first to the last. For 8 streams the decode rate
is the sum of the streams' rates.

Goal: through the door at least 0.98 of the direct decode rate and at most +5 ms to the first
token (medians over the repetitions).

    python bench/front_door.py [--reps 5] [--tokens 128] [--server-threads N] [--smoke]

Normal mode writes ``bench/front_door.md`` (the table and the CPU), or with ``--server-threads N``
``bench/front_door-threads-N.md``; ``--smoke`` writes nothing. llama-server's own default is a
compute thread per core: on a small master the door's work per token then takes its time from a
compute thread; ``--server-threads`` with fewer than the cores shows the door's cost with a core
left to it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from agent.engine_lookup import find_engine  # noqa: E402
from bench.smoke import parse_args  # noqa: E402
from gui.cluster.llama.server_command import ServerOptions, ServerSpec  # noqa: E402
from gui.cluster.llama.server_start import machine_args  # noqa: E402
from gui.cluster.models.demo_weights import installed_demo_weights  # noqa: E402
from agent.ports import free_port  # noqa: E402

STREAMS = (1, 8)
GOAL_RATIO = 0.98
GOAL_EXTRA_MS = 5.0


def cpu_name() -> str:
    """The CPU's model name, as ``lscpu`` says it (the platform's name otherwise)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or platform.machine()


def start_llama_server(engine, model: Path, log: Path, threads: int | None = None) -> tuple[subprocess.Popen, str]:
    """A real llama-server with 8 slots on loopback (``threads`` compute threads, or its own
    default: one per core); (process, base URL) once it serves."""
    extra = ("-np", "8") + (("-t", str(threads)) if threads else ())
    spec = ServerSpec(model=model, options=ServerOptions(ctx=8 * 512, port=free_port(), extra_args=extra))
    spec = spec.with_extra("--no-webui", *machine_args(engine.llama_server))
    with open(log, "wb") as fh:
        proc = subprocess.Popen(spec.argv(engine.llama_server), stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"llama-server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(spec.url + "/health", timeout=1).status_code == 200:
                return proc, spec.url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("llama-server did not serve within 120 s")
        time.sleep(0.1)  # polling a process we started for its readiness


#: The front door as a process of its own: the clients' work must not share its interpreter (the
#: GIL), as phones on the LAN do not. It serves until its standard input closes.
DOOR_PROGRAM = """
import asyncio, sys
from gui.cluster.serving.api_keys import ApiKeyStore
from gui.cluster.serving.front_door import FrontDoor

async def main():
    # as many at once as llama-server's 8 slots: the door queues beyond them (#34)
    door = FrontDoor(sys.argv[1], ApiKeyStore(sys.argv[3]), port=int(sys.argv[2]), people=8)
    await door.start()
    print(door.urls[0], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await door.stop()

asyncio.run(main())
"""


class DoorProcess:
    """The front door (:class:`FrontDoor`, as the app and ``herd up --lan`` open it) in front of
    ``upstream``, in a process of its own; :attr:`url` once it listens."""

    def __init__(self, upstream: str, keys: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen([sys.executable, "-c", DOOR_PROGRAM, upstream, str(free_port()),
                                      str(keys)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.close()
            raise SystemExit(f"the front door did not start (exit status {self.proc.returncode})")

    def close(self) -> None:
        """Stop it (its standard input closes), killing it if it does not go within 10 s."""
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def one_stream(client: httpx.AsyncClient, url: str, tokens: int, salt: int) -> tuple[float, float]:
    """(seconds to the first content chunk, decode chunks/s after it) of one streamed reply."""
    body = {"messages": [{"role": "user", "content": f"Story {salt}: tell me a long story about a llama."}],
            "max_tokens": tokens, "temperature": 0, "stream": True, "ignore_eos": True, "cache_prompt": False}
    sent = time.perf_counter()
    first = last = None
    chunks = 0
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            if choices[0].get("delta", {}).get("content"):
                last = time.perf_counter()
                first = first or last
                chunks += 1
    if first is None:
        raise SystemExit(f"{url}: a reply without any text")
    rate = (chunks - 1) / (last - first) if chunks > 1 and last > first else 0.0
    return first - sent, rate


async def one_round(url: str, streams: int, tokens: int, salt: int) -> tuple[float, float]:
    """(median seconds to first token, summed decode tokens/s) of ``streams`` concurrent replies."""
    async with httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=16)) as client:
        got = await asyncio.gather(*(one_stream(client, url, tokens, salt * 100 + i) for i in range(streams)))
    return statistics.median(t for t, _ in got), sum(r for _, r in got)


async def measure(direct: str, door: str, reps: int, tokens: int) -> dict:
    """{(streams, way): {"ttft": [s…], "rate": [tok/s…]}} over ``reps`` alternating repetitions."""
    results = {(n, way): {"ttft": [], "rate": []} for n in STREAMS for way in ("direct", "door")}
    await one_round(direct, 1, 4, 0)  # warm up (first request pays one-off costs)
    await one_round(door, 1, 4, 0)
    for rep in range(reps):
        for n in STREAMS:
            ways = [("direct", direct), ("door", door)]
            for way, url in ways if rep % 2 == 0 else ways[::-1]:
                ttft, rate = await one_round(url, n, tokens, rep + 1)
                results[(n, way)]["ttft"].append(ttft)
                results[(n, way)]["rate"].append(rate)
        print(f"  repetition {rep + 1}/{reps} done", flush=True)
    return results


def table(results: dict) -> tuple[list[str], bool]:
    """The result table's lines (Markdown) and whether both goals are met."""
    lines = ["| streams | path | first token, ms | decode, tok/s | door/direct decode | door first token extra, ms |",
             "|---:|---|---:|---:|---:|---:|"]
    met = True
    for n in STREAMS:
        d, f = results[(n, "direct")], results[(n, "door")]
        d_ttft, f_ttft = statistics.median(d["ttft"]) * 1000, statistics.median(f["ttft"]) * 1000
        d_rate, f_rate = statistics.median(d["rate"]), statistics.median(f["rate"])
        ratio = f_rate / d_rate if d_rate else 0.0
        extra = f_ttft - d_ttft
        met = met and ratio >= GOAL_RATIO and extra <= GOAL_EXTRA_MS
        lines.append(f"| {n} | llama-server directly | {d_ttft:.1f} | {d_rate:.1f} | | |")
        lines.append(f"| {n} | through the front door | {f_ttft:.1f} | {f_rate:.1f} | {ratio:.3f} | {extra:+.1f} |")
    return lines, met


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="repetitions of each case (default 5)")
    ap.add_argument("--tokens", type=int, default=128, help="tokens per reply (default 128)")
    ap.add_argument("--server-threads", type=int, default=None,
                    help="llama-server's compute threads (default: its own, one per core); with fewer "
                         "than the cores, the door's work does not take time from a compute thread")
    args = parse_args(ap, {"reps": 1, "tokens": 8}, argv)
    engine = find_engine()
    engine.require_llama_server()
    model = installed_demo_weights()
    if model is None:
        raise SystemExit("the demo's SmolLM2 weights are not here: run herd demo --download-only first")
    with tempfile.TemporaryDirectory() as tmp:
        proc, direct = start_llama_server(engine, model, Path(tmp) / "server.log", args.server_threads)
        door = None
        try:
            door = DoorProcess(direct, Path(tmp) / "api-keys.json")
            print(f"llama-server at {direct}, front door at {door.url}; "
                  f"{args.reps} repetitions, {args.tokens} tokens per reply", flush=True)
            results = asyncio.run(measure(direct, door.url, args.reps, args.tokens))
        finally:
            if door is not None:
                door.close()
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    lines, met = table(results)
    cpu = cpu_name()
    verdict = (f"goal (door ≥ {GOAL_RATIO} of the direct decode rate, ≤ +{GOAL_EXTRA_MS:.0f} ms to the first "
               f"token): {'met' if met else 'not met'}")
    print("\n".join(lines))
    print(verdict)
    threads_flag = f" --server-threads {args.server_threads}" if args.server_threads else ""
    threads_arg = f" `-t {args.server_threads}`" if args.server_threads else " (its default threads)"
    if not args.smoke:
        name = f"front_door-threads-{args.server_threads}.md" if args.server_threads else "front_door.md"
        out = Path(__file__).with_name(name)
        text = "\n".join([
            "# The front door's cost (#34)", "",
            f"`python bench/front_door.py --reps {args.reps} --tokens {args.tokens}{threads_flag}` on {cpu} "
            f"({os.cpu_count()} cores), SmolLM2-135M-Instruct Q4_1, llama-server `-np 8`{threads_arg}; medians "
            f"over the repetitions.", "",
            *lines, "", verdict, ""])
        tmp_out = out.with_suffix(".md.tmp")
        tmp_out.write_text(text, encoding="utf-8")
        tmp_out.replace(out)  # atomically
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
