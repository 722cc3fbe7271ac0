"""The compute-buffer model: what llama-server's compute buffers take on each device
for a plan (per model kind: attention masks, routed experts, pipeline copies), as measured on
build 11434 (``bench/models``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from gui.cluster.llama.model import DEFAULT_SEQUENCES, DEFAULT_UBATCH, CacheShape
from gui.cluster.planning.plan.assignment import Plan

if TYPE_CHECKING:  # only for annotations; keeps this module importable without gguf
    from gui.cluster.llama.model import ModelInfo


#: Tokens whose logits llama-server keeps per step (one per parallel slot, ``-np``).
DEFAULT_OUTPUTS = DEFAULT_SEQUENCES

#: Input copies per device under pipeline parallelism (GGML_SCHED_MAX_COPIES in ggml-backend.cpp).
PIPELINE_COPIES = 4

#: Hidden-state-sized (``ub × n_embd`` f32) tensors live at the peak of a compute buffer, by
#: where the buffer is (``first``: the device holding block 0) and whether the scheduler runs a
#: pipeline (:func:`pipeline_parallel`). They are the residual stream, its normed copy and the
#: split inputs the scheduler copies in from the previous backend (ggml-backend.cpp: a pipeline
#: keeps GGML_SCHED_MAX_COPIES copies of every split input, and the first device of one also
#: keeps the token embeddings' rows). ggml-alloc reuses freed tensors, so a buffer holds the
#: tensors live at its peak, not all of them; these counts are read off build 11434's
#: ``sched_reserve: … compute buffer size`` over widths 256-1024, feed-forward widths 512-2816
#: and contexts 1024-32768 (``bench/models``).
_HIDDEN_COPIES = {("device", False): 2, ("first", False): 4, ("device", True): 7, ("first", True): 16,
                  ("host", False): 5, ("host-no-blocks", False): 4, ("host", True): 10,
                  ("host-no-blocks", True): 10}


#: Hidden-state-sized tensors live during a block's attention on a device without a pipeline:
#: the residual, the normed input, Q, the attention output and its projection.
_ATTENTION_COPIES = 5

#: What else a compute buffer holds: the small inputs (token ids, positions, output ids; copied
#: per pipeline stage) and each tensor's alignment in ggml-alloc.c. Measured at up to 0.11 MiB.
_SLACK_BYTES = 64 << 10


def _mask_bytes(model: ModelInfo, shape: CacheShape, ub: int, slots: Iterable[int] | None) -> tuple[int, int]:
    """The f16 attention masks (``ub × n_kv``; llama-graph.cpp builds them f16 when flash
    attention is on, one per kind of KV cache) the blocks in ``slots`` read (all kinds when
    None): ``(windowed, global)`` bytes. A windowed block's mask spans its window's cells
    (:meth:`~gui.cluster.llama.model.ModelInfo.kv_cells`), a global block's the whole context."""
    streams = 1 if shape.unified else max(1, shape.sequences)
    blocks = range(model.n_layer) if slots is None else [s for s in slots if s < model.n_layer]
    windowed = [b for b in blocks if model.is_windowed(b)]
    overall = [b for b in blocks if not model.is_windowed(b)]
    w = model.kv_cells(shape, windowed[0]) // streams * ub * 2 if windowed else 0
    g = model.kv_cells(shape, overall[0]) // streams * ub * 2 if overall else 0
    return w, g


def _ffn_bytes(model: ModelInfo, ub: int) -> tuple[int, int]:
    """The feed-forward intermediates of one block (llama-graph.cpp ``build_ffn`` /
    ``build_moe_ffn``) and the largest one of them.

    A dense block: gate, up and their product, ``ub × n_ff`` f32 each. A mixture of experts:
    the same per routed expert, ``[n_ff_exp, n_expert_used, ub]`` f32 (``E``); the experts'
    outputs ``[n_embd, n_expert_used, ub]`` beyond the one hidden state they replace; the
    router's logits and probabilities ``[n_expert, ub]``. When the experts' outputs do not fit
    in the place gate and up leave (they are at least ``2E``), ggml-alloc puts them above it,
    which leaves one more ``E`` unused below: measured on build 11434 with 2-8 routed experts
    of width 256-768 and widths 256-1024 (``bench/models``)."""
    if model.expert_count and model.expert_used_count:
        exp_ff = model.expert_feed_forward_length or model.feed_forward_length
        one = ub * exp_ff * model.expert_used_count * 4
        outputs = model.expert_used_count * ub * model.embedding_length * 4
        router = 2 * ub * model.expert_count * 4
        gap = one if outputs >= 2 * one else 0
        return 3 * one + gap + outputs - ub * model.embedding_length * 4 + router, one
    one = ub * model.feed_forward_length * 4
    return 3 * one, one


