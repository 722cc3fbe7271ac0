"""How long the fastest-plan search takes, by cluster size (issue #7's goal: < 1 s for 8 × 80).

    python bench/optimizer_speed.py [--repeats 5] [--smoke]

Prints one row per shape: workers (each with one or two devices), layers, the search time
(median of ``--repeats``) and the plan it found. Random but seeded measurements, no network.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gui.cluster.llama.model import ModelInfo  # noqa: E402
from gui.cluster.llama.server_command import layout_args  # noqa: E402
from gui.cluster.planning.cost_model import DeviceSpeed, LinkSpeed, Measurements  # noqa: E402
from gui.cluster.planning.optimize import fastest  # noqa: E402
from gui.cluster.planning.plan import Device  # noqa: E402
from bench.smoke import parse_args  # noqa: E402

MiB = 1 << 20


def synthetic_model(n_layer: int) -> ModelInfo:
    """A 7B-like shape: 200 MiB blocks, 4096 wide, 32k vocabulary."""
    slots = (200 * MiB,) * n_layer + (250 * MiB,)
    return ModelInfo(path=Path("synthetic.gguf"), file_bytes=sum(slots), architecture="llama", name="synthetic",
                     n_layer=n_layer, context_length=4096, embedding_length=4096, feed_forward_length=11008,
                     n_head=32, n_head_kv=(8,) * n_layer, head_dim_k=128, head_dim_v=128, vocab_size=32000,
                     file_type=1, quantization="F16", slot_bytes=slots, input_bytes=250 * MiB,
                     token_embd_bytes=250 * MiB, tied_embeddings=False, tensor_bytes=sum(slots) + 250 * MiB)


def cluster(workers: int, n_layer: int, two_devices: bool, rng: random.Random):
    devices, compute, links = [], {}, {}
    for w in range(workers):
        for index in range(2 if two_devices and w % 2 else 1):
            d = Device(f"n{w}", f"node{w}", f"10.0.0.{w + 1}:50052", index, f"D{index}",
                       rng.randint(2, 40) * 1024 * MiB, 64 * 1024 * MiB)
            devices.append(d)
            compute[d.key] = DeviceSpeed.uniform(n_layer, rng.uniform(2e-3, 2e-2), rng.uniform(3e-3, 3e-2))
        links[f"n{w}"] = LinkSpeed(rng.uniform(2e-4, 5e-3), rng.choice([1.25e7, 1.25e8, 1.25e9]))
    host = DeviceSpeed.uniform(n_layer, 3e-2)  # a master slower than most workers
    return devices, Measurements(compute, links, host, 1e-4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="searches per shape (the median counts)")
    options = parse_args(parser, {"repeats": 1})  # every shape stays: the largest takes well under a second
    rng = random.Random(11)
    print(f"{'workers':>7} {'devices':>7} {'layers':>6} {'search s':>9}  plan (-ts)")
    for workers, n_layer, two in [(2, 32, False), (4, 32, False), (4, 80, True), (6, 80, False),
                                  (8, 80, False), (8, 80, True), (10, 80, False)]:
        model = synthetic_model(n_layer)
        devices, meas = cluster(workers, n_layer, two, rng)
        times = []
        for _ in range(options.repeats):
            t0 = time.perf_counter()
            result = fastest(model, devices, meas, ctx=4096, host_free_bytes=16 * 1024 * MiB)
            times.append(time.perf_counter() - t0)
        args = layout_args(*result.plan.layout())
        ts = args[args.index("-ts") + 1] if "-ts" in args else "-"
        print(f"{workers:7d} {len(devices):7d} {n_layer:6d} {statistics.median(times):9.3f}  "
              f"host {result.plan.host_layers}, -ts {ts}")


if __name__ == "__main__":
    main()
