"""How long listing the models on this PC takes (``gui.cluster.models.local.find_local_models``).

    python bench/local_models_scan.py [--repeats 5] [--homes 10,100,1000]

Builds temporary homes of growing size — LM Studio folders (``publisher/repo/file.gguf``, with a
README and a projector beside each model) and a Hugging Face cache (``models--org--name`` with
``blobs/`` and ``snapshots/<hash>/`` links) — and times a full scan of each. The GGUF files are
sparse placeholders: the scan reads names and sizes only, never a header. Prints a table: models
on disk, directory entries looked at, median and worst seconds. The scan runs off the GUI thread;
this says how soon the list appears after the window opens (the page cache is warm after the
first repeat, as it is for a home used every day).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.smoke import parse_args  # noqa: E402
from gui.cluster.models.local import find_local_models  # noqa: E402


def build_home(root: Path, repos: int) -> int:
    """``repos`` LM Studio repos and ``repos`` Hugging Face repos under ``root``; returns the
    number of directory entries made."""
    entries = 0
    for i in range(repos):
        repo = root / ".lmstudio" / "models" / f"pub{i % 7}" / f"Model{i}-GGUF"
        repo.mkdir(parents=True)
        for name in (f"model{i}-Q4_K_M.gguf", f"model{i}-Q8_0.gguf", "mmproj-f16.gguf", "README.md"):
            with open(repo / name, "wb") as f:
                f.truncate(1 << 30)
        entries += 5
        hf = root / ".cache" / "huggingface" / "hub" / f"models--org{i % 5}--Model{i}-GGUF"
        (hf / "blobs").mkdir(parents=True)
        snap = hf / "snapshots" / f"{i:040x}"
        snap.mkdir(parents=True)
        blob = hf / "blobs" / f"{i:064x}"
        with open(blob, "wb") as f:
            f.truncate(1 << 30)
        (snap / f"model{i}-Q4_K_M.gguf").symlink_to(os.path.relpath(blob, snap))
        entries += 6
    return entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--homes", type=lambda t: [int(n) for n in t.split(",")], default=[10, 100, 1000],
                        help="repositories of each kind per home, comma-separated")
    args = parse_args(parser, {"repeats": 1, "homes": [10]})
    print(f"{'models':>8} {'entries':>8} {'median s':>10} {'worst s':>10}")
    for repos in args.homes:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            entries = build_home(home, repos)
            times, found = [], 0
            for _ in range(args.repeats):
                started = time.perf_counter()
                found = len(find_local_models(home / "herd", (), home=home, env={}, platform="linux"))
                times.append(time.perf_counter() - started)
            print(f"{found:>8} {entries:>8} {statistics.median(times):>10.4f} {max(times):>10.4f}")


if __name__ == "__main__":
    main()
