"""A real model with a long header: the demo model with one more key, a list of empty strings,
put first in its header.

A model's header reads in milliseconds with the bounded reader (#37, item 11); tests of what
happens while a read takes a while, or of a header too long for a hub, need one that does not.
The key's size is a multiple of the alignment, so the tensors' offsets stay right and the file
is a valid model.
"""

from __future__ import annotations

import struct
from pathlib import Path

from gui.cluster.llama.gguf_header import parse_header
from gui.cluster.llama.random_model import DemoShape, write_demo_model

#: The key's name: 8 bytes, so that with the 24 bytes around it and 8 per string the key is a
#: multiple of 32 bytes long (the default alignment) when the count is a multiple of 4.
PAD_KEY = b"herd.pad"


def write_padded_model(path: Path, strings: int, shape: DemoShape = DemoShape(layers=4)) -> Path:
    """Write the demo model of ``shape`` with ``strings`` empty strings (``8 * strings`` bytes)
    in a first key of its header, at ``path``."""
    raw = write_demo_model(path.with_name(path.stem + "-plain.gguf"), shape).read_bytes()
    alignment = parse_header(raw).fields.get("general.alignment", 32)
    extra = struct.pack("<Q", len(PAD_KEY)) + PAD_KEY + struct.pack("<IIQ", 9, 8, strings) + b"\0" * (8 * strings)
    assert len(extra) % alignment == 0, "use a count of strings that is a multiple of 4"
    n_keys = struct.unpack_from("<Q", raw, 16)[0]
    path.write_bytes(raw[:16] + struct.pack("<Q", n_keys + 1) + extra + raw[24:])
    return path
