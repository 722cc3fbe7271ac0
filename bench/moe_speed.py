"""Does the predicted decode speed of a mixture-of-experts model follow what a token reads?

    python bench/moe_speed.py [--embd 1024] [--layers 8] [--tokens 32] [--runs 3] [--threads 1] [--smoke]

The master's CPU is calibrated the way *Fastest* calibrates it (``measure_compute``: a real
llama-server, every layer on this CPU, real completions) on a dense Qwen3 model. From that one
measurement the decode speed of Qwen3-MoE models of the same width is predicted twice:

* **read**: by the bytes a token reads (attention, router and ``experts_used`` of the
  ``experts``; :attr:`gui.cluster.llama.model.ModelInfo.active_slot_bytes`), as herd predicts now;
* **held**: by every byte the layers hold, as a dense model's would be.

Then each model is measured the same way, and the table gives predicted ÷ measured for both.
All files are Q4_K_M with random weights (``herd demo-model``'s generator); ratios are measured
side by side in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.smoke import parse_args  # noqa: E402

MiB = 1 << 20


def shapes(embd: int, layers: int):
    from gui.cluster.llama.random_model import DemoShape

    ff = embd * 11 // 4 // 256 * 256
    common = dict(layers=layers, embd=embd, kv_heads=2, head_dim=128, quant="Q4_K_M", tied=True)
    return [
        ("dense qwen3", DemoShape(arch="qwen3", ff=ff, **common)),
        ("moe 8 experts, 2 used", DemoShape(arch="qwen3moe", ff=ff, experts=8, experts_used=2,
                                            expert_ff=max(256, ff // 2 // 256 * 256),
                                            **common)),
        ("moe 32 experts, 4 used", DemoShape(arch="qwen3moe", ff=ff, experts=32, experts_used=4,
                                             expert_ff=max(256, ff // 4 // 256 * 256), **common)),
        ("moe 64 experts, 2 used", DemoShape(arch="qwen3moe", ff=ff, experts=64, experts_used=2,
                                             expert_ff=max(256, ff // 4 // 256 * 256), **common)),
    ]


async def run(embd: int, layers: int, tokens: int, runs: int, threads: int) -> list[tuple]:
    from agent.engine_lookup import find_engine
    from gui.cluster.llama.model import inspect_model
    from gui.cluster.llama.random_model import write_demo_model
    from gui.cluster.planning.cost_model import DeviceSpeed
    from gui.cluster.planning.measure import measure_compute

    engine = find_engine()
    folder = Path(tempfile.mkdtemp(prefix="herd-moe-bench-"))
    models = [(label, inspect_model(write_demo_model(folder / f"{i}.gguf", shape)))
              for i, (label, shape) in enumerate(shapes(embd, layers))]
    measured = {}
    for label, info in models:
        measured[label] = await measure_compute(engine, info.path, None, tokens=tokens, runs=runs,
                                                host_threads=threads, prompt_runs=0)
    calibration = measured[models[0][0]]
    rows = []
    for label, info in models:
        scale = calibration.bytes_per_param / info.bytes_per_param if info.bytes_per_param else 1.0
        spb = calibration.seconds_per_byte * scale
        by_read = sum(DeviceSpeed.from_bytes(info, spb).slot_s)
        by_held = sum(b * spb for b in info.slot_bytes)
        got = 1.0 / measured[label].step_s
        rows.append((label, sum(info.slot_bytes) / MiB, sum(info.active_slot_bytes) / MiB, got,
                     1.0 / by_read, 1.0 / by_read / got, 1.0 / by_held, 1.0 / by_held / got))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--embd", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3, help="timed completions per model (the best counts)")
    ap.add_argument("--threads", type=int, default=1)
    args = parse_args(ap, {"embd": 256, "layers": 2, "tokens": 4, "runs": 1})
    rows = asyncio.run(run(args.embd, args.layers, args.tokens, args.runs, args.threads))
    print("| model | layers hold MiB | a token reads MiB | measured tok/s | predicted by read | ÷ measured "
          "| predicted by held | ÷ measured |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, held, read, got, p_read, r_read, p_held, r_held in rows:
        print(f"| {label} | {held:.1f} | {read:.1f} | {got:.1f} | {p_read:.1f} | {r_read:.2f} | {p_held:.1f} "
              f"| {r_held:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
