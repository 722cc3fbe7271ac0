"""GGUF inspection: real files written with the gguf package, and broken ones made from them."""

from __future__ import annotations

import hashlib

import gguf
import numpy as np
import pytest

from gui.cluster.llama.model import ModelError, file_sha256, inspect_model
from gui.cluster.llama.random_model import DemoShape, write_demo_model


def test_demo_model_facts_and_slot_bytes(demo_model):
    shape = DemoShape(layers=8)
    info = inspect_model(demo_model)
    assert info.architecture == "llama"
    assert info.name == "herd-demo-8L-128E"
    assert info.n_layer == 8 and info.n_slots == 9
    assert info.context_length == shape.ctx
    assert info.embedding_length == shape.embd and info.feed_forward_length == shape.ff
    assert info.n_head == shape.heads and info.n_head_kv == (shape.n_kv_heads,) * 8
    assert info.head_dim_k == info.head_dim_v == 64
    assert info.vocab_size == shape.vocab
    assert info.quantization == "F16" and info.file_type == 1
    # One block: norms in f32, matrices in f16 — computed from the shape, not from the reader.
    e, f, kv = shape.embd, shape.ff, shape.n_kv_heads * 64
    block = 2 * e * 4 + (2 * e * e + 2 * e * kv + 3 * e * f) * 2
    assert info.slot_bytes[:8] == (block,) * 8
    assert info.output_bytes == e * 4 + e * shape.vocab * 2
    assert info.input_bytes == info.token_embd_bytes == e * shape.vocab * 2
    assert not info.tied_embeddings and info.output_duplicate_bytes == 0
    assert info.tensor_bytes == sum(info.slot_bytes) + info.input_bytes
    assert info.tensor_bytes < info.file_bytes == demo_model.stat().st_size


def test_kv_cache_size_follows_heads_and_context(tmp_path):
    shape = DemoShape(layers=2, embd=256, kv_heads=1)  # grouped-query: 4 heads, 1 KV head
    info = inspect_model(write_demo_model(tmp_path / "gqa.gguf", shape))
    assert info.n_head == 4 and info.n_head_kv == (1, 1)
    assert info.kv_bytes_per_layer(1024) == 2 * 1024 * 1 * 64 * 2
    # llama-server pads the context up to 256 cells: `-c 1000` holds 1024 (#34)
    assert info.kv_bytes_per_layer(1000) == info.kv_bytes_per_layer(1024)
    assert info.kv_bytes(1000, range(3)) == 2 * info.kv_bytes_per_layer(1000)  # slot 2 = output
    with pytest.raises(ValueError, match="negative"):
        info.kv_bytes_per_layer(-1)


@pytest.mark.parametrize("arch, pattern, windowed", [
    # llama.cpp's own pattern per architecture: all but the last of every `period` layers
    ("gemma3", None, [True] * 5 + [False] + [True] * 5 + [False]),
    ("gpt-oss", None, [True, False] * 6),
    ("cohere2", None, [True, True, True, False] * 3),
    # the file's period overrides it, and a list names each layer
    ("gemma3", 3, [True, True, False] * 4),
    ("gemma3", [1, 0] * 6, [True, False] * 6),
    # an architecture llama.cpp runs with no window (Qwen2's files may name one): every layer full
    ("qwen2", None, [False] * 12),
])
def test_sliding_window_layers_as_llama_cpp_chooses_them(tmp_path, arch, pattern, windowed):
    info = inspect_model(_write(tmp_path / "m.gguf", arch=arch, block_count=12, window=512, pattern=pattern))
    assert [info.is_windowed(i) for i in range(12)] == windowed
    # llama-server's 4 sequences of 512 tokens plus a micro-batch of 512, padded to 256, at most
    # the context; the global layers get the whole context
    for i in range(12):
        assert info.kv_cells(32768, i) == (2560 if windowed[i] else 32768)
        # a context is padded up to 256 cells: llama-server's `-c 1000` allocates 1024 (#34)
        assert info.kv_cells(1000, i) == 1024
    assert info.kv_bytes_per_layer(32768) >= max(info.kv_bytes_per_layer(32768, i) for i in range(12))


