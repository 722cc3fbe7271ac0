"""Demo models: valid GGUF files with random weights, in the shapes and quant types people run.

llama-server loads them and generates (nonsense) text, which is all a cluster needs to show the
whole loop — discovery, split, launch, chat, graphs — without a multi-gigabyte download. Tests
use small ones; benchmarks use ones of several GB.

The matrix a :class:`DemoShape` spans:

* **architecture** — ``llama`` (Llama 2/3, Mistral), ``qwen2`` (attention biases on q/k/v),
  ``qwen3`` (RMS norms on the q and k heads, a head size of its own), ``qwen3moe`` (Qwen3 with
  a mixture of experts in place of the feed-forward: a router and ``experts`` expert matrices
  per block, ``experts_used`` of them read per token), ``gemma3`` (five sliding-window layers
  to one global, q/k norms, norms after attention and feed-forward) and ``gpt-oss`` (OpenAI's
  gpt-oss-20b/120b: a mixture of experts with a biased router and per-expert biases, biases on
  q/k/v/o, an attention sink per head, every other layer windowed over 128 tokens, no norm of
  its own before the experts but one after attention);
* **attention** — grouped-query attention with ``kv_heads`` below the head count; queries wider
  than the embedding with a ``head_count`` above ``embd / head_dim`` (gpt-oss);
* **tied embeddings** — no ``output.weight``, the token embeddings double as the output matrix
  (llama.cpp then loads them twice);
* **quant type** — ``F32``, ``F16``, ``Q8_0``, ``Q4_0``, ``Q4_1``, ``Q6_K`` and the mixes llama-quantize
  makes for ``Q4_K_M``, ``Q5_K_M`` and ``MXFP4_MOE`` (gpt-oss's own: experts in MXFP4, the other
  matrices Q8_0) (:func:`tensor_type`): blocks with valid scales and random
  quants, so llama.cpp's kernels — including the CPU repack paths (AVX2 ``CPU_REPACK``, Intel
  ``AMX``) — run on them as on a real file;
* **tokenizer** — the tiny ``test`` one (ids hashed from text), or a real vocabulary copied
  from one of llama.cpp's vocab-only GGUFs (``ggml-vocab-qwen2.gguf``,
  ``ggml-vocab-llama-bpe.gguf``, kept by the engine manager): real special tokens, EOS and a
  chat template, so replies are words (Chinese ones too with the Qwen vocabulary).

Files are written tensor by tensor (memory stays at one tensor, whatever the file's size) into a
temporary file that is renamed into place only when complete.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

HEAD_DIM = 64

ARCHITECTURES = ("llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "gpt-oss")
#: Architectures whose blocks hold a mixture of experts instead of one feed-forward.
MOE_ARCHITECTURES = ("qwen3moe", "gpt-oss")
#: The attention window of a sliding-window architecture when the shape names none (Gemma 3's
#: smallest models use 512 tokens; gpt-oss-20b and -120b both use 128).
DEFAULT_WINDOW = {"gemma3": 512, "gpt-oss": 128}
#: The quant types ``--type`` offers; ``Q4_K_M``, ``Q5_K_M`` and ``MXFP4_MOE`` are mixes
#: (:func:`tensor_type`).
QUANT_TYPES = ("F32", "F16", "Q8_0", "Q4_0", "Q4_1", "Q6_K", "Q5_K_M", "Q4_K_M", "MXFP4_MOE")
#: The block size of each quantized tensor type, in weights, and its bytes per block.
_BLOCKS = {"Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q4_K": (256, 144), "Q5_K": (256, 176),
           "Q6_K": (256, 210), "MXFP4": (32, 17)}
#: The rope frequency base of each architecture's real files (1e6 when not listed).
_ROPE_BASE = {"llama": 10000.0, "gpt-oss": 150000.0}
#: ``general.file_type`` (llama.cpp's ``llama_ftype``) of each choice.
_FILE_TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18,
               "MXFP4_MOE": 38}

#: Chat template for a Llama 3 vocabulary (llama.cpp's vocab file has none): the header/eot
#: format Llama 3 instruct models use, without the tool-calling parts.
LLAMA3_CHAT_TEMPLATE = (
    "{{- bos_token }}{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim"
    " + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)


@dataclass(frozen=True)
class DemoShape:
    """The hyper-parameters of a demo model.

    Attributes:
        layers: transformer blocks (llama.cpp's ``n_layer``).
        embd: embedding width; a multiple of ``head_dim`` (and of 256 for K-quant types).
        ff: feed-forward width (a multiple of 256 for K-quant types).
        vocab: number of tokens (ignored when a real tokenizer is copied in: its size wins).
        ctx: trained context length written to the file.
        kv_heads: key/value heads (grouped-query attention when fewer than the heads).
        f16: store the matrices as float16 instead of float32 (only with ``quant`` F16/F32).
        arch: one of :data:`ARCHITECTURES`.
        quant: one of :data:`QUANT_TYPES`.
        tied: no ``output.weight``: the token embeddings are the output matrix too.
        head_dim: size of one attention head.
        window: the sliding window of the windowed layers, in tokens (None: the
            architecture's usual one, :data:`DEFAULT_WINDOW`; none for the others).
        experts: experts per block of a mixture-of-experts architecture.
        experts_used: experts each token is routed to.
        expert_ff: the feed-forward width of one expert (0: ``ff``).
        head_count: attention heads (None: ``embd / head_dim``). More makes the queries wider
            than the embedding, as gpt-oss's 64 heads of 64 on an embedding of 2880.
    """

    layers: int = 8
    embd: int = 128
    ff: int = 352
    vocab: int = 2048
    ctx: int = 4096
    kv_heads: int | None = None
    f16: bool = True
    arch: str = "llama"
    quant: str = "F16"
    tied: bool = False
    head_dim: int = HEAD_DIM
    window: int | None = None
    experts: int = 8
    experts_used: int = 2
    expert_ff: int = 0
    head_count: int | None = None

    @property
    def is_moe(self) -> bool:
        return self.arch in MOE_ARCHITECTURES

    @property
    def sliding_window(self) -> int:
        """The window written to the file (0: every layer attends over the whole context)."""
        return self.window if self.window is not None else DEFAULT_WINDOW.get(self.arch, 0)

    @property
    def heads(self) -> int:
        return self.head_count or self.embd // self.head_dim

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def quant_type(self) -> str:
        """The quant type with the ``f16`` flag folded in (``F32`` when ``f16`` is off)."""
        return "F32" if self.quant == "F16" and not self.f16 else self.quant

    def tensors(self, vocab: int | None = None) -> list[tuple[str, tuple[int, ...]]]:
        """Every tensor as ``(name, ggml shape)`` in file order (``ne0`` first)."""
        e, f, v = self.embd, self.ff, vocab or self.vocab
        q, kv, d = self.heads * self.head_dim, self.n_kv_heads * self.head_dim, self.head_dim
        out: list[tuple[str, tuple[int, ...]]] = [("token_embd.weight", (e, v)), ("output_norm.weight", (e,))]
        if not self.tied:
            out.append(("output.weight", (e, v)))
        for i in range(self.layers):
            p = f"blk.{i}."
            out += [(p + "attn_norm.weight", (e,)), (p + "attn_q.weight", (e, q)),
                    (p + "attn_k.weight", (e, kv)), (p + "attn_v.weight", (e, kv))]
            if self.arch in ("qwen2", "gpt-oss"):
                out += [(p + "attn_q.bias", (q,)), (p + "attn_k.bias", (kv,)), (p + "attn_v.bias", (kv,))]
            if self.arch in ("qwen3", "qwen3moe", "gemma3"):
                out += [(p + "attn_q_norm.weight", (d,)), (p + "attn_k_norm.weight", (d,))]
            out.append((p + "attn_output.weight", (q, e)))
            if self.arch == "gpt-oss":
                # its output bias, one sink logit per head, and the norm after attention that
                # stands in for a norm before the experts (it has no ffn_norm)
                out += [(p + "attn_output.bias", (e,)), (p + "attn_sinks.weight", (self.heads,)),
                        (p + "post_attention_norm.weight", (e,))]
            elif self.arch == "gemma3":
                out += [(p + "post_attention_norm.weight", (e,)), (p + "ffn_norm.weight", (e,))]
            else:
                out.append((p + "ffn_norm.weight", (e,)))
            if self.is_moe:
                x, fx = self.experts, self.expert_ff or f
                biased = self.arch == "gpt-oss"  # a bias on the router and on every expert
                out.append((p + "ffn_gate_inp.weight", (e, x)))
                if biased:
                    out.append((p + "ffn_gate_inp.bias", (x,)))
                for kind, dims, bias in (("gate", (e, fx, x), (fx, x)), ("up", (e, fx, x), (fx, x)),
                                         ("down", (fx, e, x), (e, x))):
                    out.append((p + f"ffn_{kind}_exps.weight", dims))
                    if biased:
                        out.append((p + f"ffn_{kind}_exps.bias", bias))
            else:
                out += [(p + "ffn_gate.weight", (e, f)), (p + "ffn_up.weight", (e, f)), (p + "ffn_down.weight", (f, e))]
            if self.arch == "gemma3":
                out.append((p + "post_ffw_norm.weight", (e,)))
        return out

    def file_bytes(self, vocab: int | None = None) -> int:
        """The size of the tensor data (the header adds a few KB, a real vocabulary a few MB)."""
        return sum(tensor_bytes(tensor_type(name, shape, self), shape) for name, shape in self.tensors(vocab))

    def layer_params(self) -> int:
        """Weights in one block."""
        return sum(int(np.prod(s)) for n, s in self.tensors() if n.startswith("blk.0."))


def _use_more_bits(i: int, n: int) -> bool:
    """llama-quantize's choice of the blocks whose attn_v and ffn_down get more bits in the _M
    mixes (src/llama-quant.cpp ``use_more_bits``)."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


_BLK_RE = re.compile(r"^blk\.(\d+)\.")


def tensor_type(name: str, shape: tuple[int, ...], shape_of: DemoShape) -> str:
    """The ggml type llama-quantize would give tensor ``name`` for the shape's quant type.

    1-D tensors (norms, sinks) and biases (the experts' are 2-D) stay F32. ``Q4_K_M``/``Q5_K_M``:
    Q4_K/Q5_K, with Q6_K for the output matrix (or the token embeddings when they are tied) and
    for attn_v and ffn_down in the blocks :func:`_use_more_bits` picks. ``MXFP4_MOE``: the expert
    matrices (3-D) in MXFP4, every other matrix Q8_0 (src/llama-quant.cpp). A K-quant needs rows
    that are a multiple of 256, MXFP4 and Q8_0 of 32.
    """
    q = shape_of.quant_type
    if len(shape) == 1 or name.endswith((".bias", "ffn_gate_inp.weight")):  # the router stays F32 too
        return "F32"
    if q in ("F32", "F16", "Q8_0", "Q4_0", "Q4_1", "Q6_K"):
        return q
    if q == "MXFP4_MOE":
        return "MXFP4" if len(shape) == 3 else "Q8_0"
    base = {"Q4_K_M": "Q4_K", "Q5_K_M": "Q5_K"}[q]
    output_matrix = name == "output.weight" or (shape_of.tied and name == "token_embd.weight")
    m = _BLK_RE.match(name)
    more = m is not None and (name.endswith(("attn_v.weight", "ffn_down.weight", "ffn_down_exps.weight"))
                              and _use_more_bits(int(m.group(1)), shape_of.layers))
    return "Q6_K" if output_matrix or more else base


def tensor_bytes(ggml_type: str, shape: tuple[int, ...]) -> int:
    """Bytes of a tensor of ``ggml_type`` and ggml ``shape``."""
    n = int(np.prod(shape))
    if ggml_type == "F32":
        return 4 * n
    if ggml_type == "F16":
        return 2 * n
    per, nbytes = _BLOCKS[ggml_type]
    return n // per * nbytes


def shape_for_size(target_bytes: int, layers: int = 8, f16: bool = True, vocab: int | None = None,
                   **kw) -> DemoShape:
    """The demo shape with ``layers`` blocks whose file is closest to ``target_bytes``.

    ``vocab`` fixes the vocabulary (a real tokenizer's size); ``kw`` sets the other fields
    (``arch``, ``quant``, ``tied``, ``kv_heads`` …). The widths step by 256 for K-quant types,
    whose rows must be multiples of 256.
    """
    quant = kw.get("quant", "F16")
    step = 256 if quant.endswith(("_K", "_K_M")) else 64
    best = None
    for embd in range(step, 16384 + 1, step):
        ff = max(step, int(embd * 2.75) // step * step)
        cand = DemoShape(layers=layers, embd=embd, ff=ff, vocab=vocab or max(2048, min(32000, embd * 8)),
                         f16=f16, **kw)
        if best is None or abs(cand.file_bytes() - target_bytes) < abs(best.file_bytes() - target_bytes):
            best = cand
        if cand.file_bytes() > target_bytes:
            break
    assert best is not None
    return best


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)i?b?\s*$", re.I)


def parse_size(text: str) -> int:
    """``"5MB"``, ``"300M"``, ``"1.5G"``, ``"4096"`` → bytes. Raises ValueError naming the input."""
    m = _SIZE_RE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (use e.g. 5MB, 300MB, 1GB)")
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


def check_shape(shape: DemoShape) -> None:
    """Raise ValueError naming what is wrong with ``shape`` (before anything is written)."""
    if shape.layers < 1:
        raise ValueError(f"layers must be at least 1, got {shape.layers}")
    if shape.arch not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {shape.arch!r}: use one of {', '.join(ARCHITECTURES)}")
    if shape.quant not in QUANT_TYPES:
        raise ValueError(f"unknown quant type {shape.quant!r}: use one of {', '.join(QUANT_TYPES)}")
    if shape.is_moe and not 1 <= shape.experts_used <= shape.experts:
        raise ValueError(f"experts_used must be between 1 and experts ({shape.experts}), got {shape.experts_used}")
    if shape.window is not None and shape.window < 0:
        raise ValueError(f"window must be a number of tokens (0 or more), got {shape.window}")
    if shape.head_dim < 16 or shape.head_dim % 16:
        raise ValueError(f"head_dim must be a multiple of 16, got {shape.head_dim}")
    if shape.embd % HEAD_DIM or shape.embd % shape.head_dim:
        raise ValueError(f"embd must be a multiple of {max(HEAD_DIM, shape.head_dim)}, got {shape.embd}")
    if shape.head_count is not None and shape.head_count < 1:
        raise ValueError(f"head_count must be at least 1, got {shape.head_count}")
    if shape.n_kv_heads < 1 or shape.heads % shape.n_kv_heads:
        raise ValueError(f"kv_heads must divide the {shape.heads} attention heads, got {shape.kv_heads}")
    for name, dims in shape.tensors():
        ggml_type = tensor_type(name, dims, shape)
        per = _BLOCKS.get(ggml_type, (1, 0))[0]
        if dims[0] % per:
            raise ValueError(f"{ggml_type} stores rows in blocks of {per} weights, so the rows of {name} "
                             f"({dims[0]} wide) must be a multiple of {per}: choose widths that are")


# --- the tokenizer ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Tokenizer:
    """The ``tokenizer.*`` keys to write: ``(key, value, GGUF value type, array item type)``.

    Attributes:
        keys: the keys, copied from a vocab file or made up for the ``test`` tokenizer.
        n_tokens: the vocabulary size (rows of the token embeddings).
        name: where it came from (``test`` or the vocab file's stem).
    """

    keys: tuple
    n_tokens: int
    name: str


def test_tokenizer(n_tokens: int) -> Tokenizer:
    """llama.cpp's ``test`` tokenizer: ids hashed from text, no BOS/EOS (send ``max_tokens``)."""
    import gguf

    T = gguf.GGUFValueType
    return Tokenizer((("tokenizer.ggml.model", "test", T.STRING, None),
                      ("tokenizer.ggml.tokens", [f"t{i}" for i in range(n_tokens)], T.ARRAY, T.STRING)),
                     n_tokens, "test")


def vocab_tokenizer(vocab_file: str | os.PathLike) -> Tokenizer:
    """Every ``tokenizer.*`` key of a vocab-only GGUF (llama.cpp's ``models/ggml-vocab-*.gguf``),
    plus the Llama 3 chat template for a Llama 3 vocabulary that has none."""
    import gguf

    path = Path(vocab_file)
    try:
        reader = gguf.GGUFReader(path, "r")
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable vocab GGUF ({e})") from None
    keys = []
    n_tokens = 0
    for key, f in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        keys.append((key, f.contents(), vtype, sub))
        if key == "tokenizer.ggml.tokens":
            n_tokens = len(f.data)
    if not n_tokens:
        raise ValueError(f"{path}: has no tokenizer.ggml.tokens")
    if (not any(k == "tokenizer.chat_template" for k, *_ in keys)
            and any(k == "tokenizer.ggml.pre" and v == "llama-bpe" for k, v, *_ in keys)):
        keys.append(("tokenizer.chat_template", LLAMA3_CHAT_TEMPLATE, gguf.GGUFValueType.STRING, None))
    return Tokenizer(tuple(keys), n_tokens, path.stem.removeprefix("ggml-vocab-"))


# --- random weights of every type -------------------------------------------------------------

def _f16_field(blocks: np.ndarray, at: int, values: np.ndarray) -> None:
    """Write float16 ``values`` (one per block) at byte ``at`` of each block."""
    blocks[:, at:at + 2] = values.astype(np.float16).view(np.uint8).reshape(-1, 2)


def random_tensor(ggml_type: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random weights of about ±0.02 for a tensor of ``ggml_type``; quantized types come back as
    their raw block bytes (uint8, one row per tensor row) with valid, finite scales."""
    n = int(np.prod(shape))
    if ggml_type in ("F32", "F16"):
        dtype = np.float32 if ggml_type == "F32" else np.float16
        a = rng.standard_normal(n, dtype=np.float32) * 0.02
        return a.astype(dtype).reshape(tuple(reversed(shape)))
    per, nbytes = _BLOCKS[ggml_type]
    nblocks = n // per
    blocks = np.frombuffer(rng.bytes(nblocks * nbytes), dtype=np.uint8).reshape(nblocks, nbytes).copy()
    jitter = rng.uniform(0.5, 1.5, nblocks).astype(np.float32)
    # Scales chosen so that a weight is roughly N(0, 0.02): weight = d × (q − offset) per type.
    if ggml_type == "Q8_0":      # d, 32 × int8
        _f16_field(blocks, 0, 2.7e-4 * jitter)
    elif ggml_type == "Q4_0":    # d, 16 bytes of nibbles (q − 8)
        _f16_field(blocks, 0, 4.3e-3 * jitter)
    elif ggml_type == "Q4_1":    # d, m, 16 bytes of nibbles: d × q + m, with m = −8 d
        _f16_field(blocks, 0, 4.3e-3 * jitter)
        _f16_field(blocks, 2, -8 * 4.3e-3 * jitter)
    elif ggml_type == "Q4_K":    # d, dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles
        _f16_field(blocks, 0, 1.2e-4 * jitter)
        _f16_field(blocks, 2, 0.9e-3 * jitter)
    elif ggml_type == "Q5_K":    # d, dmin, scales, 32 bytes of high bits, 128 bytes of nibbles
        _f16_field(blocks, 0, 0.6e-4 * jitter)
        _f16_field(blocks, 2, 0.9e-3 * jitter)
    elif ggml_type == "Q6_K":    # 128 + 64 bytes of 6-bit quants, 16 int8 scales, then d
        _f16_field(blocks, 208, 1.5e-5 * jitter)
    elif ggml_type == "MXFP4":   # an E8M0 exponent e, 16 bytes of nibbles indexing ±{0 … 12}
        # weight = 2^(e − 128) × value; the values' spread is about 5.9, so e ≈ 120 gives 0.02
        blocks[:, 0] = rng.integers(119, 122, nblocks, dtype=np.uint8)
    rows = int(np.prod(shape[1:]))
    return blocks.reshape(rows, -1)


def _norm_tensor(shape: tuple[int, ...]) -> np.ndarray:
    return np.ones(shape[0], dtype=np.float32)


def write_demo_model(path: str | os.PathLike, shape: DemoShape = DemoShape(), seed: int = 0, *,
                     tokenizer: Tokenizer | None = None,
                     progress: Callable[[int, int], None] | None = None) -> Path:
    """Write a demo GGUF to ``path`` atomically (temp file, then rename) and return the path.

    ``tokenizer`` (default: the ``test`` one with ``shape.vocab`` tokens) sets the vocabulary;
    ``progress(done_bytes, total_bytes)`` is called after each tensor.

    Raises:
        ValueError: the shape is not one llama.cpp can load (the message says what to change).
        OSError: the file cannot be written (nothing is left behind).
    """
    import gguf

    path = Path(path)
    check_shape(shape)
    tok = tokenizer or test_tokenizer(shape.vocab)
    tensors = [(name, dims, tensor_type(name, dims, shape)) for name, dims in shape.tensors(tok.n_tokens)]
    total = sum(tensor_bytes(t, d) for _, d, t in tensors)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    arch = shape.arch
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        w = gguf.GGUFWriter(tmp, arch)
        kind = "".join(f"-{x}" for x, usual in ((arch, "llama"), (shape.quant_type, "F16")) if x != usual)
        w.add_name(f"herd-demo-{shape.layers}L-{shape.embd}E{kind}")
        w.add_context_length(shape.ctx)
        w.add_embedding_length(shape.embd)
        w.add_block_count(shape.layers)
        # gpt-oss has no dense feed-forward: its files give the experts' width here too
        w.add_feed_forward_length(shape.expert_ff or shape.ff if arch == "gpt-oss" else shape.ff)
        w.add_head_count(shape.heads)
        w.add_head_count_kv(shape.n_kv_heads)
        w.add_key_length(shape.head_dim)
        w.add_value_length(shape.head_dim)
        w.add_rope_dimension_count(shape.head_dim)
        w.add_layer_norm_rms_eps(1e-5 if arch in ("llama", "gpt-oss") else 1e-6)
        if shape.sliding_window:
            # the window only, as gpt-oss's real files have it: llama.cpp chooses the windowed
            # layers itself (gemma3: five of every six; gpt-oss: every other one, from the first)
            w.add_sliding_window(shape.sliding_window)
        if shape.is_moe:
            w.add_expert_count(shape.experts)
            w.add_expert_used_count(shape.experts_used)
            w.add_expert_feed_forward_length(shape.expert_ff or shape.ff)
        w.add_rope_freq_base(_ROPE_BASE.get(arch, 1e6))
        w.add_file_type(_FILE_TYPES[shape.quant_type])
        for key, value, vtype, sub in tok.keys:
            w.add_key_value(key, value, vtype, sub_type=sub)
        for name, dims, ggml_type in tensors:
            nbytes = tensor_bytes(ggml_type, dims)
            qtype = gguf.GGMLQuantizationType[ggml_type]
            if ggml_type in ("F32", "F16"):
                dtype = np.float32 if ggml_type == "F32" else np.float16
                w.add_tensor_info(name, tuple(reversed(dims)), np.dtype(dtype), nbytes)
            else:
                byte_shape = gguf.quant_shape_to_byte_shape(tuple(reversed(dims)), qtype)
                w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=qtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        done = 0
        for data in _tensor_data(tensors, rng):
            w.write_tensor_data(data)
            done += data.nbytes
            if progress is not None:
                progress(done, total)
        w.close()
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a model file is for every user to read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _tensor_data(tensors, rng: np.random.Generator) -> Iterator[np.ndarray]:
    for name, dims, ggml_type in tensors:
        if len(dims) == 1:
            # Norms at 1 keep the activations in range; biases are small random values.
            yield (_norm_tensor(dims) if name.endswith("norm.weight")
                   else (rng.standard_normal(dims[0], dtype=np.float32) * 0.02))
        else:
            yield random_tensor(ggml_type, dims, rng)


def with_vocab(shape: DemoShape, tokenizer: Tokenizer) -> DemoShape:
    """``shape`` with its vocabulary size set to the tokenizer's."""
    return replace(shape, vocab=tokenizer.n_tokens)
