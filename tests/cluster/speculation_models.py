"""Model pairs for speculation tests (#35): a target and a smaller draft that agree on every token.

Random demo models never agree, so a draft's acceptance between two of them is nil. Here every
block of both adds nothing to the residual stream (``attn_output`` and ``ffn_down`` are zero): the
blocks still cost their full compute, but the next token depends only on the token embeddings,
the output norm and the output matrix, which the two share. So the draft, with fewer blocks,
predicts exactly what the target does — a real llama-server then accepts nearly every draft.
"""

from __future__ import annotations

import re
from pathlib import Path

import gguf
import numpy as np

from gui.cluster.llama.random_model import DemoShape, write_demo_model


def agreeing_pair(folder: Path, *, layers: int = 8, draft_layers: int = 1, embd: int = 512) -> tuple[Path, Path]:
    """``(target, draft)`` GGUF files in ``folder``: ``layers`` blocks and ``draft_layers``, one
    vocabulary, the same predictions (see the module docstring)."""
    base = write_demo_model(folder / "base.gguf", DemoShape(layers=layers, embd=embd, vocab=4096))
    target = _without_block_outputs(base, folder / "agreeing-target.gguf", layers)
    draft = _without_block_outputs(base, folder / "agreeing-draft.gguf", draft_layers)
    base.unlink()
    return target, draft


def _without_block_outputs(source: Path, path: Path, layers: int) -> Path:
    """A copy of ``source`` with its first ``layers`` blocks, whose outputs are zero."""
    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(path, "llama")
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = field.types[0]
        value = layers if key == "llama.block_count" else field.contents()
        writer.add_key_value(key, value, vtype, sub_type=field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None)
    for tensor in reader.tensors:
        block = re.match(r"blk\.(\d+)\.", tensor.name)
        if block and int(block.group(1)) >= layers:
            continue
        data = np.array(tensor.data)
        if tensor.name.endswith(("attn_output.weight", "ffn_down.weight")):
            data = np.zeros_like(data)
        writer.add_tensor(tensor.name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