def test_a_window_of_no_tokens_is_no_window(tmp_path):
    info = inspect_model(_write(tmp_path / "m.gguf", arch="gemma3", block_count=6, window=0))
    assert info.sliding_window == 0 and not any(info.is_windowed(i) for i in range(6))


def _write(path, arch="llama", block_count=2, tie=False, heads=2, extra_block=False, window=None, pattern=None):
    """A minimal GGUF of our own making, to vary one thing at a time."""
    w = gguf.GGUFWriter(str(path), arch)
    if window is not None:
        w.add_sliding_window(window)
    if isinstance(pattern, list):
        w.add_array(f"{arch}.attention.sliding_window_pattern", pattern)
    elif pattern is not None:
        w.add_uint32(f"{arch}.attention.sliding_window_pattern", pattern)
    w.add_context_length(128)
    w.add_embedding_length(128)
    if block_count is not None:
        w.add_block_count(block_count)
    if heads is not None:
        w.add_head_count(heads)
    w.add_tensor("token_embd.weight", np.zeros((64, 128), dtype=np.float32))
    w.add_tensor("output_norm.weight", np.zeros(128, dtype=np.float32))
    if not tie:
        w.add_tensor("output.weight", np.zeros((64, 128), dtype=np.float32))
    for i in range((block_count or 1) + (1 if extra_block else 0)):
        w.add_tensor(f"blk.{i}.attn_q.weight", np.zeros((128, 128), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_tied_embeddings_put_a_copy_of_token_embd_in_the_output_slot(tmp_path):
    info = inspect_model(_write(tmp_path / "tied.gguf", tie=True))
    assert info.tied_embeddings
    assert info.token_embd_bytes == 64 * 128 * 4
    assert info.output_bytes == 128 * 4 + info.token_embd_bytes
    assert info.output_duplicate_bytes == info.token_embd_bytes
    assert info.quantization in ("F32", "F16")  # no file_type key: the dominant tensor type


def test_not_a_gguf(tmp_path):
    p = tmp_path / "notes.gguf"
    p.write_bytes(b"PK\x03\x04 this is a zip file")
    with pytest.raises(ModelError, match=r"notes.gguf: not a GGUF file"):
        inspect_model(p)


def test_missing_file(tmp_path):
    with pytest.raises(ModelError, match="cannot read the model file"):
        inspect_model(tmp_path / "nope.gguf")


@pytest.mark.parametrize("keep", [0.5, 0.999, 0.001])
def test_truncated_file(demo_model, tmp_path, keep):
    data = demo_model.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:max(8, int(len(data) * keep))])
    with pytest.raises(ModelError, match=r"cut.gguf: truncated"):
        inspect_model(cut)


def test_corrupt_header(demo_model, tmp_path):
    data = bytearray(demo_model.read_bytes())
    data[8:16] = (2**40).to_bytes(8, "little")  # absurd tensor count
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"bad.gguf: truncated or corrupt"):
        inspect_model(bad)


def test_missing_block_count(tmp_path):
    with pytest.raises(ModelError, match=r"no llama.block_count"):
        inspect_model(_write(tmp_path / "m.gguf", block_count=None))


@pytest.mark.parametrize("arch, message", [
    ("bert", "unsupported architecture 'bert'"),
    ("not-a-model", "unsupported architecture 'not-a-model'"),
])
def test_unsupported_architecture(tmp_path, arch, message):
    with pytest.raises(ModelError, match=message):
        inspect_model(_write(tmp_path / "m.gguf", arch=arch))


def test_no_attention_heads_is_unsupported(tmp_path):
    with pytest.raises(ModelError, match="no attention heads"):
        inspect_model(_write(tmp_path / "m.gguf", heads=None))


def test_block_beyond_block_count(tmp_path):
    with pytest.raises(ModelError, match=r"blk.2.attn_q.weight belongs to block 2"):
        inspect_model(_write(tmp_path / "m.gguf", extra_block=True))


