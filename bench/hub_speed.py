"""How well the hub listing's predicted speed matches what the cluster then really decodes.

    python bench/hub_speed.py [--layers 12] [--embd 1024] [--ff 2816] [--tokens 128]

Two real herd-agents on loopback are paired; a local test hub (``tests/cluster/hub_server.py``)
serves one demo model in three quants (Q4_K_M, Q8_0, F16). ``herd plan --fastest`` measures the
nodes once, on the F16 file; ``herd model files`` then predicts every file's decode speed from
those measurements (scaled per byte of each file's layers, the split by free memory). Then each
file is downloaded with ``herd model get``, launched with ``herd up`` (that same split) and
decodes ``--tokens`` tokens; llama-server's own ``predicted_per_second`` is the measured speed.

Printed: per file, predicted and measured tokens/s and the error in percent.
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

REPO = "herd-bench/Tiny-GGUF"


async def run(layers: int, embd: int, ff: int, tokens: int) -> list[tuple[str, float, float]]:
    import httpx
    from cluster.agents import start_agent
    from cluster.hub_server import HubServer, Repo, demo_repo_files
    from conftest import ProcessJar, free_port
    from e2e.herd_cli import HERD, HerdUp, herd

    from gui.cluster.chat.client import chat

    tmp = Path(tempfile.mkdtemp(prefix="herd-hub-bench-"))
    env = dict(os.environ, HERD_CONFIG_DIR=str(tmp / "config"), XDG_CACHE_HOME=str(tmp / "cache"),
               HF_HOME=str(tmp / "hf-home"))
    files = {k: v for k, v in demo_repo_files(tmp / "hub", layers=layers, embd=embd, ff=ff).items() if "/" not in k}
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

            def get(quant: str) -> Path:
                r = herd(["model", "get", REPO, "--quant", quant, "--models-dir", models], env, timeout=600)
                assert r.returncode == 0, r.stderr
                return Path(r.stdout.splitlines()[-1])

            f16 = get("F16")
            r = herd(["plan", "--model", f16, "--fastest", "--no-mdns", "--ctx", "512", "--json"], env, timeout=900)
            assert r.returncode == 0, r.stderr
            r = herd(["model", "files", REPO, "--no-mdns", "--ctx", "512", "--json"], env)
            assert r.returncode == 0, r.stderr
            listed = {f["quant"]: f for f in json.loads(r.stdout)["files"]}
            for quant in ("Q4_K_M", "Q8_0", "F16"):
                path = get(quant)
                port = free_port()
                up = HerdUp(jar.popen(HERD + ["up", str(path), "--no-mdns", "--ctx", "512", "--port", str(port)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
                up.wait_for("Serving", 300)
                async with httpx.AsyncClient() as client:
                    await chat(client, up.endpoint(), [{"role": "user", "content": "Hi"}], max_tokens=8)
                    best = 0.0
                    for _ in range(3):
                        done = await chat(client, up.endpoint(), [{"role": "user", "content": "Tell a story."}],
                                          max_tokens=tokens)
                        best = max(best, done.predicted_per_second)
                up.proc.send_signal(2)
                up.proc.wait(timeout=60)
                rows.append((f"{quant} ({listed[quant]['split']})", listed[quant]["tokens_per_s"], best))
    finally:
        jar.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--embd", type=int, default=1024)
    ap.add_argument("--ff", type=int, default=2816)
    ap.add_argument("--tokens", type=int, default=128)
    args = ap.parse_args()
    rows = asyncio.run(run(args.layers, args.embd, args.ff, args.tokens))
    print(f"model: {args.layers} layers, n_embd {args.embd}, n_ff {args.ff}; two agents on loopback")
    print(f"{'file (split by memory)':<36} {'predicted tok/s':>16} {'measured tok/s':>15} {'error':>8}")
    for name, pred, meas in rows:
        err = 100.0 * (pred - meas) / meas
        print(f"{name:<36} {pred:>16.1f} {meas:>15.1f} {err:>+7.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
