"""How well the hub listing's predicted speed matches what the cluster then really decodes.

    python bench/hub_speed.py [--layers 12] [--embd 1024] [--ff 2816] [--tokens 128] [--runs 3]
                              [--moe 8x2,32x4] [--expert-ff 512] [--smoke]

Two real herd-agents on loopback are paired; a local test hub (``tests/cluster/hub_server.py``)
serves one dense demo model in three quants (Q4_K_M, Q8_0, F16) and, beside it, Qwen3-MoE demo
models of the same depth and width (Q4_K_M, one per ``--moe EXPERTSxUSED``, each expert
``--expert-ff`` wide). ``herd plan --fastest`` measures the nodes once, on the dense F16 file;
``herd model files`` then predicts every file's decode speed from those measurements (scaled per
weight a token reads: of a mixture-of-experts file the attention, the router and the routed
share of the experts; the split by free memory). Then each file is downloaded with ``herd model
get``, launched with ``herd up`` (that same split) and decodes ``--tokens`` tokens; llama-server's
own ``predicted_per_second`` (best of three) is the measured speed.

Printed: a Markdown table with, per file, whether it is dense or MoE, the bytes its layers hold
and the bytes a token reads, predicted and measured tokens/s and predicted ÷ measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from bench.smoke import parse_args  # noqa: E402

REPO = "herd-bench/Tiny-GGUF"
MiB = 1 << 20


def parse_moe(text: str) -> list[tuple[int, int]]:
    """``"8x2,32x4"`` → ``[(8, 2), (32, 4)]`` (experts, experts used); ``""`` → none."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        experts, _, used = part.lower().partition("x")
        if not (experts.isdigit() and used.isdigit() and 0 < int(used) <= int(experts)):
            raise argparse.ArgumentTypeError(f"--moe wants EXPERTSxUSED pairs such as 8x2, got {part!r}")
        out.append((int(experts), int(used)))
    return out


def moe_files(folder: Path, layers: int, embd: int, ff: int, expert_ff: int,
              configs: list[tuple[int, int]]) -> dict[str, Path]:
    """One Qwen3-MoE Q4_K_M demo model per ``(experts, used)``, named ``Tiny-MoE-8x2-Q4_K_M.gguf``."""
    from gui.cluster.llama.random_model import DemoShape, write_demo_model

    files = {}
    for experts, used in configs:
        shape = DemoShape(arch="qwen3moe", layers=layers, embd=embd, ff=ff, experts=experts,
                          experts_used=used, expert_ff=expert_ff, quant="Q4_K_M")
        p = write_demo_model(folder / f"Tiny-MoE-{experts}x{used}-Q4_K_M.gguf", shape)
        files[p.name] = p
    return files


