"""A bounded reader of a GGUF file's header: its keys and its tensor infos, nothing else.

:func:`read_header` walks the header of a GGUF file (or of the first bytes of one, as read from
a hub) and returns a :class:`GGUFHeader`. It exists because a header comes from outside (#32):

* every count and length is checked against the bytes left before anything is allocated, so
  a 100-byte file that declares an array of 2^62 numbers is refused at once;
* big arrays (the tokens, scores and merges of a vocabulary) are skipped, not built: a number
  array by one jump, a string array by walking its length prefixes. Herd plans from the
  architecture keys and the tensor infos; it never needs the vocabulary itself. Opening Gemma
  3 270M (a 262k-token vocabulary) went from about 30 s and 768 MB with ``gguf.GGUFReader``,
  which builds a numpy view for every token, to a fraction of a second (#37, item 11;
  ``bench/gguf_header.py``). Where herd must compare two vocabularies (a draft model for
  speculation, #35), the keys named in ``digest_keys`` are hashed as the raw bytes they are
  in the file, still without building a Python object per token;
* what is wrong is said in words that name the key or the tensor, never in Python's byte
  notation (#37, item 5).

The layout (llama.cpp's ``ggml/src/gguf.cpp``): the magic ``GGUF``, a uint32 version, uint64
tensor and key counts; each key a uint64-length string, a uint32 value type and the value; each
tensor a name, a uint32 dimension count, that many uint64 dimensions, a uint32 ggml type and a
uint64 offset into the data, which starts at the next multiple of ``general.alignment``.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from agent.i18n import translate

MAGIC = b"GGUF"

# GGUF value types (gguf.GGUFValueType): the byte size and struct code of each scalar.
_SCALARS = {0: (1, "B"), 1: (1, "b"), 2: (2, "H"), 3: (2, "h"), 4: (4, "I"), 5: (4, "i"),
            6: (4, "f"), 7: (1, "?"), 10: (8, "Q"), 11: (8, "q"), 12: (8, "d")}
_STRING, _ARRAY = 8, 9

#: The longest header read. Gemma 3's 262k-token vocabulary makes a 6.2 MiB header, Qwen's with
#: its merges about 6 MB; a header that goes on past five times that is not a model's. It bounds the time a read
#: takes (walking 32 MiB of string lengths takes well under a second) as the other limits bound
#: its memory. A hub reads no more of a file than this either (``HEADER_MAX_BYTES``).
MAX_HEADER_BYTES = 32 << 20
#: A number array of at most this many entries is read (per-layer head counts and window
#: patterns have one entry per layer); a longer one (token scores, token types) is skipped.
KEPT_ARRAY_ENTRIES = 1 << 16
#: A string value longer than this is skipped, not decoded (chat templates take a few KiB).
KEPT_STRING_BYTES = 1 << 20
#: A string array of at most this many entries is read (``general.tags``); the vocabulary is not.
KEPT_STRING_ENTRIES = 1 << 10
#: What all kept values together may cost in memory, roughly, in bytes (a Python object per
#: number or string); past it, values are skipped. Herd's keys take a few KiB.
KEPT_BUDGET = 4 << 20
#: Longest key name accepted: llama.cpp's own keys are under 64 bytes.
MAX_KEY_BYTES = 1 << 10
#: Most keys and tensors a header may declare: models have about a hundred keys and a few
#: thousand tensors per file.
MAX_KEYS = 1 << 14
MAX_TENSORS = 1 << 16
#: llama.cpp refuses tensor names of GGML_MAX_NAME (64) bytes or more, and more than
#: GGML_MAX_DIMS (4) dimensions.
MAX_TENSOR_NAME_BYTES = 63
MAX_TENSOR_DIMS = 4
_INT64_MAX = (1 << 63) - 1
# the fewest bytes a key (name length, type, a one-byte value) and a tensor info can take
_MIN_KEY_BYTES = 8 + 4 + 1
_MIN_TENSOR_BYTES = 8 + 4 + 4 + 8
_MIN_ENTRY_BYTES = {_STRING: 8, _ARRAY: 4 + 8}


class HeaderError(ValueError):
    """The bytes are not a well-formed GGUF header. The message says, in words, which key or
    tensor is wrong and how; the caller adds the file's name."""


class HeaderTruncated(HeaderError):
    """The header goes on past the bytes there are. :attr:`needed` is how many bytes from the
    start of the file it takes at least to get past the point that was reached (a hub reader
    fetches more and tries again, up to its own cap)."""

    def __init__(self, message: str, needed: int) -> None:
        super().__init__(message)
        self.needed = needed


