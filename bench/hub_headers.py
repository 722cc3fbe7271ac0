"""How long *Get model…* takes to read a repository's GGUF headers, and where the time goes.

    python bench/hub_headers.py [--vocab 262144] [--files 2] [--smoke]

A local test hub (``tests/cluster/hub_server.py``) on 127.0.0.1 serves ``--files`` small demo
models whose headers each hold a ``--vocab``-token vocabulary (as Gemma 3's do), the case a
person met. Printed: per file, the time to fetch its header with ranged requests and to read it
into a model description, then the whole listing (:func:`gui.cluster.models.hub.assess_repo`,
headers read in parallel) with the progress reports it gave.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

REPO = "herd-bench/Big-Vocab-GGUF"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=262144)
    parser.add_argument("--files", type=int, default=2)
    from bench.smoke import parse_args

    args = parse_args(parser, {"vocab": 4096, "files": 1})

    from cluster.hub_server import HubServer, Repo

    from gui.cluster.llama.model import inspect_model
    from gui.cluster.llama.random_model import DemoShape, write_demo_model
    from gui.cluster.models import hub as H

    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for i in range(args.files):
            p = write_demo_model(Path(tmp) / f"Big-Vocab-{i}-F16.gguf",
                                 DemoShape(layers=4, embd=256, ff=512, vocab=args.vocab))
            files[p.name] = p
        with HubServer({REPO: Repo(files)}) as srv:
            rows = []
            hub = H.Hub(srv.url)
            listing = hub.files(REPO)
            for m in listing.models:
                t0 = time.perf_counter()
                head = hub.header(REPO, listing.commit, m.first)
                t1 = time.perf_counter()
                local = Path(tmp) / ("head-" + m.first.name)
                local.write_bytes(head)
                with open(local, "r+b") as f:
                    f.truncate(m.first.size)
                inspect_model(local)
                t2 = time.perf_counter()
                rows.append((m.first.name, len(head), t1 - t0, t2 - t1))
            told = []
            H._INFO_CACHE.clear()  # the per-file reads above did not fill it, but be sure
            t0 = time.perf_counter()
            H.assess_repo(hub, hub.files(REPO), [], 4096, host_free_bytes=None, on_progress=told.append)
            whole = time.perf_counter() - t0
    print(f"{'file':<28} {'header MB':>10} {'fetch s':>8} {'parse s':>8}")
    for name, size, fetch, parse in rows:
        print(f"{name:<28} {size / 1e6:>10.1f} {fetch:>8.2f} {parse:>8.2f}")
    print(f"whole listing ({args.files} files, in parallel): {whole:.2f} s")
    for p in told:
        print(f"  progress: {p.file}  started {p.started} / done {p.done} of {p.total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
