"""What the chat's check before sending costs: llama-server counting the conversation.

    python bench/chat_context_check.py [--model PATH] [--ctx 8192] [--repeat 5] [--smoke]

A real llama-server on loopback serves the model (default: the demo's SmolLM2 weights) with
``--ctx`` tokens in one slot. For conversations of growing length — and a 30,000-character
paste — :func:`gui.cluster.chat.conversation.check_context` runs ``--repeat`` times; the table
shows the conversation's length in tokens, whether it fits (or how many of the oldest turns it
leaves out), how many counts it needed, and the median time the check took: the delay the user
waits before the message goes.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.engine_lookup import find_engine
from bench.smoke import parse_args
from gui.cluster.chat.conversation import check_context
from gui.cluster.llama.server_start import machine_args


def conversation(turns: int, words: int = 60) -> list[dict]:
    out = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        out.append({"role": "user", "content": f"Question {i}: " + " ".join(f"apple{i}x{j}" for j in range(words))})
        out.append({"role": "assistant", "content": f"Answer {i}: " + " ".join(f"pear{i}y{j}" for j in range(words))})
    return out + [{"role": "user", "content": "Sum it up."}]


async def measure(url: str, repeat: int, max_tokens: int) -> list[tuple]:
    cases = [(f"{n} turns", conversation(n)) for n in (1, 8, 32, 64, 128)]
    cases.append(("30k-char paste", [{"role": "user", "content": "y" * 30000}]))
    counts = 0

    async def on_request(request: httpx.Request) -> None:
        nonlocal counts  # one /tokenize per count of the conversation
        counts += request.url.path == "/tokenize"

    rows = []
    async with httpx.AsyncClient(event_hooks={"request": [on_request]}) as client:
        for name, messages in cases:
            times = []
            for _ in range(repeat):
                counts = 0
                t0 = time.perf_counter()
                fit = await check_context(client, url, messages, max_tokens)
                times.append((time.perf_counter() - t0) * 1000)
            verdict = "fits" if fit.fits else ("too long alone" if fit.drop_turns is None
                                               else f"leave out {fit.drop_turns}")
            rows.append((name, fit.tokens, verdict, counts, statistics.median(times)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=256)
    args = parse_args(ap, {"repeat": 1})
    if args.model is None:
        from gui.cluster.models.demo_weights import installed_demo_weights
        args.model = installed_demo_weights()
        if args.model is None:
            sys.exit("no model: pass --model, or run `herd demo --download-only`")
    engine = find_engine(probe=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(engine.llama_server), "-m", str(args.model), "--host", "127.0.0.1",
                             "--port", str(port), "-c", str(args.ctx), "-np", "1", "--no-webui",
                             *machine_args(engine.llama_server)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit("llama-server did not start")
            time.sleep(0.1)
        rows = asyncio.run(measure(url, args.repeat, args.max_tokens))
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"model {args.model.name}, context {args.ctx} tokens, reply room {min(args.max_tokens, args.ctx // 2)}")
    print(f"{'conversation':>16} {'tokens':>7} {'verdict':>15} {'counts':>6} {'check ms':>9}")
    for name, tokens, verdict, counts, ms in rows:
        print(f"{name:>16} {tokens:>7} {verdict:>15} {counts:>6} {ms:>9.1f}")


if __name__ == "__main__":
    main()
