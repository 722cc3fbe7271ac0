"""What a GGUF model file holds, as far as planning a split needs to know.

:func:`inspect_model` reads only the header and the tensor infos of a GGUF file (the ``gguf``
package memory-maps the file; no weight is read), and returns a :class:`ModelInfo`: the
architecture, the layer count, the context length, the attention shape (for the KV cache) and
the bytes of every *layer slot* the way llama.cpp places them (``docs/llama-cpp.md``):

* slots ``0 … n_layer-1`` are the transformer blocks (tensors ``blk.{i}.*``);
* slot ``n_layer`` is the output layer (``output_norm.*``, ``output.*``). A model without
  ``output.weight`` ties its embeddings: llama.cpp then loads ``token_embd.weight`` a second
  time into the output layer's buffer (``TENSOR_DUPLICATED`` in src/llama-model.cpp), so the
  output slot carries those bytes too — unless the output slot stays on the host CPU, where the
  copy is shared;
* the token embeddings (and any other input tensor such as ``rope_freqs``) always stay on the
  host CPU: :attr:`ModelInfo.input_bytes`.

Anything unusable — not a GGUF, cut short, no ``block_count``, an architecture llama.cpp cannot
split by layers — raises :class:`ModelError` with a message that names the file and the problem.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from agent.i18n import translate

#: Architectures that are not text generators (encoders, vision projectors, audio decoders):
#: llama-server cannot serve them as a chat model split over RPC workers.
NON_GENERATIVE_ARCHS = frozenset({
    "clip", "bert", "modern-bert", "nomic-bert", "nomic-bert-moe", "neo-bert", "jina-bert-v2",
    "jina-bert-v3", "eurobert", "t5encoder", "wavtokenizer-dec", "gemma-embedding", "llama-embed",
})

#: Bytes of one KV-cache element: llama-server's default cache type is f16.
KV_ELEMENT_BYTES = 2

#: Which layers of a sliding-window architecture attend over the window, as llama.cpp's loader
#: sets it (``hparams.set_swa_pattern(period)`` in src/llama-model.cpp): in every run of
#: ``period`` layers, all but the last are windowed (Gemma 3: five windowed, then one global).
#: ``{arch}.attention.sliding_window_pattern`` in the file overrides the period.
SWA_PERIOD = {"gemma2": 2, "gemma3": 6, "gemma3n": 5, "cohere2": 4, "gpt-oss": 2, "exaone4": 4}

#: llama-server's defaults, which herd's command line keeps: 4 parallel sequences sharing one
#: unified cache when none is asked for (``-np``), and a micro-batch of 512 tokens (``-ub``). The
#: windowed layers' cache is sized by them, and the compute buffers by the micro-batch.
DEFAULT_SEQUENCES = 4
DEFAULT_UBATCH = 512
#: llama.cpp pads the windowed cache to a multiple of this many cells.
SWA_CELL_PAD = 256


@dataclass(frozen=True)
class CacheShape:
    """What sizes llama-server's KV cache and compute buffers besides the model: the context,
    the parallel sequences (``-np``), whether they share one cache (``kv_unified``), the
    micro-batch (``-ub``, at most ``-b``) and ``--swa-full``.

    llama-server's defaults when ``-np`` is not given: 4 sequences sharing one unified cache.
    Given ``-np N``, the sequences get a cache stream each unless ``-kvu`` says otherwise.
    :meth:`gui.cluster.llama.server_command.ServerOptions.cache_shape` reads them from the
    user's server arguments.
    """

    ctx: int
    sequences: int = DEFAULT_SEQUENCES
    unified: bool = True
    ubatch: int = DEFAULT_UBATCH
    swa_full: bool = False

    @classmethod
    def of(cls, shape: "CacheShape | int") -> "CacheShape":
        """``shape`` itself, or llama-server's default shape at context ``shape``."""
        return shape if isinstance(shape, CacheShape) else cls(int(shape))

_BLOCK_RE = re.compile(r"^blk\.(\d+)\.")
#: A block's expert matrices (``ffn_gate_exps``, ``ffn_up_exps``, ``ffn_down_exps``,
#: ``ffn_gate_up_exps``, and their biases); shared experts (``*_shexp``) are read by every token.
_EXPERTS_RE = re.compile(r"\.ffn_\w+_exps\.")
_OUTPUT_NAMES = ("output.", "output_norm.")


