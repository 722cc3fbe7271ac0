"""What a GGUF model file holds, as far as planning a split needs to know.

:func:`inspect_model` reads only the header and the tensor infos of a GGUF file (with the bounded
reader of :mod:`gui.cluster.llama.gguf_header`; no weight is read), and returns a :class:`ModelInfo`: the
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

import hashlib
import os
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from agent.i18n import translate
from gui.cluster.llama.gguf_header import (MAGIC as GGUF_MAGIC, GGUFHeader, HeaderError, HeaderTruncated, TensorInfo,
                                          read_header)

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
#: llama.cpp pads each cache stream's context, and the windowed cache, to a multiple of this many cells.
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
        streams = 1 if shape.unified else max(1, shape.sequences)
        # Each stream's context is padded up to 256 cells (src/llama-context.cpp): -c 2048 -np 3
        # gives three streams of 768 cells, 2304 in all, as llama-server's log says (#34).
        stream_ctx = -(-(shape.ctx // streams) // SWA_CELL_PAD) * SWA_CELL_PAD
        if layer is None or not self.is_windowed(layer) or shape.swa_full:
            return streams * stream_ctx
        per_stream = self.sliding_window * (shape.sequences if shape.unified else 1) + shape.ubatch
        padded = -(-per_stream // SWA_CELL_PAD) * SWA_CELL_PAD
        return streams * min(stream_ctx, padded)

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


def inspect_model(path: str | os.PathLike) -> ModelInfo:
    """Read a GGUF file's header and tensor infos and return its :class:`ModelInfo`.

    Only the header is parsed, by the bounded reader of :mod:`gui.cluster.llama.gguf_header`
    (no weight and no vocabulary entry is read), so this is quick and small for files of many
    gigabytes and for hostile ones alike (#32, #37).

    Raises:
        ModelError: missing file, not a GGUF, truncated or corrupt, no ``block_count``, no
            attention heads, or an architecture llama-server cannot serve as a split model.
    """
    path = Path(path)
    header, file_bytes = _open_header(path)
    if header.get("split.no") not in (0, None):  # a later file of a split model
        first = (split_shard_paths(path) or [Path("…-00001-of-….gguf")])[0].name
        raise ModelError(translate("Model", "{path}: this is not the first file of a split model; "
                                            "open {first} (llama.cpp finds the other files by name)")
                         .format(path=path, first=first))
    arch = _architecture(header, path)
    hparams = _hyperparameters(header, arch, path)
    shards = _split_shards(header, path, file_bytes)
    if len(shards) > 1:
        file_bytes = sum(size for _, _, size in shards)
    tally = _tally_tensors(shards, hparams["n_layer"], arch, path)
    return _model_info(path, file_bytes, header, arch, hparams, tally, single_file=len(shards) == 1)


def read_model_header(path: str | os.PathLike, digest_keys: Collection[str] = ()) -> GGUFHeader:
    """The header of the GGUF file at ``path`` (with the keys in ``digest_keys`` hashed, see
    :func:`~gui.cluster.llama.gguf_header.parse_header`); every failure a :class:`ModelError`
    that names the file and the problem in words."""
    return _open_header(Path(path), digest_keys)[0]


def _open_header(path: Path, digest_keys: Collection[str] = ()) -> tuple[GGUFHeader, int]:
    """The header of one GGUF file and the file's size, every failure a :class:`ModelError`
    in words (#37, item 5: never Python's byte notation)."""
    try:
        file_bytes = path.stat().st_size
    except OSError as e:
        raise ModelError(_unreadable(path, e)) from None
    if not path.is_file():
        raise ModelError(translate("Model", "{path}: not a file").format(path=path))
    try:
        with open(path, "rb") as f:
            magic = f.read(len(GGUF_MAGIC))
        if magic != GGUF_MAGIC:
            raise ModelError(translate("Model", "{path}: not a GGUF file (it does not start with the GGUF "
                                                "signature that every llama.cpp model file has)").format(path=path))
        return read_header(path, digest_keys), file_bytes
    except OSError as e:
        raise ModelError(_unreadable(path, e)) from None
    except HeaderTruncated as e:
        raise ModelError(translate("Model", "{path}: truncated or corrupt GGUF file: {why}")
                         .format(path=path, why=e)) from None
    except HeaderError as e:
        raise ModelError(translate("Model", "{path}: corrupt GGUF file: {why}").format(path=path, why=e)) from None


def _architecture(header: GGUFHeader, path: Path) -> str:
    """``general.architecture``, refused when llama-server cannot split it as a chat model."""
    import gguf

    arch = header.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise ModelError(f"{path}: the GGUF header has no general.architecture")
    if arch in NON_GENERATIVE_ARCHS:
        raise ModelError(translate("Model", "{path}: unsupported architecture {arch}: it is not a "
                                            "text-generation model that llama-server can split over "
                                            "workers").format(path=path, arch=repr(arch)))
    if arch not in set(gguf.MODEL_ARCH_NAMES.values()):
        raise ModelError(translate("Model", "{path}: unsupported architecture {arch}: not a model "
                                            "architecture llama.cpp knows").format(path=path, arch=repr(arch)))
    return arch


def _hyperparameters(header: GGUFHeader, arch: str, path: Path) -> dict:
    """The shape keys of ``arch`` the planner uses, checked: layers, width, heads, context."""
    def key(suffix: str):
        return _int_or_list(header.get(f"{arch}.{suffix}"), f"{arch}.{suffix}", path)

    n_layer = key("block_count")
    if n_layer is None:
        raise ModelError(f"{path}: the GGUF header has no {arch}.block_count (layer count)")
    if isinstance(n_layer, list) or n_layer < 1:
        raise ModelError(f"{path}: {arch}.block_count must be a positive number, got {n_layer!r}")
    embd = key("embedding_length")
    if not isinstance(embd, int) or embd < 1:
        raise ModelError(f"{path}: the GGUF header has no usable {arch}.embedding_length")
    heads = key("attention.head_count")
    if heads is None or (isinstance(heads, list) and not any(heads)) or heads == 0:
        raise ModelError(f"{path}: unsupported architecture {arch!r}: no attention heads "
                         f"({arch}.attention.head_count), so its cache cannot be sized")
    heads_list = heads if isinstance(heads, list) else [heads] * n_layer
    kv = key("attention.head_count_kv")
    kv_list = heads_list if kv is None else (kv if isinstance(kv, list) else [kv] * n_layer)
    if len(heads_list) != n_layer or len(kv_list) != n_layer:
        raise ModelError(f"{path}: per-layer head counts do not match block_count {n_layer}")
    n_head = max(heads_list)
    head_k, head_v = key("attention.key_length"), key("attention.value_length")
    head_k = head_k if isinstance(head_k, int) else embd // n_head
    ff = key("feed_forward_length")
    window, swa_layers = _sliding_window(arch, n_layer, header.get(f"{arch}.attention.sliding_window"),
                                         header.get(f"{arch}.attention.sliding_window_pattern"))
    return dict(
        n_layer=n_layer, embedding_length=embd, n_head=n_head, n_head_kv=tuple(kv_list),
        head_dim_k=head_k, head_dim_v=head_v if isinstance(head_v, int) else head_k,
        context_length=_int_or_none(key("context_length")),
        feed_forward_length=max(ff) if isinstance(ff, list) and ff else (ff if isinstance(ff, int) else 0),
        expert_count=_int_or_none(key("expert_count")) or 0,
        expert_used_count=_int_or_none(key("expert_used_count")) or 0,
        expert_feed_forward_length=_int_or_none(key("expert_feed_forward_length")) or 0,
        sliding_window=window, swa_layers=swa_layers,
    )


def _int_or_none(value) -> int | None:
    return value if isinstance(value, int) else None


@dataclass
class _TensorTally:
    """What :func:`_tally_tensors` adds up over every tensor of every file of a model."""

    slots: list[int]
    expert_slots: list[int]
    input_bytes: int = 0
    token_embd: int = 0
    vocab: int = 0
    has_output: bool = False
    sinks: bool = False
    total: int = 0
    n_params: int = 0
    type_bytes: dict[str, int] = field(default_factory=dict)
    extents: list[TensorExtent] = field(default_factory=list)


def _tensor_size(t: TensorInfo, shard_path: Path) -> tuple[str, int, int]:
    """A tensor's ggml type name, elements and bytes, from its type and shape."""
    import gguf

    try:
        qtype = gguf.GGMLQuantizationType(t.ggml_type)
        block, type_bytes = gguf.GGML_QUANT_SIZES[qtype]
    except (ValueError, KeyError):
        raise ModelError(translate("Model", "{path}: tensor {name} has a ggml type ({type}) that llama.cpp "
                                            "does not know").format(path=shard_path, name=t.name,
                                                                    type=t.ggml_type)) from None
    elements = 1
    for dim in t.shape:
        elements *= dim
    if t.shape and t.shape[0] % block:
        raise ModelError(f"{shard_path}: tensor {t.name}: its first dimension {t.shape[0]} is not a "
                         f"multiple of the {qtype.name} block size {block}")
    return qtype.name, elements, elements // block * type_bytes


def _tally_tensors(shards: list[tuple[Path, GGUFHeader, int]], n_layer: int, arch: str,
                   path: Path) -> _TensorTally:
    """Put each tensor's bytes in its slot (a block, the output layer, or the host's inputs)."""
    tally = _TensorTally(slots=[0] * (n_layer + 1), expert_slots=[0] * (n_layer + 1))
    for shard_path, header, shard_bytes in shards:
        for t in header.tensors:
            type_name, elements, nbytes = _tensor_size(t, shard_path)
            end = t.offset + nbytes
            if end > shard_bytes:
                raise ModelError(f"{shard_path}: truncated GGUF file: tensor {t.name} ends at byte {end} "
                                 f"but the file has only {shard_bytes}")
            tally.total += nbytes
            tally.n_params += elements
            tally.type_bytes[type_name] = tally.type_bytes.get(type_name, 0) + nbytes
            extent = dict(offset=t.offset, nbytes=nbytes, name=t.name, ggml_type=type_name, shape=t.shape)
            m = _BLOCK_RE.match(t.name)
            if m:
                i = int(m.group(1))
                if i >= n_layer:
                    raise ModelError(f"{path}: tensor {t.name} belongs to block {i}, but "
                                     f"{arch}.block_count is {n_layer}")
                tally.slots[i] += nbytes
                tally.sinks = tally.sinks or t.name.endswith(".attn_sinks.weight")
                if _EXPERTS_RE.search(t.name):
                    tally.expert_slots[i] += nbytes
                tally.extents.append(TensorExtent(i, **extent))
            elif t.name.startswith(_OUTPUT_NAMES):
                tally.slots[n_layer] += nbytes
                tally.has_output = tally.has_output or t.name == "output.weight"
                tally.extents.append(TensorExtent(n_layer, **extent))
            else:
                tally.input_bytes += nbytes
                tally.extents.append(TensorExtent(-1, **extent))
                if t.name == "token_embd.weight":
                    tally.token_embd = nbytes
                    tally.vocab = t.shape[-1] if len(t.shape) > 1 else 0
    return tally


def _model_info(path: Path, file_bytes: int, header: GGUFHeader, arch: str, hparams: dict,
                tally: _TensorTally, *, single_file: bool) -> ModelInfo:
    """The :class:`ModelInfo` of the checked facts, after the checks that need every tensor."""
    n_layer = hparams["n_layer"]
    if tally.token_embd == 0:
        raise ModelError(f"{path}: the file has no token_embd.weight tensor")
    missing = [i for i, b in enumerate(tally.slots[:n_layer]) if b == 0]
    if missing:
        raise ModelError(f"{path}: no tensors for block(s) {missing[:8]} although "
                         f"{arch}.block_count is {n_layer}")
    slots = list(tally.slots)
    tied = not tally.has_output
    if tied:
        # llama.cpp duplicates token_embd into the output layer's buffer (TENSOR_DUPLICATED).
        slots[n_layer] += tally.token_embd
    file_type = _int_or_list(header.get("general.file_type"), "general.file_type", path)
    file_type = file_type if isinstance(file_type, int) else None
    name = header.get("general.name")
    return ModelInfo(
        path=path, file_bytes=file_bytes, architecture=arch,
        name=name if isinstance(name, str) and name else path.stem,
        vocab_size=tally.vocab, file_type=file_type, quantization=_quant_label(file_type, tally.type_bytes),
        slot_bytes=tuple(slots), input_bytes=tally.input_bytes, token_embd_bytes=tally.token_embd,
        tied_embeddings=tied, tensor_bytes=tally.total,
        # file ranges of a split model lie in several files: not comparable with one mapping
        tensors=tuple(tally.extents) if single_file else (),
        n_params=tally.n_params,
        expert_slot_bytes=tuple(tally.expert_slots) if any(tally.expert_slots) else (),
        attention_sinks=tally.sinks,
        **hparams,
    )


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


def _split_shards(header: GGUFHeader, path: Path, file_bytes: int) -> list[tuple[Path, GGUFHeader, int]]:
    """``(path, header, size)`` of every file of the model: just this one, or all the shards
    of a split GGUF (``split.count`` > 1; llama.cpp loads them given the first)."""
    count = header.get("split.count")
    if not isinstance(count, int) or count <= 1:
        return [(path, header, file_bytes)]
    names = split_shard_paths(path)
    if names is None or len(names) != count:
        raise ModelError(f"{path}: a split model of {count} files must be named "
                         f"NAME-00001-of-{count:05d}.gguf (llama.cpp finds the other files by name)")
    out = [(path, header, file_bytes)]
    for shard in names[1:]:
        try:
            shard.stat()
        except OSError as e:
            raise ModelError(translate("Model", "{path}: part of a split model is missing or unreadable "
                                                "({why})").format(path=shard, why=e.strerror or e)) from None
        shard_header, size = _open_header(shard)
        out.append((shard, shard_header, size))
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