@dataclass(frozen=True)
class SkippedValue:
    """A value that was walked over, not kept: a long array, or a very long string.

    Attributes:
        value_type: the GGUF value type (of the entries, for an array).
        count: entries of the array, or bytes of the string.
    """

    value_type: int
    count: int


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the header describes it.

    Attributes:
        name: the tensor's name (``blk.0.attn_q.weight``).
        shape: its dimensions, ggml's order (``ne0`` first).
        ggml_type: the ggml type number (:class:`gguf.GGMLQuantizationType`).
        offset: where its data starts, from the start of the file.
    """

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int


@dataclass(frozen=True)
class GGUFHeader:
    """What a GGUF header holds, as :func:`read_header` found it.

    Attributes:
        version: the format version.
        fields: every key's value: a number, a bool, a string or a short list of them; a
            :class:`SkippedValue` for a long array (the vocabulary) or a very long string.
        tensors: the tensor infos, in file order.
        data_offset: where the tensor data starts (the header's length, padded to the
            alignment).
        digests: for each key asked for in ``digest_keys``, the SHA-256 (hex) of its value's
            bytes as the file holds them (entry type, count and entries), kept or skipped.
    """

    version: int
    fields: dict[str, object] = field(default_factory=dict)
    tensors: tuple[TensorInfo, ...] = ()
    data_offset: int = 0
    digests: dict[str, str] = field(default_factory=dict)

    def get(self, key: str):
        """The value of ``key``, or None when the header has no such key or skipped its value."""
        value = self.fields.get(key)
        return None if isinstance(value, SkippedValue) else value


def _truncated(what: str, needed: int) -> HeaderTruncated:
    return HeaderTruncated(translate("Model", "the header ends inside {what}").format(what=what), needed)


class _Cursor:
    """A position in ``buf`` that moves only after checking that the bytes are there (at most
    :data:`MAX_HEADER_BYTES` of them), and what may still be spent on kept values."""

    def __init__(self, buf, digest_keys: Collection[str] = ()) -> None:
        self.buf = buf
        self.size = min(len(buf), MAX_HEADER_BYTES)
        self.pos = 0
        self.budget = KEPT_BUDGET
        self.digest_keys = frozenset(digest_keys)
        self.digests: dict[str, str] = {}

    def digest(self, start: int) -> str:
        """SHA-256 (hex) of the bytes from ``start`` to the position, hashed where they lie."""
        with memoryview(self.buf) as view, view[start:self.pos] as part:
            return hashlib.sha256(part).hexdigest()

    def spend(self, cost: int) -> bool:
        """Take ``cost`` from the budget for kept values; False (nothing taken) when it is short."""
        if cost > self.budget:
            return False
        self.budget -= cost
        return True

    def need(self, nbytes: int, what: str) -> None:
        """Raise :class:`HeaderTruncated` unless ``nbytes`` more bytes are there."""
        if nbytes > self.size - self.pos:
            raise _truncated(what, self.pos + nbytes)

    def left(self) -> int:
        return self.size - self.pos

    def unpack(self, code: str, nbytes: int, what: str):
        self.need(nbytes, what)
        value = struct.unpack_from("<" + code, self.buf, self.pos)[0]
        self.pos += nbytes
        return value

    def u32(self, what: str) -> int:
        return self.unpack("I", 4, what)

    def u64(self, what: str) -> int:
        return self.unpack("Q", 8, what)

    def raw(self, nbytes: int, what: str) -> bytes:
        self.need(nbytes, what)
        out = bytes(self.buf[self.pos:self.pos + nbytes])
        self.pos += nbytes
        return out

    def text(self, nbytes: int, what: str) -> str:
        raw = self.raw(nbytes, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise HeaderError(translate("Model", "{what} is not UTF-8 text").format(what=what)) from None


def _count_fits(cur: _Cursor, count: int, min_bytes: int, what: str) -> None:
    """Refuse ``count`` entries of at least ``min_bytes`` each when the bytes left cannot hold
    them — before anything is allocated or walked for them (#32)."""
    if count > cur.left() // max(1, min_bytes):
        raise _truncated(translate("Model", "{what} (it declares {count} entries)").format(what=what, count=count),
                         cur.pos + min(count * min_bytes, 1 << 62))


def _at_most(count: int, most: int, what: str) -> None:
    if count > most:
        raise HeaderError(translate("Model", "{what} declares {count} entries; a model has at most {most}")
                          .format(what=what, count=count, most=most))


def _read_string(cur: _Cursor, what: str, limit: int | None = None) -> str | SkippedValue:
    """A length-prefixed string; one longer than ``limit`` is skipped (or refused when it is a
    name: see the callers)."""
    length = cur.u64(what)
    cur.need(length, what)
    if limit is not None and (length > limit or not cur.spend(length + 64)):
        cur.pos += length
        return SkippedValue(_STRING, length)
    return cur.text(length, what)


def _skip_strings(cur: _Cursor, count: int, what: str) -> None:
    """Walk over ``count`` strings by their length prefixes, building none of them."""
    buf, pos, size, unpack = cur.buf, cur.pos, cur.size, struct.Struct("<Q").unpack_from
    for _ in range(count):
        if pos + 8 > size:
            raise _truncated(what, pos + 8)
        pos += 8 + unpack(buf, pos)[0]
    if pos > size:
        raise _truncated(what, pos)
    cur.pos = pos


def _read_array(cur: _Cursor, key: str):
    """An array value: a list when it is short and of numbers or strings, else skipped."""
    entry_type = cur.u32(key)
    count = cur.u64(key)
    if entry_type == _ARRAY:
        # llama.cpp reads no array of arrays; walking them would recurse as deep as a file says
        raise HeaderError(translate("Model", "key {key} holds an array of arrays, which GGUF models do "
                                             "not use").format(key=key))
    if entry_type in _SCALARS:
        width, code = _SCALARS[entry_type]
        _count_fits(cur, count, width, key)
        if count > KEPT_ARRAY_ENTRIES or not cur.spend(count * 40):
            cur.pos += count * width
            return SkippedValue(entry_type, count)
        values = list(struct.unpack_from(f"<{count}{code}", cur.buf, cur.pos))
        cur.pos += count * width
        return values
    if entry_type == _STRING:
        _count_fits(cur, count, _MIN_ENTRY_BYTES[_STRING], key)
        start = cur.pos
        _skip_strings(cur, count, key)
        if count > KEPT_STRING_ENTRIES or not cur.spend(cur.pos - start + 64 * count):
            return SkippedValue(entry_type, count)
        cur.pos = start
        return [cur.text(cur.u64(key), key) for _ in range(count)]
    raise HeaderError(translate("Model", "key {key} holds an array of an unknown value type ({type})")
                      .format(key=key, type=entry_type))


def _read_value(cur: _Cursor, key: str):
    value_type = cur.u32(key)
    if value_type in _SCALARS:
        width, code = _SCALARS[value_type]
        return cur.unpack(code, width, key)
    if value_type == _STRING:
        return _read_string(cur, key, KEPT_STRING_BYTES)
    if value_type == _ARRAY:
        return _read_array(cur, key)
    raise HeaderError(translate("Model", "key {key} has an unknown value type ({type})")
                      .format(key=key, type=value_type))


def _read_fields(cur: _Cursor, n_keys: int) -> dict[str, object]:
    what = translate("Model", "the list of keys")
    _count_fits(cur, n_keys, _MIN_KEY_BYTES, what)
    _at_most(n_keys, MAX_KEYS, what)
    fields: dict[str, object] = {}
    for index in range(n_keys):
        name_what = translate("Model", "the name of key number {n}").format(n=index + 1)
        key = _read_string(cur, name_what, MAX_KEY_BYTES)
        if isinstance(key, SkippedValue):
            raise HeaderError(translate("Model", "key number {n} has a name of {length} bytes; a key name "
                                                 "takes at most {most}").format(n=index + 1, length=key.count,
                                                                                most=MAX_KEY_BYTES))
        if key in fields:
            raise HeaderError(translate("Model", "key {key} appears twice").format(key=key))
        start = cur.pos
        fields[key] = _read_value(cur, key)
        if key in cur.digest_keys:
            cur.digests[key] = cur.digest(start)
    return fields


def _read_tensor(cur: _Cursor, index: int) -> tuple[str, tuple[int, ...], int, int]:
    name_what = translate("Model", "the name of tensor number {n}").format(n=index + 1)
    name = _read_string(cur, name_what, MAX_TENSOR_NAME_BYTES)
    if isinstance(name, SkippedValue):
        raise HeaderError(translate("Model", "tensor number {n} has a name of {length} bytes; llama.cpp "
                                             "takes at most {most}").format(n=index + 1, length=name.count,
                                                                            most=MAX_TENSOR_NAME_BYTES))
    n_dims = cur.u32(name)
    if n_dims > MAX_TENSOR_DIMS:
        raise HeaderError(translate("Model", "tensor {name} has {n} dimensions; llama.cpp takes at most "
                                             "{most}").format(name=name, n=n_dims, most=MAX_TENSOR_DIMS))
    shape = tuple(cur.u64(name) for _ in range(n_dims))
    elements = 1
    for dim in shape:
        elements *= dim
        if elements > _INT64_MAX:
            raise HeaderError(translate("Model", "tensor {name} has more elements than a file can "
                                                 "hold").format(name=name))
    ggml_type = cur.u32(name)
    offset = cur.u64(name)
    return name, shape, ggml_type, offset


def _read_tensors(cur: _Cursor, n_tensors: int) -> list[tuple[str, tuple[int, ...], int, int]]:
    what = translate("Model", "the list of tensors")
    _count_fits(cur, n_tensors, _MIN_TENSOR_BYTES, what)
    _at_most(n_tensors, MAX_TENSORS, what)
    tensors = [_read_tensor(cur, i) for i in range(n_tensors)]
    seen: set[str] = set()
    for name, *_ in tensors:
        if name in seen:
            raise HeaderError(translate("Model", "tensor {name} appears twice").format(name=name))
        seen.add(name)
    return tensors


def parse_header(buf, digest_keys: Collection[str] = ()) -> GGUFHeader:
    """Parse the GGUF header at the start of ``buf`` (bytes, or a memory map of a file).

    The values of the keys in ``digest_keys`` are also hashed as they lie in ``buf``
    (:attr:`GGUFHeader.digests`), long arrays included.

    Raises :class:`HeaderTruncated` when ``buf`` ends before the header does, and
    :class:`HeaderError` for anything else that is wrong — in words that name the key or the
    tensor. Nothing is allocated for a count or length the bytes left cannot hold, no more than
    :data:`MAX_HEADER_BYTES` are read, and kept values cost at most :data:`KEPT_BUDGET`.
    """
    try:
        return _parse(buf, digest_keys)
    except HeaderTruncated as e:
        if len(buf) > MAX_HEADER_BYTES and e.needed > MAX_HEADER_BYTES:
            raise HeaderError(translate("Model", "the header goes on past {most} MiB, which no model's does "
                                                 "({why})").format(most=MAX_HEADER_BYTES >> 20, why=e)) from None
        raise


def _parse(buf, digest_keys: Collection[str]) -> GGUFHeader:
    cur = _Cursor(buf, digest_keys)
    if cur.left() < len(MAGIC) or bytes(buf[:len(MAGIC)]) != MAGIC:
        raise HeaderError(translate("Model", "it does not start with the GGUF signature"))
    cur.pos = len(MAGIC)
    version = cur.u32(translate("Model", "the format version"))
    if version not in (2, 3):
        raise HeaderError(translate("Model", "GGUF format version {version} is not one llama.cpp reads "
                                             "(2 or 3)").format(version=version))
    n_tensors = cur.u64(translate("Model", "the tensor count"))
    n_keys = cur.u64(translate("Model", "the key count"))
    fields = _read_fields(cur, n_keys)
    raw_tensors = _read_tensors(cur, n_tensors)
    alignment = fields.get("general.alignment", 32)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 \
            or alignment & (alignment - 1):
        raise HeaderError(translate("Model", "key general.alignment must be a power of two, got {value}")
                          .format(value=alignment if isinstance(alignment, (int, float)) else "?"))
    data_offset = -(-cur.pos // alignment) * alignment
    tensors = []
    for name, shape, ggml_type, offset in raw_tensors:
        if offset % alignment:
            raise HeaderError(translate("Model", "tensor {name} starts at an offset that is not a multiple "
                                                 "of the alignment {alignment}").format(name=name,
                                                                                         alignment=alignment))
        tensors.append(TensorInfo(name, shape, ggml_type, data_offset + offset))
    return GGUFHeader(version, fields, tuple(tensors), data_offset, cur.digests)


def read_header(path: str | os.PathLike, digest_keys: Collection[str] = ()) -> GGUFHeader:
    """The header of the GGUF file at ``path``, read through a memory map (only the pages the
    header lies on are touched; skipped arrays are never read). Raises :class:`OSError` when
    the file cannot be read, :class:`HeaderError` as :func:`parse_header` (which also says
    what ``digest_keys`` does)."""
    with open(Path(path), "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return parse_header(b"", digest_keys)
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return parse_header(buf, digest_keys)
