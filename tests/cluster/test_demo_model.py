"""Demo model generator: valid GGUF files of the asked shape, atomic writes, clear errors."""

from __future__ import annotations

import subprocess
import sys

import gguf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gui.cluster.demo_model import DemoShape, parse_size, shape_for_size, write_demo_model


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
    if shape.embd > 64:  # not clamped at the smallest width
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
