"""Demo model generator: valid GGUF files of the asked shape, atomic writes, clear errors."""

from __future__ import annotations

import subprocess
import sys

import gguf
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gui.cluster.llama.random_model import DemoShape, parse_size, shape_for_size, write_demo_model


def _field(reader: gguf.GGUFReader, key: str):
    f = reader.fields[key]
    return f.parts[f.data[0]][0]


def test_written_file_has_the_asked_shape(tmp_path):
    shape = DemoShape(layers=5, embd=192, ff=512, vocab=3000, kv_heads=1)
    path = write_demo_model(tmp_path / "m.gguf", shape)
    r = gguf.GGUFReader(path)
    assert _field(r, "llama.block_count") == 5
    assert _field(r, "llama.embedding_length") == 192
    assert _field(r, "llama.attention.head_count") == 3
    assert _field(r, "llama.attention.head_count_kv") == 1
    names = {t.name for t in r.tensors}
    assert {f"blk.{i}.ffn_down.weight" for i in range(5)} <= names
    assert "blk.5.attn_q.weight" not in names
    k = next(t for t in r.tensors if t.name == "blk.0.attn_k.weight")
    assert list(k.shape) == [192, 64]  # ggml order: [embd, kv_heads*64]
    # estimate matches the file within the header's size
    assert abs(path.stat().st_size - shape.file_bytes()) < 200_000
    assert [p.name for p in tmp_path.iterdir()] == ["m.gguf"]


def test_failed_write_leaves_no_file(tmp_path):
    with pytest.raises(ValueError, match="multiple of 64"):
        write_demo_model(tmp_path / "bad.gguf", DemoShape(embd=100))
    assert list(tmp_path.iterdir()) == []


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=2 << 20, max_value=2 << 30), st.integers(min_value=1, max_value=48))
def test_shape_for_size_is_close_to_the_target(target, layers):
    shape = shape_for_size(target, layers=layers)
    smaller = shape_for_size(target // 2, layers=layers)
    assert smaller.file_bytes() <= shape.file_bytes()
    # Widths step by 64, and the weights grow with the width's square: from 256 on, one step
    # grows the file by at most (320/256)² ≈ 1.6×, so the closest width is within the bounds.
    # Below, a step can quadruple it (64 → 128) and the closest may be further off.
    if shape.embd >= 256:
        assert 0.6 * target <= shape.file_bytes() <= 1.6 * target


@pytest.mark.parametrize("text,expected", [("5MB", 5 << 20), ("300m", 300 << 20), ("1.5G", int(1.5 * (1 << 30))),
                                           ("4096", 4096), ("64 KiB", 64 << 10)])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "big", "5TB", "-3MB"])
def test_parse_size_rejects_nonsense(text):
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


