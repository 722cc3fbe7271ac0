"""One colour per node, the same in every view: the split bar, the node cards, the dashboard.

Every view asks :func:`node_colors` with the same nodes (the window passes each view the names of
all the nodes it knows), so a node is drawn in one colour everywhere, and in the same colour
after a restart.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from gui.widgets.split_bar import PALETTE


def node_colors(names: Mapping[str, str]) -> dict[str, str]:
    """``{node id: colour}`` for ``{node id: node name}``.

    A node's colour is picked by its name (so a PC keeps it between runs, whatever order the
    nodes are found in); when two names want the same colour, the one first by name keeps it
    and the other takes the next free one. Only with more nodes than colours do two share one.
    """
    out: dict[str, str] = {}
    taken: set[str] = set()
    for node_id, name in sorted(names.items(), key=lambda kv: (kv[1], kv[0])):
        start = zlib.crc32(name.encode("utf-8")) % len(PALETTE)
        color = PALETTE[start]
        for k in range(len(PALETTE)):
            c = PALETTE[(start + k) % len(PALETTE)]
            if c not in taken:
                color = c
                break
        out[node_id] = color
        taken.add(color)
    return out
