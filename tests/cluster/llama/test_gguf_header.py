"""Hostile GGUF headers (#32, item 2): each is refused in words that name the key or the tensor,
within bounded memory and time.

The bound is checked without timing a unit test: each file is read in a child process whose
address space is capped (RLIMIT_AS) and whose Python allocations are traced (the peak must stay
small), under a generous timeout that only a runaway read reaches. Before the bounded reader,
the 2^62 array ran for over 90 s, and the 2 million empty strings took 3.1 GiB.
"""

from __future__ import annotations

import json
import resource
import struct
import subprocess
import sys

import pytest

from gui.cluster.llama.gguf_header import (
    KEPT_STRING_ENTRIES,
    MAX_HEADER_BYTES,
    MAX_TENSORS,
    HeaderError,
    HeaderTruncated,
    SkippedValue,
    parse_header,
    read_header,
)
from gui.cluster.llama.model import ModelError, inspect_model

U32, STRING, ARRAY = 4, 8, 9

#: The child's whole address space (Python, numpy, the gguf package and the mapped file fit in
#: a fraction of it); the old reader's 3.1 GiB does not.
ADDRESS_SPACE_CAP = 1 << 30
#: Python allocations the read may make at its peak: a hostile header's declared sizes are far
#: beyond it, a real header needs a few hundred KiB.
TRACED_PEAK_CAP = 8 << 20


def _string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def _header(n_tensors: int, keys: list[bytes], tensors: bytes = b"") -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(keys)) + b"".join(keys) + tensors


def _key(name: bytes, value_type: int, value: bytes) -> bytes:
    return _string(name) + struct.pack("<I", value_type) + value


def _arch() -> bytes:
    return _key(b"general.architecture", STRING, _string(b"llama"))


def huge_number_array() -> bytes:
    """100 bytes declaring an array of 2^62 uint32 (the file of the attack run)."""
    raw = _header(0, [_key(b"tokenizer.ggml.scores", ARRAY, struct.pack("<IQ", U32, 1 << 62))])
    return raw.ljust(100, b"\0")


def two_million_empty_strings() -> bytes:
    """16 MB: an architecture and a token list of 2 million empty strings, nothing else."""
    count = 2_000_000
    return _header(0, [_arch(), _key(b"tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", STRING, count)
                                     + b"\0" * (8 * count))])


def tensor_count_2_63() -> bytes:
    return _header(1 << 63, [_arch()])


def string_length_2_64() -> bytes:
    return _header(0, [_key(b"general.name", STRING, struct.pack("<Q", (1 << 64) - 1) + b"x" * 64)])


def overflowing_tensor() -> bytes:
    info = _string(b"token_embd.weight") + struct.pack("<I4QIQ", 4, *([1 << 20] * 4), 0, 0)
    return _header(1, [_arch()], info)


def nested_arrays() -> bytes:
    """20,000 arrays, each holding the next."""
    return _header(0, [_key(b"deep", ARRAY, struct.pack("<IQ", ARRAY, 1) * 20_000 + struct.pack("<IQ", U32, 0))])


def truncated_header() -> bytes:
    return two_million_empty_strings()[:4096]


def a_million_tensor_infos() -> bytes:
    """24 MB of minimal tensor infos (no dimensions): more tensors than any model has."""
    count = 1_000_000
    info = _string(b"t") + struct.pack("<IIQ", 0, 0, 0)
    return _header(count, [_arch()], info * count)


def many_kept_arrays() -> bytes:
    """500 keys, each an array of 65,536 numbers: kept, each would cost megabytes of objects."""
    keys = [_key(b"a%d" % i, ARRAY, struct.pack("<IQ", 0, 1 << 16) + b"\1" * (1 << 16)) for i in range(500)]
    return _header(0, [_arch(), *keys])