def test_cli_reports_bad_size_and_writes_nothing(tmp_path):
    r = subprocess.run([sys.executable, "-m", "gui.main", "demo-model", str(tmp_path / "x.gguf"), "--size", "huge"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not a size: 'huge'" in r.stderr
    assert list(tmp_path.iterdir()) == []


# --- the model matrix's shapes and types ------------------------------------------------------

def _types(path) -> dict[str, str]:
    return {t.name: t.tensor_type.name for t in gguf.GGUFReader(path).tensors}


@pytest.mark.parametrize("tied", [False, True])
def test_q4_k_m_is_llama_quantizes_mix(tmp_path, tied):
    from gui.cluster.llama.random_model import DemoShape as S
    types = _types(write_demo_model(tmp_path / "m.gguf", S(layers=8, embd=256, ff=768, quant="Q4_K_M", tied=tied)))
    # The output matrix gets Q6_K: output.weight, or the token embeddings when they are tied.
    assert types["token_embd.weight"] == ("Q6_K" if tied else "Q4_K")
    assert ("output.weight" in types) != tied and types.get("output.weight", "Q6_K") == "Q6_K"
    # attn_v and ffn_down get Q6_K in the blocks llama-quantize's use_more_bits picks: 0, 3, 6, 7 of 8.
    more = sorted(i for i in range(8) if types[f"blk.{i}.attn_v.weight"] == "Q6_K")
    assert more == [0, 3, 6, 7]
    assert more == sorted(i for i in range(8) if types[f"blk.{i}.ffn_down.weight"] == "Q6_K")
    assert {types[f"blk.{i}.attn_q.weight"] for i in range(8)} == {"Q4_K"}
    assert {types[f"blk.{i}.attn_norm.weight"] for i in range(8)} == {"F32"}


@pytest.mark.parametrize("arch, extra, absent", [
    ("qwen2", {"blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias"}, "blk.0.attn_q_norm.weight"),
    ("qwen3", {"blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight"}, "blk.0.attn_q.bias"),
])
def test_qwen_architectures_have_their_own_tensors(tmp_path, arch, extra, absent):
    path = write_demo_model(tmp_path / "m.gguf", DemoShape(layers=2, embd=256, ff=512, kv_heads=1, head_dim=128,
                                                           arch=arch, quant="Q8_0"))
    r = gguf.GGUFReader(path)
    names = {t.name for t in r.tensors}
    assert extra <= names and absent not in names
    assert _field(r, f"{arch}.attention.key_length") == 128
    q = next(t for t in r.tensors if t.name == "blk.0.attn_q.weight")
    assert list(q.shape) == [256, 256] and q.tensor_type.name == "Q8_0"


@pytest.mark.parametrize("shape, words", [
    (DemoShape(embd=320, ff=768, quant="Q4_K_M"), "blocks of 256 weights, so the rows of token_embd.weight (320 wide)"),
    (DemoShape(embd=256, ff=700, quant="Q6_K"), "rows of blk.0.ffn_down.weight (700 wide) must be a multiple of 256"),
    (DemoShape(embd=256, kv_heads=3), "kv_heads must divide the 4 attention heads"),
    (DemoShape(arch="gpt2"), "unknown architecture 'gpt2'"),
    (DemoShape(quant="Q3_K"), "unknown quant type 'Q3_K'"),
])
def test_shapes_llama_cpp_cannot_load_are_refused_before_writing(tmp_path, shape, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        write_demo_model(tmp_path / "bad.gguf", shape)
    assert list(tmp_path.iterdir()) == []


def test_a_real_vocabulary_is_copied_with_its_template_and_sizes_the_embeddings(tmp_path):
    from cluster.model_matrix import require_vocab
    tok = require_vocab("qwen2")
    path = write_demo_model(tmp_path / "m.gguf", DemoShape(layers=1, embd=64, ff=128), tokenizer=tok)
    r = gguf.GGUFReader(path)
    assert r.fields["tokenizer.ggml.model"].contents() == "gpt2"
    assert "<|im_start|>" in r.fields["tokenizer.chat_template"].contents()
    assert len(r.fields["tokenizer.ggml.tokens"].data) == tok.n_tokens > 150_000
    embd = next(t for t in r.tensors if t.name == "token_embd.weight")
    assert list(embd.shape) == [64, tok.n_tokens]


def test_llama3_vocabulary_gets_a_chat_template(tmp_path):
    from cluster.model_matrix import require_vocab
    tok = require_vocab("llama-bpe")
    keys = {k: v for k, v, *_ in tok.keys}
    assert "<|start_header_id|>" in keys["tokenizer.chat_template"]


def test_large_files_are_written_a_tensor_at_a_time_with_progress(tmp_path):
    seen: list[tuple[int, int]] = []
    shape = DemoShape(layers=4, embd=512, ff=1536, quant="Q4_K_M")
    path = write_demo_model(tmp_path / "m.gguf", shape, progress=lambda d, t: seen.append((d, t)))
    assert len(seen) == len(shape.tensors()) and seen[-1][0] == seen[-1][1] == shape.file_bytes()
    assert all(a[0] < b[0] for a, b in zip(seen, seen[1:]))
    assert abs(path.stat().st_size - shape.file_bytes()) < 100_000
    assert path.stat().st_mode & 0o777 == 0o644  # readable by everyone, like any downloaded model


def test_cli_writes_the_asked_type_architecture_and_embeddings(tmp_path):
    from gui.cluster.llama.model import inspect_model
    out = tmp_path / "q.gguf"
    r = subprocess.run([sys.executable, "-m", "gui.main", "demo-model", str(out), "--type", "Q4_K_M",
                        "--arch", "qwen3", "--kv-heads", "2", "--tied", "--layers", "4"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    info = inspect_model(out)
    assert (info.architecture, info.quantization, info.tied_embeddings, info.n_layer) == ("qwen3", "Q4_K_M", True, 4)
    assert info.n_head_kv == (2,) * 4 and info.n_head == 4
    bad = subprocess.run([sys.executable, "-m", "gui.main", "demo-model", str(tmp_path / "b.gguf"), "--type",
                          "Q4_K_M", "--embd", "320"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "multiple of 256" in bad.stderr
    assert not (tmp_path / "b.gguf").exists()


def test_gpt_oss_has_its_tensors_its_mxfp4_experts_and_its_window(tmp_path):
    """gpt-oss as llama.cpp loads it (src/models/openai-moe.cpp): biases on q/k/v/o, the router
    and each expert; a sink per head; a norm after attention and none before the experts; with
    llama-quantize's MXFP4_MOE mix the experts are MXFP4 blocks that decode to small finite
    weights, the other matrices Q8_0; queries wider than the embedding; the file names the
    window, not the layers."""
    shape = DemoShape(layers=2, embd=256, ff=256, head_count=8, kv_heads=1, arch="gpt-oss", quant="MXFP4_MOE",
                      experts=4, experts_used=2, expert_ff=128)
    path = write_demo_model(tmp_path / "g.gguf", shape)
    r = gguf.GGUFReader(path)
    blk0 = {t.name.removeprefix("blk.0."): t for t in r.tensors if t.name.startswith("blk.0.")}
    assert set(blk0) == {
        "attn_norm.weight", "attn_q.weight", "attn_q.bias", "attn_k.weight", "attn_k.bias", "attn_v.weight",
        "attn_v.bias", "attn_output.weight", "attn_output.bias", "attn_sinks.weight", "post_attention_norm.weight",
        "ffn_gate_inp.weight", "ffn_gate_inp.bias", "ffn_gate_exps.weight", "ffn_gate_exps.bias",
        "ffn_up_exps.weight", "ffn_up_exps.bias", "ffn_down_exps.weight", "ffn_down_exps.bias"}
    assert list(blk0["attn_sinks.weight"].shape) == [8]  # one per head
    assert list(blk0["attn_q.weight"].shape) == [256, 512] and list(blk0["attn_output.weight"].shape) == [512, 256]
    assert _field(r, "gpt-oss.attention.head_count") == 8
    assert list(blk0["ffn_down_exps.weight"].shape) == [128, 256, 4]
    assert list(blk0["ffn_down_exps.bias"].shape) == [256, 4]
    types = {n: t.tensor_type.name for n, t in blk0.items()}
    assert {types[f"ffn_{k}_exps.weight"] for k in ("gate", "up", "down")} == {"MXFP4"}
    assert types["attn_q.weight"] == types["attn_output.weight"] == "Q8_0"
    assert types["ffn_gate_inp.weight"] == types["ffn_up_exps.bias"] == "F32"
    experts = gguf.quants.dequantize(blk0["ffn_up_exps.weight"].data, gguf.GGMLQuantizationType.MXFP4)
    assert np.isfinite(experts).all() and 0.005 < experts.std() < 0.05
    assert _field(r, "gpt-oss.attention.sliding_window") == 128
    assert _field(r, "gpt-oss.expert_feed_forward_length") == 128
    assert _field(r, "gpt-oss.feed_forward_length") == 128  # no dense feed-forward: the experts' width
    assert _field(r, "general.file_type") == 38  # LLAMA_FTYPE_MOSTLY_MXFP4_MOE
    assert "gpt-oss.attention.sliding_window_pattern" not in r.fields
    assert abs(path.stat().st_size - shape.file_bytes()) < 200_000


def test_cli_writes_a_gpt_oss_model(tmp_path):
    from gui.cluster.llama.model import inspect_model
    out = tmp_path / "g.gguf"
    r = subprocess.run([sys.executable, "-m", "gui.main", "demo-model", str(out), "--arch", "gpt-oss", "--type",
                        "MXFP4_MOE", "--layers", "4", "--heads", "4", "--kv-heads", "1", "--experts", "8",
                        "--experts-used", "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "2 of 8 experts per token, window 128" in r.stdout
    info = inspect_model(out)
    assert (info.architecture, info.quantization, info.n_layer) == ("gpt-oss", "MXFP4_MOE", 4)
    assert info.n_head == 4 and info.embedding_length == 128  # queries twice the width (4 × 64)
    assert info.swa_layers == (True, False, True, False) and info.attention_sinks
