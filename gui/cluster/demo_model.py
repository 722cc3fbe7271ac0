"""A demo model: a valid llama-architecture GGUF with random weights.

llama-server loads it and generates (nonsense) text from it, which is all a cluster needs to
show the whole loop — discovery, split, launch, chat, graphs — without a multi-gigabyte
download. Tests use small ones; benchmarks use ones large enough that compute matters.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HEAD_DIM = 64


@dataclass(frozen=True)
class DemoShape:
    """The hyper-parameters of a demo model.

    Attributes:
        layers: transformer blocks (llama.cpp's ``n_layer``).
        embd: embedding width; a multiple of 64 (the head size).
        ff: feed-forward width.
        vocab: number of tokens.
        ctx: trained context length written to the file.
        kv_heads: key/value heads (grouped-query attention when fewer than ``embd // 64``).
        f16: store the matrices as float16 (half the bytes) instead of float32.
    """

    layers: int = 8
    embd: int = 128
    ff: int = 352
    vocab: int = 2048
    ctx: int = 4096
    kv_heads: int | None = None
    f16: bool = True

    @property
    def heads(self) -> int:
        return self.embd // HEAD_DIM

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    def layer_params(self) -> int:
        """Weights in one block."""
        e, f, kv = self.embd, self.ff, self.n_kv_heads * HEAD_DIM
        return 2 * e + 2 * e * e + 2 * e * kv + 3 * e * f

    def file_bytes(self) -> int:
        """Approximate file size (weights only)."""
        mat = 2 if self.f16 else 4
        return self.layers * self.layer_params() * mat + 2 * self.embd * self.vocab * mat + self.embd * 4


def shape_for_size(target_bytes: int, layers: int = 8, f16: bool = True) -> DemoShape:
    """The demo shape with ``layers`` blocks whose file is closest to ``target_bytes``."""
    best = DemoShape(layers=layers, f16=f16)
    for embd in range(64, 8192 + 1, 64):
        ff = int(embd * 2.75) // 32 * 32
        vocab = max(2048, min(32000, embd * 8))
        cand = DemoShape(layers=layers, embd=embd, ff=ff, vocab=vocab, f16=f16)
        if abs(cand.file_bytes() - target_bytes) < abs(best.file_bytes() - target_bytes):
            best = cand
        if cand.file_bytes() > target_bytes:
            break
    return best


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)i?b?\s*$", re.I)


def parse_size(text: str) -> int:
    """``"5MB"``, ``"300M"``, ``"1.5G"``, ``"4096"`` → bytes. Raises ValueError naming the input."""
    m = _SIZE_RE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (use e.g. 5MB, 300MB, 1GB)")
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


def write_demo_model(path: str | os.PathLike, shape: DemoShape = DemoShape(), seed: int = 0) -> Path:
    """Write a demo GGUF to ``path`` atomically (temp file, then rename) and return the path."""
    import gguf  # heavy import; only needed here

    path = Path(path)
    if shape.embd % HEAD_DIM:
        raise ValueError(f"embd must be a multiple of {HEAD_DIM}, got {shape.embd}")
    if shape.layers < 1:
        raise ValueError(f"layers must be at least 1, got {shape.layers}")
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    dtype = np.float16 if shape.f16 else np.float32
    e, f, v = shape.embd, shape.ff, shape.vocab
    kv = shape.n_kv_heads * HEAD_DIM

    def mat(rows: int, cols: int) -> np.ndarray:
        # numpy shape is the reverse of ggml's [cols, rows]
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(dtype)

    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        w = gguf.GGUFWriter(tmp, "llama")
        w.add_name(f"herd-demo-{shape.layers}L-{e}E")
        w.add_context_length(shape.ctx)
        w.add_embedding_length(e)
        w.add_block_count(shape.layers)
        w.add_feed_forward_length(f)
        w.add_head_count(shape.heads)
        w.add_head_count_kv(shape.n_kv_heads)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_rope_freq_base(10000.0)
        w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if shape.f16 else gguf.LlamaFileType.ALL_F32)
        w.add_tokenizer_model("test")
        w.add_token_list([f"t{i}" for i in range(v)])
        w.add_tensor("token_embd.weight", mat(v, e))
        w.add_tensor("output_norm.weight", np.ones(e, dtype=np.float32))
        w.add_tensor("output.weight", mat(v, e))
        for i in range(shape.layers):
            p = f"blk.{i}."
            w.add_tensor(p + "attn_norm.weight", np.ones(e, dtype=np.float32))
            w.add_tensor(p + "attn_q.weight", mat(e, e))
            w.add_tensor(p + "attn_k.weight", mat(kv, e))
            w.add_tensor(p + "attn_v.weight", mat(kv, e))
            w.add_tensor(p + "attn_output.weight", mat(e, e))
            w.add_tensor(p + "ffn_norm.weight", np.ones(e, dtype=np.float32))
            w.add_tensor(p + "ffn_gate.weight", mat(f, e))
            w.add_tensor(p + "ffn_up.weight", mat(f, e))
            w.add_tensor(p + "ffn_down.weight", mat(e, f))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
