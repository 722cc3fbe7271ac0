"""Benchmark: the model matrix at benchmark size, on the real engine, on this CPU.

For each model of the matrix (``tests/cluster/model_matrix.py``: F16 … Q4_K_M, grouped-query
attention, tied embeddings, llama/qwen2/qwen3, mixtures of experts (qwen3moe, and gpt-oss with
MXFP4 experts, attention sinks and every other layer windowed), and a Gemma 3-shaped
sliding-window model; real vocabularies), scaled up to a benchmark
width, and for two splits — the host keeps layers beside two workers, or the workers hold them
all — it launches the real llama-server with two real ``ggml-rpc-server`` workers on loopback
and records:

* whether the placement check passed (repacked host buffers included);
* per device, the memory herd's planner estimated against what llama-server reports for the
  weights, the KV cache and the compute buffer, with the error;
* the decode speed of one reply (llama-server's own ``predicted_per_second``).

    python bench/models/run.py                      # ≈ 8 min on 2 cores; writes results.md here
    python bench/models/run.py --embd 512 --layers 8 --tokens 16   # quicker
    python bench/models/run.py --smoke              # one model and split, smallest size; into a temp folder

Loopback only: nothing leaves this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from cluster.model_matrix import MATRIX, SWA_MODEL, serve_case  # noqa: E402
from cluster.rpc_workers import start_rpc_workers  # noqa: E402
from conftest import ProcessJar  # noqa: E402

from agent.engine_lookup import find_engine  # noqa: E402
from bench.smoke import parse_args, results_folder  # noqa: E402
from gui.cluster.llama import engine_manager as engine_mgr  # noqa: E402
from gui.cluster.llama.random_model import vocab_tokenizer, write_demo_model  # noqa: E402

MiB = 1 << 20
HERE = Path(__file__).resolve().parent


def scaled(shape, layers: int, embd: int):
    """``shape`` at the benchmark's width and depth, keeping its heads-to-KV-heads ratio (and its
    heads-to-width ratio when it names a head count: queries wider than the embedding)."""
    ff = int(embd * 2.75) // 256 * 256
    heads = shape.heads * embd // shape.embd
    group = shape.heads // shape.n_kv_heads
    return dataclasses.replace(shape, layers=layers, embd=embd, ff=ff, kv_heads=max(1, heads // group),
                               head_count=heads if shape.head_count else None)


def layouts(n_slots: int) -> dict[str, tuple[int, tuple[int, int]]]:
    """The two splits of ``n_slots``: a third on the host and the rest on two workers, or all
    on the workers (the second takes the output layer)."""
    host = n_slots // 3
    rest = n_slots - host
    return {"host + 2 workers": (host, (rest // 2, rest - rest // 2)),
            "workers only": (0, (n_slots // 2, n_slots - n_slots // 2))}


def _mib(n: int) -> str:
    return f"{n / MiB:.1f}"


def _err(est: int, got: int) -> str:
    if got == 0:
        return "—" if est == 0 else "n/a"
    return f"{(est - got) / got * 100:+.0f} %"


async def run(args) -> list[dict]:
    eng = find_engine(probe=True)
    if not eng.complete:
        sys.exit("no llama.cpp engine: run `herd engine install`")
    rows = []
    with tempfile.TemporaryDirectory(prefix="herd-bench-models-") as tmp:
        for m in (*MATRIX, SWA_MODEL):
            if args.only and m.id not in args.only:
                continue
            vocab = engine_mgr.vocab_file(m.vocab)
            if vocab is None:
                sys.exit(f"the {m.vocab} vocabulary is missing: run `herd engine install`")
            shape = scaled(m.shape, args.layers, args.embd)
            t0 = time.monotonic()
            path = write_demo_model(Path(tmp) / f"{m.id}.gguf", shape, tokenizer=vocab_tokenizer(vocab))
            size = path.stat().st_size
            print(f"{m.id}: {size / 1e6:.0f} MB written in {time.monotonic() - t0:.1f} s", flush=True)
            for name, (host, counts) in layouts(shape.layers + 1).items():
                if args.splits and name not in args.splits:
                    continue
                jar = ProcessJar()
                try:
                    workers = start_rpc_workers(eng, jar, 2)
                    # One thread for llama-server as for each worker: on loopback the three share
                    # this machine's cores, and spinning threads would starve the workers.
                    r = await serve_case(eng, path, workers, host, counts, ctx=args.ctx,
                                         max_tokens=args.tokens, prompt="Write a long story about llamas.",
                                         extra_args=["-t", "1"])
                finally:
                    jar.close()
                rows.append({"model": m.id, "bytes": size, "layout": name, "host": host, "counts": counts,
                             "ok": r.check.ok, "problems": r.check.problems, "memory": r.memory,
                             "host_buffers": r.host_buffers, "tok_s": r.timings.get("predicted_per_second"),
                             "predicted_n": r.timings.get("predicted_n"), "system_info": r.system_info})
                print(f"  {name:<17} placement {'verified' if r.check.ok else 'DIFFERS'}  "
                      f"{r.timings.get('predicted_per_second', 0):.1f} tok/s", flush=True)
            path.unlink()
    return rows


def table(rows: list[dict]) -> str:
    out = ["| model | split | placement | device | weights est / reported MiB | KV est / reported | "
           "compute est / reported (error) | decode tok/s |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        first = True
        for where, mem in r["memory"].items():
            (we, wg), (ke, kg), (ce, cg) = mem["weights"], mem["kv"], mem["compute"]
            weights = f"{_mib(we)} / {_mib(wg)}"
            if where == "host" and _mib(wg) != _mib(we):
                weights += " ¹"
            out.append("| " + " | ".join([
                f"{r['model']} ({r['bytes'] / 1e6:.0f} MB)" if first else "",
                f"{r['layout']} ({r['host']}+{'+'.join(map(str, r['counts']))})" if first else "",
                ("yes" if r["ok"] else "**no**") if first else "",
                where, weights, f"{_mib(ke)} / {_mib(kg)}",
                f"{_mib(ce)} / {_mib(cg)} ({_err(ce, cg)})",
                f"{r['tok_s']:.1f}" if first and r["tok_s"] else ""]) + " |")
            first = False
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--embd", type=int, default=1024, help="width (a multiple of 256)")
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--tokens", type=int, default=48, help="tokens to generate per case")
    ap.add_argument("--only", nargs="*", help="model ids of the matrix to run")
    ap.add_argument("--splits", nargs="*", choices=list(layouts(3)), help="the splits to run (default: both)")
    ap.add_argument("--out", type=Path, help="the Markdown results (default: results.md here; smoke: a temp folder)")
    # One model of the matrix, the split with host buffers: the tests run every model, both
    # splits, on the real engine already.
    args = parse_args(ap, {"layers": 2, "embd": 256, "ctx": 512, "tokens": 4, "only": [MATRIX[0].id],
                           "splits": [next(iter(layouts(3)))]})
    args.out = args.out or results_folder(args.smoke, HERE) / "results.md"
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = asyncio.run(run(args))
    info = rows[0]["system_info"] if rows else ""
    text = (f"# Model matrix results\n\n`python bench/models/run.py {' '.join(sys.argv[1:])}` on {started}, "
            f"{platform.processor() or platform.machine()}, llama-server system_info: `{info}`\n\n"
            f"{table(rows)}\n\n¹ The host's reported weights are its memory-mapped file range (which spans "
            "tensors stored between its own, such as the output matrix that a worker holds) plus any "
            "buffer of weights repacked for this CPU; the estimate counts the bytes the host keeps.\n")
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1, default=list))
    print("\n" + table(rows))
    print(f"\nwrote {args.out}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