def header_past_the_cap() -> bytes:
    """A string list that goes on past the header cap (5 million strings: 40 MB)."""
    count = (MAX_HEADER_BYTES // 8) + (1 << 20)
    return _header(0, [_arch(), _key(b"tokenizer.ggml.merges", ARRAY, struct.pack("<IQ", STRING, count)
                                     + b"\0" * (8 * count))])


HOSTILE = {
    # file maker, words the message must hold (the key or the tensor it names)
    "2^62 uint32": (huge_number_array, ["tokenizer.ggml.scores", str(1 << 62)]),
    "2M empty strings": (two_million_empty_strings, ["llama.block_count"]),
    "2^63 tensors": (tensor_count_2_63, ["tensors", str(1 << 63)]),
    "string of 2^64-1 bytes": (string_length_2_64, ["general.name"]),
    "overflowing tensor": (overflowing_tensor, ["token_embd.weight", "more elements"]),
    "20,000 nested arrays": (nested_arrays, ["deep", "array of arrays"]),
    "truncated": (truncated_header, ["tokenizer.ggml.tokens", "truncated"]),
    "a million tensors": (a_million_tensor_infos, ["tensors", "1000000", str(MAX_TENSORS)]),
    "500 arrays of 65,536": (many_kept_arrays, ["llama.block_count"]),
    "header past the cap": (header_past_the_cap, ["tokenizer.ggml.merges", f"{MAX_HEADER_BYTES >> 20} MiB"]),
}

_CHILD = """
import json, sys, tracemalloc
tracemalloc.start()
import gguf  # (its numpy import is not the reader's)
from gui.cluster.llama.model import ModelError, inspect_model
tracemalloc.reset_peak()
base = tracemalloc.get_traced_memory()[0]  # what the imports hold
try:
    inspect_model(sys.argv[1])
    error = None
except ModelError as e:
    error = str(e)
print(json.dumps({"error": error, "peak": tracemalloc.get_traced_memory()[1] - base}))
"""


def _cap_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_header_is_refused_in_words_within_bounded_memory(tmp_path, case):
    make, words = HOSTILE[case]
    path = tmp_path / "hostile.gguf"
    path.write_bytes(make())
    # a generous timeout: a bounded read takes a second or two even on a busy machine; the
    # unbounded one ran for minutes
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True,
                          timeout=300, preexec_fn=_cap_address_space)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    message = result["error"]
    assert message is not None and message.startswith(f"{path}: ")
    for word in words:
        assert word in message
    assert "b'" not in message and 'b"' not in message and "Error" not in message  # words, not reprs
    assert result["peak"] < TRACED_PEAK_CAP, f"{case}: {result['peak']} bytes allocated at the peak"


def test_not_a_gguf_is_said_in_words(tmp_path):
    """#37, item 5: no Python byte notation in the message."""
    path = tmp_path / "notes.gguf"
    path.write_bytes(b"not a model at all")
    with pytest.raises(ModelError) as caught:
        inspect_model(path)
    assert str(caught.value) == (f"{path}: not a GGUF file (it does not start with the GGUF signature "
                                 "that every llama.cpp model file has)")


def test_a_real_header_reads_the_same_as_the_gguf_package_reads_it(demo_model):
    """The bounded reader and the gguf package agree on every key, tensor and offset of a
    written model (the package still writes the files; it no longer reads them for herd)."""
    import gguf

    ours = read_header(demo_model)
    theirs = gguf.GGUFReader(demo_model, "r")
    keys = {name: fld for name, fld in theirs.fields.items() if not name.startswith("GGUF.")}  # its own
    assert set(ours.fields) == set(keys)
    for name, fld in keys.items():
        value = fld.contents()
        if isinstance(ours.fields[name], SkippedValue):  # a long list (the vocabulary): walked over
            assert isinstance(value, list) and ours.fields[name].count == len(value) > KEPT_STRING_ENTRIES
        elif isinstance(value, float) or (isinstance(value, list) and value and isinstance(value[0], float)):
            assert ours.fields[name] == pytest.approx(value), name
        else:
            assert ours.fields[name] == value, name
    assert [(t.name, t.shape, t.ggml_type, t.offset) for t in ours.tensors] == \
        [(t.name, tuple(int(x) for x in t.shape), int(t.tensor_type), int(t.data_offset)) for t in theirs.tensors]


def test_a_window_too_short_for_the_header_says_how_much_more_it_needs(demo_model):
    """A hub reads a header in growing windows: a cut window says how many bytes get past the
    point reached, and a whole one parses."""
    raw = demo_model.read_bytes()
    whole = parse_header(raw)
    with pytest.raises(HeaderTruncated) as cut:
        parse_header(raw[:1000])
    assert 1000 < cut.value.needed <= whole.data_offset
    assert parse_header(raw[:whole.data_offset]).tensors == whole.tensors


def test_a_long_vocabulary_is_skipped_not_built():
    count = 100_000
    raw = _header(0, [_arch(), _key(b"tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", STRING, count)
                                    + _string(b"tok") * count)])
    header = parse_header(raw)
    assert header.get("tokenizer.ggml.tokens") is None
    assert header.fields["tokenizer.ggml.tokens"].count == count
    assert header.get("general.architecture") == "llama"


def test_a_key_that_appears_twice_is_named():
    with pytest.raises(HeaderError, match="key general.architecture appears twice"):
        parse_header(_header(0, [_arch(), _arch()]))


def test_hostile_file_makers_write_what_they_say():
    """The files above are what their names say (so the test reads the attack, not a typo)."""
    assert len(huge_number_array()) == 100
    assert len(two_million_empty_strings()) > 16_000_000
