"""Free TCP port numbers for a child process that binds them itself (an RPC worker, llama-server).

Asking the kernel for a free port and closing the socket leaves a gap: the number stays free
until the child binds it, and the next ask can get the same number back. Two workers started
together were told one port; the second failed with "Failed to create server socket". This
module remembers the numbers it handed out lately and never gives one twice in a row.
"""

from __future__ import annotations

import socket
import threading
from collections import deque

LOOPBACK = "127.0.0.1"

# Enough for every port a test session or a demo cluster holds at once.
_RECENT: deque[int] = deque(maxlen=512)
_LOCK = threading.Lock()
_TRIES = 100


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that was free on ``host`` a moment ago and that this process has not handed
    out among its last 512 answers.

    Raises :class:`OSError` when ``host`` is not an address of this computer, or when the kernel
    keeps answering with numbers already handed out (the ephemeral range is nearly exhausted)."""
    with _LOCK:
        for _ in range(_TRIES):
            with socket.socket() as s:
                s.bind((host, 0))
                port = s.getsockname()[1]
            if port not in _RECENT:
                _RECENT.append(port)
                return port
    raise OSError(f"no free TCP port on {host} that was not handed out lately, after {_TRIES} tries")
