"""Where llama.cpp's 10 MiB hash threshold leaves weights out of the workers' ``-c`` cache, on
the shapes of real models, and what that costs a second start over 1 GbE.

``ggml-rpc`` asks a worker's cache for a tensor (``SET_TENSOR_HASH``) only when the tensor is
larger than 10 MiB; every smaller one travels on every start. Which tensors those are follows
from the model's shape and quant mix, computed here with the same tensor types llama-quantize
gives a Q4_K_M file (:func:`gui.cluster.llama.random_model.tensor_type`). Counted is what a worker
holding every block and the output layer receives (the token embeddings stay on the host).

    python bench/scale/cache_threshold.py            # prints a Markdown table

It only computes (no engine, no files), in well under a second, so ``--smoke`` runs it whole.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.smoke import parse_args  # noqa: E402
from gui.cluster.llama.random_model import DemoShape, tensor_bytes, tensor_type  # noqa: E402

MiB = 1 << 20
THRESHOLD = 10 * MiB
#: 1 Gbit/s as TCP carries it (payload after Ethernet/IP/TCP headers).
GBE_BPS = 117.6e6

#: Published shapes (config.json of each model): layers, n_embd, n_ff, KV heads, vocabulary.
SHAPES = {
    "Llama-3.2-1B": DemoShape(layers=16, embd=2048, ff=8192, kv_heads=8, head_dim=64, vocab=128256,
                              quant="Q4_K_M", tied=True),
    "Llama-3.2-3B": DemoShape(layers=28, embd=3072, ff=8192, kv_heads=8, vocab=128256, quant="Q4_K_M",
                              tied=True),
    "Qwen2.5-7B": DemoShape(layers=28, embd=3584, ff=18944, kv_heads=4, vocab=152064, arch="qwen2",
                            quant="Q4_K_M"),
    "Llama-3.1-8B": DemoShape(layers=32, embd=4096, ff=14336, kv_heads=8, vocab=128256, quant="Q4_K_M"),
    "Qwen2.5-14B": DemoShape(layers=48, embd=5120, ff=13824, kv_heads=8, vocab=152064, arch="qwen2",
                             quant="Q4_K_M"),
    "Qwen2.5-32B": DemoShape(layers=64, embd=5120, ff=27648, kv_heads=8, vocab=152064, arch="qwen2",
                             quant="Q4_K_M"),
    "Llama-3.1-70B": DemoShape(layers=80, embd=8192, ff=28672, kv_heads=8, vocab=128256, quant="Q4_K_M"),
}


def worker_tensors(shape: DemoShape):
    """(name, bytes) of what a worker with every block and the output layer receives."""
    for name, dims in shape.tensors():
        if name == "token_embd.weight" and not shape.tied:
            continue  # stays on the host (tied: the worker gets its copy as the output matrix)
        yield name, tensor_bytes(tensor_type(name, dims, shape), dims)


def row(name: str, shape: DemoShape) -> dict:
    sizes = [b for _, b in worker_tensors(shape)]
    small = [b for b in sizes if b <= THRESHOLD]
    total = sum(sizes)
    biggest_small = max((b for _, b in worker_tensors(shape) if b <= THRESHOLD), default=0)
    return {"model": name, "worker_gib": total / (1 << 30), "tensors": len(sizes), "small": len(small),
            "small_mib": sum(small) / MiB, "share": sum(small) / total,
            "second_start_floor_s": sum(small) / GBE_BPS, "first_start_s": total / GBE_BPS,
            "largest_small_mib": biggest_small / MiB}


def main() -> None:
    parse_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), {})
    rows = [row(n, s) for n, s in SHAPES.items()]
    print("| model (Q4_K_M) | worker's weights | tensors | ≤ 10 MiB (travel every start) | their bytes |"
          " share | 1 GbE: first start | 1 GbE: second start, at least |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['worker_gib']:.2f} GiB | {r['tensors']} | {r['small']} | "
              f"{r['small_mib']:.0f} MiB | {100 * r['share']:.1f} % | {r['first_start_s']:.0f} s | "
              f"{r['second_start_floor_s']:.1f} s |")


if __name__ == "__main__":
    main()
