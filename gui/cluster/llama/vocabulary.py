"""A model's vocabulary as its GGUF header gives it, and whether two models share one (#35).

Speculative decoding checks a draft's tokens against the target's by id, so llama-server accepts
a draft only with the target's vocabulary ("the target and draft vocabs are not compatible").
Herd finds out before it starts anything: :func:`read_vocabulary` reads the tokenizer's kind
(``tokenizer.ggml.model``: ``llama``, ``gpt2``, ``test`` …), the token count and a SHA-256 of
the token list as the file holds it — hashed in place by the bounded header reader, so Gemma 3's
262,144 tokens cost no Python object each. :func:`vocabulary_mismatch` says in words why two
differ. :func:`mtp_layers` says whether a model carries its own multi-token-prediction heads
(llama.cpp's ``{arch}.nextn_predict_layers`` key, and ``blk.N.nextn.*`` tensors).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from agent.i18n import translate
from gui.cluster.llama.gguf_header import GGUFHeader, SkippedValue
from gui.cluster.llama.model import ModelError, read_model_header

TOKENIZER_KEY = "tokenizer.ggml.model"
TOKENS_KEY = "tokenizer.ggml.tokens"
#: llama.cpp's key for the count of multi-token-prediction ("next-n") layers (LLM_KV_NEXTN_PREDICT_LAYERS).
NEXTN_KEY = "{arch}.nextn_predict_layers"
_NEXTN_TENSOR = re.compile(r"^blk\.(\d+)\.nextn\.")


@dataclass(frozen=True)
class Vocabulary:
    """What identifies a model's vocabulary.

    Attributes:
        tokenizer: the tokenizer's kind (``tokenizer.ggml.model``), e.g. ``llama`` or ``gpt2``.
        n_tokens: how many tokens it has.
        tokens_sha256: SHA-256 (hex) of the token list's bytes in the file.
    """

    tokenizer: str
    n_tokens: int
    tokens_sha256: str


def vocabulary_of(header: GGUFHeader, digest: str) -> Vocabulary | None:
    """The vocabulary a header describes (``digest``: its token list's hash), None without one."""
    tokens = header.fields.get(TOKENS_KEY)
    kind = header.get(TOKENIZER_KEY)
    if tokens is None or not isinstance(kind, str):
        return None
    count = tokens.count if isinstance(tokens, SkippedValue) else len(tokens) if isinstance(tokens, list) else 0
    return Vocabulary(kind, count, digest)


def read_vocabulary(path: str | os.PathLike) -> Vocabulary:
    """The vocabulary of the GGUF file at ``path``.

    Raises:
        ModelError: the file cannot be read or is no GGUF (in words), or it has no tokenizer.
    """
    header = read_model_header(path, (TOKENS_KEY,))
    vocab = vocabulary_of(header, header.digests.get(TOKENS_KEY, ""))
    if vocab is None:
        raise ModelError(translate("Speculation", "{path}: the file has no vocabulary (no tokenizer.ggml.model "
                                                  "and tokenizer.ggml.tokens keys)").format(path=path))
    return vocab


def vocabulary_mismatch(target: Vocabulary, draft: Vocabulary) -> str | None:
    """Why a model with vocabulary ``draft`` cannot draft for one with ``target``, in words;
    None when they are the same."""
    if draft.tokenizer != target.tokenizer:
        return translate("Speculation", "different tokenizer: {draft} vs {target}").format(
            draft=draft.tokenizer, target=target.tokenizer)
    if draft.n_tokens != target.n_tokens:
        return translate("Speculation", "different vocabulary: {draft} tokens vs {target}").format(
            draft=f"{draft.n_tokens:,}", target=f"{target.n_tokens:,}")
    if draft.tokens_sha256 != target.tokens_sha256:
        return translate("Speculation", "different vocabulary: the same number of tokens ({count}), but not the "
                                        "same tokens").format(count=f"{target.n_tokens:,}")
    return None


def mtp_layers(header: GGUFHeader) -> int:
    """How many multi-token-prediction layers the model carries (0: none): llama.cpp's
    ``{arch}.nextn_predict_layers``, counted from the ``blk.N.nextn.*`` tensors when the key is
    missing. llama-server's ``--spec-type draft-mtp`` drafts with them."""
    arch = header.get("general.architecture")
    declared = header.get(NEXTN_KEY.format(arch=arch)) if isinstance(arch, str) else None
    if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
        return declared
    blocks = {m.group(1) for t in header.tensors if (m := _NEXTN_TENSOR.match(t.name))}
    return len(blocks)


def read_mtp_layers(path: str | os.PathLike) -> int:
    """:func:`mtp_layers` of the GGUF file at ``path`` (:class:`ModelError` when unreadable)."""
    return mtp_layers(read_model_header(path))