def compute_buffer_bytes(model: ModelInfo, ctx: int | CacheShape, holds_blocks: bool, holds_output: bool,
                         n_ubatch: int = DEFAULT_UBATCH, pipeline: bool = False,
                         n_outputs: int = DEFAULT_OUTPUTS, *, host: bool = False,
                         first: bool = False, slots: Iterable[int] | None = None) -> int:
    """The compute buffer llama.cpp reserves on a device (or, with ``host``, on the host CPU)
    for its worst-case graph: one micro-batch of ``ub = min(n_ubatch, ctx)`` tokens
    (``sched_reserve`` in src/llama-context.cpp), flash attention on (the default where the
    backend supports it, as CPU and RPC-CPU do). The sum of what is live at the buffer's peak:

    * the attention masks the device's blocks read (:func:`_mask_bytes`; ``slots``, all kinds
      when None; the host builds every kind as graph inputs) — :data:`PIPELINE_COPIES` of each
      under pipeline parallelism (``pipeline``), one otherwise;
    * copies of the hidden state, ``ub × n_embd`` f32, as many as :data:`_HIDDEN_COPIES` says
      for the buffer's place (``first``: the device that holds block 0);
    * with blocks, the feed-forward intermediates (:func:`_ffn_bytes`);
    * on the host, llama-server's output buffer: the logits of ``n_outputs`` tokens (``n_vocab``
      f32 each; ``llama_context: CPU output buffer size``), wherever the output layer runs;
    * :data:`_SLACK_BYTES` for the small inputs and alignment.

    Without a pipeline a device's buffer is the larger of two moments: a block's attention (all
    its masks and :data:`_ATTENTION_COPIES` hidden states) and its feed-forward. The global mask
    of a sliding-window model is freed after the device's last global block (ggml-alloc frees a
    tensor after its last use); when the device's first block is a global one, that mask lies
    at the bottom of the buffer and the feed-forward of the windowed blocks after it takes its
    place when its tensors fit there (ggml-alloc.c, best fit).

    With ``holds_output`` the buffer is at least the output layer's logits, ``n_vocab ×
    n_outputs`` f32 (``n_outputs`` = llama-server's ``-np``): on a device with blocks they fit
    in what the last block freed, on one that holds only the output layer they are its peak.
    Checked against the real server over the model matrix of ``bench/models`` and the real
    models the tests run (``tests/cluster/models/test_model_matrix.py``).
    """
    shape = replace(CacheShape.of(ctx), ubatch=n_ubatch)
    ub = min(n_ubatch, shape.ctx)
    copies = PIPELINE_COPIES if pipeline else 1
    hidden = ub * model.embedding_length * 4
    # the host builds every mask (graph inputs); a device copies in those its blocks read
    window_mask, global_mask = (_mask_bytes(model, shape, ub, None if host else slots)
                                if host or holds_blocks else (0, 0))
    masks = window_mask + global_mask
    ffn, ffn_one = _ffn_bytes(model, ub) if holds_blocks else (0, 0)
    if host:
        place = "host" if holds_blocks else "host-no-blocks"
        logits = n_outputs * model.vocab_size * 4
        return copies * masks + _HIDDEN_COPIES[place, pipeline] * hidden + ffn + logits + _SLACK_BYTES
    place = "first" if first else "device"
    # the output layer's logits, n_vocab × n_outputs f32, on a device that holds little else
    logits = n_outputs * model.vocab_size * 4 if holds_output else 0
    if not holds_blocks:  # the output layer alone: its input is the n_outputs rows kept
        return logits + copies * n_outputs * model.embedding_length * 4 + _SLACK_BYTES
    if pipeline:
        return max(copies * masks + _HIDDEN_COPIES[place, True] * hidden + ffn, logits) + _SLACK_BYTES
    # a global mask copied in for the device's first block lies at the bottom of its buffer;
    # once the last global block is done, the windowed blocks after it put their feed-forward
    # there when its tensors fit
    blocks = [s for s in (slots or ()) if s < model.n_layer]
    freed = (window_mask and global_mask >= ffn_one and blocks
             and not model.is_windowed(blocks[0]) and model.is_windowed(blocks[-1]))
    kept = window_mask if freed else masks
    feed_forward = kept + _HIDDEN_COPIES[place, False] * hidden + ffn
    attention = masks + _ATTENTION_COPIES * hidden if holds_blocks else 0
    return max(feed_forward, attention, logits) + _SLACK_BYTES


def pipeline_parallel(plan: Plan) -> bool:
    """Whether llama.cpp will enable pipeline parallelism for ``plan`` (src/llama-context.cpp):
    more than one device in play, every slot offloaded, and no tensor overrides (``-ot``, which
    :attr:`Plan.expert_homes` use). It then keeps :data:`PIPELINE_COPIES` copies of each
    device's inputs, which costs memory."""
    return plan.host_layers == 0 and len(plan.active_assignments()) > 1 and not plan.expert_homes