async def run(layers: int, embd: int, ff: int, tokens: int, runs: int, moe: list[tuple[int, int]],
              expert_ff: int) -> list[dict]:
    import httpx
    from cluster.agents import start_agent
    from cluster.hub_server import HubServer, Repo, demo_repo_files
    from conftest import ProcessJar, free_port
    from e2e.herd_cli import HERD, HerdUp, herd

    from gui.cluster.chat.client import chat
    from gui.cluster.llama.model import inspect_model

    tmp = Path(tempfile.mkdtemp(prefix="herd-hub-bench-"))
    env = dict(os.environ, HERD_CONFIG_DIR=str(tmp / "config"), XDG_CACHE_HOME=str(tmp / "cache"),
               HF_HOME=str(tmp / "hf-home"))
    files = {k: v for k, v in demo_repo_files(tmp / "hub", layers=layers, embd=embd, ff=ff).items()
             if k.endswith(".gguf") and "/" not in k}
    files.update(moe_files(tmp / "hub", layers, embd, ff, expert_ff, moe))
    jar = ProcessJar()
    rows = []
    try:
        agents = [start_agent(jar.popen, tmp, name, mdns=False) for name in ("alpha", "beta")]
        for a in agents:
            r = herd(["pair", a.api_url, "--pin", a.pin()], env)
            assert r.returncode == 0, r.stderr
        with HubServer({REPO: Repo(files)}) as hub:
            env["HF_ENDPOINT"] = hub.url
            models = tmp / "models"

            def get(name: str) -> Path:
                r = herd(["model", "get", REPO, "--file", name, "--models-dir", models], env, timeout=600)
                assert r.returncode == 0, r.stderr
                return Path(r.stdout.splitlines()[-1])

            f16 = get("Tiny-F16.gguf")
            r = herd(["plan", "--model", f16, "--fastest", "--no-mdns", "--ctx", "512", "--json"], env, timeout=900)
            assert r.returncode == 0, r.stderr
            r = herd(["model", "files", REPO, "--no-mdns", "--ctx", "512", "--json"], env)
            assert r.returncode == 0, r.stderr
            listed = {f["name"]: f for f in json.loads(r.stdout)["files"]}
            for name in sorted(files, key=lambda n: ("MoE" in n, n)):
                path = get(name)
                info = inspect_model(path)
                port = free_port()
                up = HerdUp(jar.popen(HERD + ["up", str(path), "--no-mdns", "--ctx", "512", "--port", str(port)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
                up.wait_for("Serving", 300)
                async with httpx.AsyncClient() as client:
                    await chat(client, up.endpoint(), [{"role": "user", "content": "Hi"}], max_tokens=8)
                    best = 0.0
                    for _ in range(runs):
                        done = await chat(client, up.endpoint(), [{"role": "user", "content": "Tell a story."}],
                                          max_tokens=tokens)
                        best = max(best, done.predicted_per_second)
                up.proc.send_signal(2)
                up.proc.wait(timeout=60)
                kind = (f"MoE {info.expert_count}×{info.expert_used_count}" if info.is_moe else "dense")
                rows.append({"file": name, "kind": kind, "split": listed[name]["split"],
                             "held": sum(info.slot_bytes), "read": sum(info.active_slot_bytes),
                             "predicted": listed[name]["tokens_per_s"], "measured": best})
    finally:
        jar.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--embd", type=int, default=1024)
    ap.add_argument("--ff", type=int, default=2816, help="feed-forward width of the dense model")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3, help="timed completions per file (the best counts)")
    ap.add_argument("--moe", type=parse_moe, default=parse_moe("8x2,32x4"),
                    help="mixture-of-experts files to add, as EXPERTSxUSED pairs (\"\": none)")
    ap.add_argument("--expert-ff", type=int, default=512, help="feed-forward width of one expert")
    args = parse_args(ap, {"layers": 2, "embd": 256, "ff": 512, "tokens": 4, "runs": 1, "moe": parse_moe("4x2"),
                           "expert_ff": 256})
    rows = asyncio.run(run(args.layers, args.embd, args.ff, args.tokens, args.runs, args.moe, args.expert_ff))
    print(f"model: {args.layers} layers, n_embd {args.embd}, n_ff {args.ff} (dense), expert n_ff "
          f"{args.expert_ff} (MoE); two agents on loopback; {args.tokens} tokens, best of {args.runs}")
    # "by held bytes": what the listing would say if a token read every byte the layers hold —
    # the prediction scaled by read ÷ held (the loopback links' round trips are left out of
    # that scaling; they are well under 1 % of a step here).
    print("| file | kind | split by memory | layers hold MiB | a token reads MiB | predicted tok/s "
          "| measured tok/s | predicted ÷ measured | by held bytes ÷ measured |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        pred, got = r["predicted"], r["measured"]
        ratio = f"{pred / got:.2f}" if pred else "–"
        held = f"{pred * r['read'] / r['held'] / got:.2f}" if pred else "–"
        print(f"| {r['file']} | {r['kind']} | {r['split']} | {r['held'] / MiB:.1f} | {r['read'] / MiB:.1f} "
              f"| {pred or 0:.1f} | {got:.1f} | {ratio} | {held} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