def test_sha256_streams_and_reports_progress(demo_model):
    seen = []
    digest = file_sha256(demo_model, chunk_bytes=1 << 20, progress=lambda d, t: seen.append((d, t)))
    assert digest == hashlib.sha256(demo_model.read_bytes()).hexdigest()
    size = demo_model.stat().st_size
    assert seen[-1] == (size, size) and len(seen) == -(-size // (1 << 20))


def test_a_token_reads_the_routed_share_of_the_experts(tmp_path):
    from gui.cluster.llama.random_model import tensor_bytes, tensor_type
    from gui.cluster.planning.cost_model import DeviceSpeed

    shape = DemoShape(layers=3, embd=256, ff=512, kv_heads=1, arch="qwen3moe", quant="Q4_K_M", tied=True,
                      experts=8, experts_used=2, expert_ff=256)
    info = inspect_model(write_demo_model(tmp_path / "moe.gguf", shape))
    assert info.is_moe and (info.expert_count, info.expert_used_count) == (8, 2)
    for i in range(shape.layers):
        block = [(n, d) for n, d in shape.tensors() if n.startswith(f"blk.{i}.")]
        experts = sum(tensor_bytes(tensor_type(n, d, shape), d) for n, d in block if "_exps." in n)
        assert experts > 0 and info.slot_bytes[i] == sum(tensor_bytes(tensor_type(n, d, shape), d) for n, d in block)
        assert info.active_slot_bytes[i] == info.slot_bytes[i] - experts * 6 // 8  # 2 of 8 read
    assert info.active_slot_bytes[-1] == info.slot_bytes[-1]  # the output layer has no experts
    # a decode step's time follows what a token reads, not what the slot holds
    speed = DeviceSpeed.from_bytes(info, 1e-9)
    assert speed.slot_s[0] == pytest.approx(info.active_slot_bytes[0] * 1e-9)
    # a dense model reads all of it
    dense = inspect_model(write_demo_model(tmp_path / "dense.gguf", DemoShape(layers=3, embd=256, ff=512)))
    assert not dense.is_moe and dense.active_slot_bytes == dense.slot_bytes



def test_gpt_oss_is_read_with_its_experts_window_and_sinks(tmp_path):
    """gpt-oss: every other block windowed from the first (llama.cpp's own period of 2, the file
    names only the window), its experts and their biases counted as expert bytes, MXFP4 blocks
    of 17 bytes per 32 weights, the sinks seen — bytes computed from the shape, not the reader."""
    shape = DemoShape(layers=4, embd=256, ff=256, head_count=8, kv_heads=1, arch="gpt-oss", quant="MXFP4_MOE",
                      experts=4, experts_used=2, expert_ff=128)
    info = inspect_model(write_demo_model(tmp_path / "g.gguf", shape))
    assert (info.architecture, info.quantization) == ("gpt-oss", "MXFP4_MOE")
    assert info.is_moe and (info.expert_count, info.expert_used_count) == (4, 2)
    assert info.sliding_window == 128 and info.swa_layers == (True, False, True, False)
    assert (info.n_head, info.n_head_kv, info.head_dim_k) == (8, (1,) * 4, 64)
    assert info.kv_cells(32768, 0) == 1024 and info.kv_cells(32768, 1) == 32768
    assert info.attention_sinks and info.summary()["attention_sinks"] is True
    e, q, kv, x, fx = 256, 512, 64, 4, 128   # 8 query heads of 64: wider than the embedding
    experts = 3 * e * fx * x * 17 // 32 + (2 * fx * x + e * x) * 4   # MXFP4 matrices, f32 biases
    attention = (e * q + 2 * e * kv + q * e) * 34 // 32                  # Q8_0
    small = (2 * e + q + 2 * kv + e + 8 + e * x + x) * 4                  # norms, biases, sinks, router
    assert info.expert_slot_bytes[:4] == (experts,) * 4
    assert info.slot_bytes[:4] == (experts + attention + small,) * 4
    assert not inspect_model(write_demo_model(tmp_path / "d.gguf", DemoShape(layers=2))).attention_sinks