class TensorExtent(NamedTuple):
    """Where one tensor lies in the file and which slot it belongs to (-1: an input tensor,
    ``n_layer``: the output layer), with its name, ggml type (``Q4_K``) and ggml shape (``ne0``
    first): which of llama.cpp's CPU buffers a host tensor lands in depends on them."""

    slot: int
    offset: int
    nbytes: int
    name: str = ""
    ggml_type: str = ""
    shape: tuple[int, ...] = ()


def _unreadable(path, e: OSError) -> str:
    # the OS's reason stays as the OS words it
    return translate("Model", "{path}: cannot read the model file ({why})").format(path=path, why=e.strerror or e)


class ModelError(ValueError):
    """The file is not a model herd can plan for. The message names the file and the problem (in
    the app's language for the common ones, see :mod:`agent.i18n`)."""


@dataclass(frozen=True)
class ModelInfo:
    """The facts about a GGUF model that the planner, the cost model and profiles use.

    Attributes:
        path: the file.
        file_bytes: size of the file on disk.
        architecture: ``general.architecture`` (``llama``, ``qwen2`` …).
        name: ``general.name``, or the file's stem when the file has none.
        n_layer: transformer blocks (``{arch}.block_count``).
        context_length: trained context length, or None when the file does not say.
        embedding_length: width of the hidden state (``n_embd``).
        feed_forward_length: feed-forward width, or 0 when the file does not say.
        n_head: attention heads (the largest, if the file lists one per layer).
        n_head_kv: key/value heads of each block (grouped-query attention; 0 = no attention,
            as in the recurrent blocks of hybrid models).
        head_dim_k: size of one key head.
        head_dim_v: size of one value head.
        vocab_size: tokens in the vocabulary (rows of ``token_embd``).
        file_type: ``general.file_type`` as a number, or None.
        quantization: a label such as ``F16`` or ``Q4_K_M``.
        slot_bytes: bytes of each layer slot, ``n_layer + 1`` entries (the last is the output
            layer, including the duplicated token embeddings of a tied model).
        input_bytes: bytes that always stay on the host CPU (token embeddings and other input
            tensors).
        token_embd_bytes: bytes of ``token_embd.weight`` alone (part of ``input_bytes``).
        tied_embeddings: True when the model has no ``output.weight`` and reuses the token
            embeddings as its output matrix.
        tensor_bytes: bytes of all tensors in the file (each counted once).
        tensors: every tensor's slot and file range (for checking what llama-server reports
            about its buffers: a memory-mapped buffer spans a file range); empty when unknown.
        n_params: weights in all tensors (elements, each tensor counted once); 0 when unknown.
        sliding_window: tokens a windowed layer attends over (``{arch}.attention.sliding_window``);
            0 when every layer attends over the whole context.
        swa_layers: for each block, True when it is windowed (empty: none is).
        expert_count: experts per block of a mixture-of-experts model (0: a dense model).
        expert_used_count: experts each token is routed to.
        expert_feed_forward_length: the feed-forward width of one expert
            (``{arch}.expert_feed_forward_length``; 0 when the file does not say).
        expert_slot_bytes: bytes of each slot that are expert matrices (``*_exps``), as many
            entries as ``slot_bytes`` (empty for a dense model).
        attention_sinks: the blocks carry attention sinks (``blk.N.attn_sinks``, one learned
            logit per head that every softmax of attention includes: gpt-oss). They are a few
            bytes of each slot and need no cache.
    """

    path: Path
    file_bytes: int
    architecture: str
    name: str
    n_layer: int
    context_length: int | None
    embedding_length: int
    feed_forward_length: int
    n_head: int
    n_head_kv: tuple[int, ...]
    head_dim_k: int
    head_dim_v: int
    vocab_size: int
    file_type: int | None
    quantization: str
    slot_bytes: tuple[int, ...]
    input_bytes: int
    token_embd_bytes: int
    tied_embeddings: bool
    tensor_bytes: int
    tensors: tuple[TensorExtent, ...] = ()
    n_params: int = 0
    sliding_window: int = 0
    swa_layers: tuple[bool, ...] = ()
    expert_count: int = 0
    expert_used_count: int = 0
    expert_feed_forward_length: int = 0
    expert_slot_bytes: tuple[int, ...] = ()
    attention_sinks: bool = False

    @property
    def is_moe(self) -> bool:
        """A mixture-of-experts model: each token reads only some of each block's experts."""
        return self.expert_count > 0 and any(self.expert_slot_bytes)

    @property
    def active_slot_bytes(self) -> tuple[int, ...]:
        """Bytes of each slot that one token reads: everything of a dense model; of a
        mixture-of-experts model, the attention and shared tensors and ``expert_used_count`` of
        ``expert_count`` experts. What a decode step's time follows (it is memory-bound); the
        memory a slot needs is still :attr:`slot_bytes`."""
        if not self.is_moe:
            return self.slot_bytes
        share = min(1.0, self.expert_used_count / self.expert_count)
        return tuple(round(b - e * (1.0 - share)) for b, e in zip(self.slot_bytes, self.expert_slot_bytes))

    @property
    def bytes_per_param(self) -> float:
        """Average bytes of one weight (2 for F16, about 0.6 for Q4_K_M); 0 when unknown."""
        return self.tensor_bytes / self.n_params if self.n_params else 0.0

    @property
    def n_slots(self) -> int:
        """Layer slots llama.cpp places: the blocks plus the output layer."""
        return self.n_layer + 1

    @property
    def output_bytes(self) -> int:
        """Bytes of the output-layer slot when it sits on a device other than the host."""
        return self.slot_bytes[self.n_layer]

    @property
    def output_duplicate_bytes(self) -> int:
        """Bytes of the output slot that are a copy of the token embeddings (tied models).

        When the output slot stays on the host, llama.cpp shares the host's copy instead.
        """
        return self.token_embd_bytes if self.tied_embeddings else 0

    def is_windowed(self, layer: int) -> bool:
        """True when block ``layer`` attends over the sliding window only."""
        return bool(self.sliding_window) and layer < len(self.swa_layers) and self.swa_layers[layer]

    def kv_cells(self, ctx: "int | CacheShape", layer: int | None = None) -> int:
        """Cells (token positions) of the KV cache llama-server gives block ``layer`` at ``ctx``
        (a context, or a :class:`CacheShape` for server arguments other than the defaults).

        A global layer gets the whole context (split evenly between the sequences' streams when
        they do not share one). A windowed one gets, per cache stream, the window for each
        sequence in it plus one micro-batch, padded to 256 cells and never more than the
        stream's context (src/llama-kv-cache-iswa.cpp); ``--swa-full`` gives it the whole
        context. With llama-server's defaults: 4 × 512 + 512 = 2560 cells for a window of 512;
        with ``-np 2``: two streams of 512 + 512. Without ``layer``, the most any block gets.
        """
        shape = CacheShape.of(ctx)
        if shape.ctx < 0:
            raise ValueError(f"context length must not be negative, got {shape.ctx}")
        if layer is None or not self.is_windowed(layer) or shape.swa_full:
            return shape.ctx
        streams = 1 if shape.unified else max(1, shape.sequences)
        per_stream = self.sliding_window * (shape.sequences if shape.unified else 1) + shape.ubatch
        padded = -(-per_stream // SWA_CELL_PAD) * SWA_CELL_PAD
        return streams * min(shape.ctx // streams, padded)

    def kv_bytes_per_layer(self, ctx: "int | CacheShape", layer: int | None = None) -> int:
        """Bytes of the f16 KV cache of one block for a context of ``ctx`` tokens.

        ``2 (K and V) * cells * n_head_kv * head_dim * 2 bytes`` — with separate key and value
        head sizes when the model has them, and the cells of :meth:`kv_cells` (the whole
        context, or far less for a sliding-window layer). With ``layer`` the block's own head
        count is used (models may vary it per layer); without it, the largest, which is a safe
        upper bound. Compressed (MLA) caches are smaller than this, so the estimate errs on the
        safe side for them.
        """
        heads = max(self.n_head_kv) if layer is None else self.n_head_kv[layer]
        return self.kv_cells(ctx, layer) * heads * (self.head_dim_k + self.head_dim_v) * KV_ELEMENT_BYTES

    def kv_bytes(self, ctx: "int | CacheShape", slots: range | list[int]) -> int:
        """KV-cache bytes of the given slots at ``ctx`` (the output slot has no cache)."""
        return sum(self.kv_bytes_per_layer(ctx, s) for s in slots if s < self.n_layer)

    @property
    def activation_bytes(self) -> int:
        """Bytes of the hidden state handed from one device to the next per token (f32)."""
        return self.embedding_length * 4

    def block_bytes(self, first: int, count: int) -> int:
        """Bytes of ``count`` consecutive slots starting at ``first``."""
        return sum(self.slot_bytes[first:first + count])

    def summary(self) -> dict:
        """A JSON-ready description (paths as strings, tuples as lists)."""
        return {
            "path": str(self.path),
            "file_bytes": self.file_bytes,
            "architecture": self.architecture,
            "name": self.name,
            "n_layer": self.n_layer,
            "context_length": self.context_length,
            "embedding_length": self.embedding_length,
            "feed_forward_length": self.feed_forward_length,
            "n_head": self.n_head,
            "n_head_kv": list(self.n_head_kv),
            "head_dim_k": self.head_dim_k,
            "head_dim_v": self.head_dim_v,
            "vocab_size": self.vocab_size,
            "file_type": self.file_type,
            "quantization": self.quantization,
            "slot_bytes": list(self.slot_bytes),
            "input_bytes": self.input_bytes,
            "token_embd_bytes": self.token_embd_bytes,
            "tied_embeddings": self.tied_embeddings,
            "tensor_bytes": self.tensor_bytes,
            "n_params": self.n_params,
            "sliding_window": self.sliding_window,
            "swa_layers": list(self.swa_layers),
            "expert_count": self.expert_count,
            "expert_used_count": self.expert_used_count,
            "expert_feed_forward_length": self.expert_feed_forward_length,
            "expert_slot_bytes": list(self.expert_slot_bytes),
            "attention_sinks": self.attention_sinks,
        }


def _field_value(reader, key: str):
    """A scalar, string or list value of a GGUF key, or None when absent."""
    field = reader.get_field(key)
    return None if field is None else field.contents()


def _int_or_list(value, what: str, path: Path) -> list[int] | int | None:
    if value is None:
        return None
    try:
        if isinstance(value, list):
            return [int(v) for v in value]
        return int(value)
    except (TypeError, ValueError):
        raise ModelError(f"{path}: {what} is not a number ({value!r})") from None


def _quant_label(file_type: int | None, tensor_types: dict[str, int]) -> str:
    """``general.file_type`` as llama.cpp prints it (``Q4_K_M``), else the dominant tensor type."""
    import gguf

    if file_type is not None:
        try:
            name = gguf.LlamaFileType(file_type).name
        except ValueError:
            name = ""
        for prefix in ("MOSTLY_", "ALL_"):
            if name.startswith(prefix):
                return name[len(prefix):]
        if name:
            return name
    if not tensor_types:
        return "unknown"
    # The type holding the most bytes says what the file mostly is.
    return max(tensor_types.items(), key=lambda kv: (kv[1], kv[0]))[0]


_gc_pause_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Hold off Python's cyclic garbage collector while ``gguf.GGUFReader`` parses a header.

    For a large vocabulary (Gemma 3: 262k tokens) the reader makes millions of small numpy
    views; each full collection walks them all, holding the GIL for up to a second at a time —
    the app's window froze for that long even with the file read off the GUI thread — and
    together the collections more than doubled the read's time. The views hold no cycles
    (reference counting frees them), so nothing piles up while the collector waits. Nested
    and concurrent reads share one pause; the collector is turned back on, if it was on,
    when the last one ends.
    """
    global _gc_pauses, _gc_was_enabled
    with _gc_pause_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_pause_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def inspect_model(path: str | os.PathLike) -> ModelInfo:
    """Read a GGUF file's header and tensor infos and return its :class:`ModelInfo`.

    Only the header is parsed (the file is memory-mapped by ``gguf.GGUFReader``; tensor data is
    never touched), so this is quick even for files of many gigabytes.

    Raises:
        ModelError: missing file, not a GGUF, truncated or corrupt, no ``block_count``, no
            attention heads, or an architecture llama-server cannot serve as a split model.
    """
    with _cyclic_gc_paused():  # (until the reader and its millions of views are freed)
        return _inspect(path)


def _inspect(path: str | os.PathLike) -> ModelInfo:
    import gguf

    path = Path(path)
    try:
        file_bytes = path.stat().st_size
    except OSError as e:
        raise ModelError(_unreadable(path, e)) from None
    if not path.is_file():
        raise ModelError(translate("Model", "{path}: not a file").format(path=path))
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise ModelError(_unreadable(path, e)) from None
    if magic != b"GGUF":
        raise ModelError(translate("Model", "{path}: not a GGUF file (it starts with {magic}, expected "
                                            "b'GGUF')").format(path=path, magic=repr(magic)))
    try:
        reader = gguf.GGUFReader(path, "r")
    except Exception as e:  # the reader raises anything from IndexError to KeyError on bad bytes
        raise ModelError(translate("Model", "{path}: truncated or corrupt GGUF file ({why})")
                         .format(path=path, why=f"{type(e).__name__}: {e}")) from None

    if _field_value(reader, "split.no") not in (0, None):  # a later file of a split model
        first = (split_shard_paths(path) or [Path("…-00001-of-….gguf")])[0].name
        raise ModelError(translate("Model", "{path}: this is not the first file of a split model; "
                                            "open {first} (llama.cpp finds the other files by name)")
                         .format(path=path, first=first))
    arch = _field_value(reader, "general.architecture")
    if not isinstance(arch, str) or not arch:
        raise ModelError(f"{path}: the GGUF header has no general.architecture")
    if arch in NON_GENERATIVE_ARCHS:
        raise ModelError(translate("Model", "{path}: unsupported architecture {arch}: it is not a "
                                            "text-generation model that llama-server can split over "
                                            "workers").format(path=path, arch=repr(arch)))
    if arch not in set(gguf.MODEL_ARCH_NAMES.values()):
        raise ModelError(translate("Model", "{path}: unsupported architecture {arch}: not a model "
                                            "architecture llama.cpp knows").format(path=path, arch=repr(arch)))

    def key(suffix: str):
        return _field_value(reader, f"{arch}.{suffix}")

    n_layer = _int_or_list(key("block_count"), f"{arch}.block_count", path)
    if n_layer is None:
        raise ModelError(f"{path}: the GGUF header has no {arch}.block_count (layer count)")
    if isinstance(n_layer, list) or n_layer < 1:
        raise ModelError(f"{path}: {arch}.block_count must be a positive number, got {n_layer!r}")
    embd = _int_or_list(key("embedding_length"), f"{arch}.embedding_length", path)
    if not isinstance(embd, int) or embd < 1:
        raise ModelError(f"{path}: the GGUF header has no usable {arch}.embedding_length")
    heads = _int_or_list(key("attention.head_count"), f"{arch}.attention.head_count", path)
    if heads is None or (isinstance(heads, list) and not any(heads)) or heads == 0:
        raise ModelError(f"{path}: unsupported architecture {arch!r}: no attention heads "
                         f"({arch}.attention.head_count), so its cache cannot be sized")
    heads_list = heads if isinstance(heads, list) else [heads] * n_layer
    kv = _int_or_list(key("attention.head_count_kv"), f"{arch}.attention.head_count_kv", path)
    kv_list = heads_list if kv is None else (kv if isinstance(kv, list) else [kv] * n_layer)
    if len(heads_list) != n_layer or len(kv_list) != n_layer:
        raise ModelError(f"{path}: per-layer head counts do not match block_count {n_layer}")
    n_head = max(heads_list)
    head_k = _int_or_list(key("attention.key_length"), f"{arch}.attention.key_length", path)
    head_v = _int_or_list(key("attention.value_length"), f"{arch}.attention.value_length", path)
    head_k = head_k if isinstance(head_k, int) else embd // n_head
    head_v = head_v if isinstance(head_v, int) else head_k
    ctx = _int_or_list(key("context_length"), f"{arch}.context_length", path)
    ff = _int_or_list(key("feed_forward_length"), f"{arch}.feed_forward_length", path)
    ff = max(ff) if isinstance(ff, list) and ff else (ff if isinstance(ff, int) else 0)
    file_type = _int_or_list(_field_value(reader, "general.file_type"), "general.file_type", path)
    name = _field_value(reader, "general.name")
    n_expert = _int_or_list(key("expert_count"), f"{arch}.expert_count", path)
    n_used = _int_or_list(key("expert_used_count"), f"{arch}.expert_used_count", path)
    expert_ff = _int_or_list(key("expert_feed_forward_length"), f"{arch}.expert_feed_forward_length", path)
    window, swa_layers = _sliding_window(arch, n_layer, key("attention.sliding_window"),
                                         key("attention.sliding_window_pattern"))

    shards = _split_shards(reader, path, file_bytes)
    if len(shards) > 1:
        file_bytes = sum(size for _, _, size in shards)

    slots = [0] * (n_layer + 1)
    expert_slots = [0] * (n_layer + 1)
    input_bytes = 0
    token_embd = 0
    vocab = 0
    has_output = False
    sinks = False
    type_bytes: dict[str, int] = {}
    total = 0
    n_params = 0
    extents: list[TensorExtent] = []
    for shard_path, t, shard_bytes in ((p, t, size) for p, r, size in shards for t in r.tensors):
        nbytes = int(t.n_bytes)
        end = int(t.data_offset) + nbytes
        if end > shard_bytes:
            raise ModelError(f"{shard_path}: truncated GGUF file: tensor {t.name} ends at byte {end} "
                             f"but the file has only {shard_bytes}")
        total += nbytes
        n_params += int(t.n_elements)
        type_bytes[t.tensor_type.name] = type_bytes.get(t.tensor_type.name, 0) + nbytes
        extent = dict(offset=int(t.data_offset), nbytes=nbytes, name=t.name, ggml_type=t.tensor_type.name,
                      shape=tuple(int(x) for x in t.shape))
        m = _BLOCK_RE.match(t.name)
        if m:
            i = int(m.group(1))
            if i >= n_layer:
                raise ModelError(f"{path}: tensor {t.name} belongs to block {i}, but "
                                 f"{arch}.block_count is {n_layer}")
            slots[i] += nbytes
            sinks = sinks or t.name.endswith(".attn_sinks.weight")
            if _EXPERTS_RE.search(t.name):
                expert_slots[i] += nbytes
            extents.append(TensorExtent(i, **extent))
        elif t.name.startswith(_OUTPUT_NAMES):
            slots[n_layer] += nbytes
            has_output = has_output or t.name == "output.weight"
            extents.append(TensorExtent(n_layer, **extent))
        else:
            input_bytes += nbytes
            extents.append(TensorExtent(-1, **extent))
            if t.name == "token_embd.weight":
                token_embd = nbytes
                vocab = int(t.shape[-1]) if len(t.shape) > 1 else 0
    if token_embd == 0:
        raise ModelError(f"{path}: the file has no token_embd.weight tensor")
    if any(b == 0 for b in slots[:n_layer]):
        missing = [i for i, b in enumerate(slots[:n_layer]) if b == 0]
        raise ModelError(f"{path}: no tensors for block(s) {missing[:8]} although "
                         f"{arch}.block_count is {n_layer}")
    tied = not has_output
    if tied:
        # llama.cpp duplicates token_embd into the output layer's buffer (TENSOR_DUPLICATED).
        slots[n_layer] += token_embd

    info = ModelInfo(
        path=path,
        file_bytes=file_bytes,
        architecture=arch,
        name=name if isinstance(name, str) and name else path.stem,
        n_layer=n_layer,
        context_length=ctx if isinstance(ctx, int) else None,
        embedding_length=embd,
        feed_forward_length=ff,
        n_head=n_head,
        n_head_kv=tuple(kv_list),
        head_dim_k=head_k,
        head_dim_v=head_v,
        vocab_size=vocab,
        file_type=file_type if isinstance(file_type, int) else None,
        quantization=_quant_label(file_type if isinstance(file_type, int) else None, type_bytes),
        slot_bytes=tuple(slots),
        input_bytes=input_bytes,
        token_embd_bytes=token_embd,
        tied_embeddings=tied,
        tensor_bytes=total,
        # file ranges of a split model lie in several files: not comparable with one mapping
        tensors=tuple(extents) if len(shards) == 1 else (),
        n_params=n_params,
        sliding_window=window,
        swa_layers=swa_layers,
        expert_count=n_expert if isinstance(n_expert, int) else 0,
        expert_used_count=n_used if isinstance(n_used, int) else 0,
        expert_feed_forward_length=expert_ff if isinstance(expert_ff, int) else 0,
        expert_slot_bytes=tuple(expert_slots) if any(expert_slots) else (),
        attention_sinks=sinks,
    )
    _free_gradually(reader)
    return info


def _free_gradually(reader) -> None:
    """Drop a reader's parsed fields a slice at a time.

    Freed all at once, a 262k-token vocabulary's million numpy views go in one uninterrupted
    run that holds the GIL for about half a second (a window showing the read stalls for it);
    between the slices other threads get their turn."""
    for field in reader.fields.values():
        parts = field.parts
        while parts:
            del parts[-4096:]


def _sliding_window(arch: str, n_layer: int, window, pattern) -> tuple[int, tuple[bool, ...]]:
    """The window and which blocks use it, as llama.cpp's loader decides (:data:`SWA_PERIOD`).

    ``pattern`` from the file is a period (every ``period``-th layer global) or one flag per
    layer. An architecture whose pattern herd does not know, with no pattern in the file, is
    treated as all global: its estimate errs on the safe side."""
    if not isinstance(window, int) or window <= 0:
        return 0, ()
    if isinstance(pattern, list) and len(pattern) == n_layer:
        return window, tuple(bool(x) for x in pattern)
    period = pattern if isinstance(pattern, int) and not isinstance(pattern, bool) else SWA_PERIOD.get(arch)
    if period is None:
        return 0, ()
    # llama.cpp: layer il is windowed when period == 0 or il % period < period - 1
    return window, tuple(period == 0 or il % period < period - 1 for il in range(n_layer))


_SHARD_RE = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


def split_shard_paths(path: str | os.PathLike) -> list[Path] | None:
    """The files of a split GGUF (``name-00001-of-00003.gguf`` …) given any one of them, in
    order; None when the name is not a shard's."""
    path = Path(path)
    m = _SHARD_RE.match(path.name)
    if not m:
        return None
    count = int(m.group("count"))
    return [path.with_name(f"{m.group('stem')}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]


def _split_shards(reader, path: Path, file_bytes: int) -> list[tuple[Path, object, int]]:
    """``(path, reader, size)`` of every file of the model: just this one, or all the shards
    of a split GGUF (``split.count`` > 1; llama.cpp loads them given the first)."""
    import gguf

    count = _field_value(reader, "split.count")
    if not isinstance(count, int) or count <= 1:
        return [(path, reader, file_bytes)]
    names = split_shard_paths(path)
    if names is None or len(names) != count:
        raise ModelError(f"{path}: a split model of {count} files must be named "
                         f"NAME-00001-of-{count:05d}.gguf (llama.cpp finds the other files by name)")
    out = [(path, reader, file_bytes)]
    for shard in names[1:]:
        try:
            size = shard.stat().st_size
            out.append((shard, gguf.GGUFReader(shard, "r"), size))
        except OSError as e:
            raise ModelError(translate("Model", "{path}: part of a split model is missing or unreadable "
                                                "({why})").format(path=shard, why=e.strerror or e)) from None
        except Exception as e:  # the reader raises anything on bad bytes
            raise ModelError(translate("Model", "{path}: truncated or corrupt GGUF file ({why})")
                             .format(path=shard, why=f"{type(e).__name__}: {e}")) from None
    return out


def file_sha256(path: str | os.PathLike, chunk_bytes: int = 1 << 20,
                progress: Callable[[int, int], None] | None = None) -> str:
    """The SHA-256 of a file as hex, read in chunks (never the whole file in memory).

    ``progress(done_bytes, total_bytes)`` is called after each chunk, for long hashes of large
    models. Raises :class:`ModelError` when the file cannot be read.
    """
    path = Path(path)
    h = hashlib.sha256()
    try:
        total = path.stat().st_size
        done = 0
        with open(path, "rb") as f:
            while True:
                block = f.read(chunk_bytes)
                if not block:
                    break
                h.update(block)
                done += len(block)
                if progress is not None:
                    progress(done, total)
    except OSError as e:
        raise ModelError(_unreadable(path, e)) from None
    return h.hexdigest()
