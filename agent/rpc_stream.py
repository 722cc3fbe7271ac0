"""What a master's llama-server sends this node's RPC worker, counted as it passes the relay.

The relay already sees every byte; reading just the request headers of llama.cpp's RPC stream
(``cmd u8 | size u64 | payload``, see :mod:`agent.rpc_protocol`) tells weights from everything
else and shows what the worker's ``-c`` cache supplied:

* ``SET_TENSOR`` carries ``rpc_tensor | cache_flag u8 | offset u64 | data``. Its data bytes are
  weights while the model loads (and small inputs afterwards). ``cache_flag`` is 1 when the
  client asked the cache first and missed, so the worker should store this tensor.
* ``SET_TENSOR_HASH`` carries ``rpc_tensor | offset u64 | hash u64``: the client asks whether
  the worker's cache holds a tensor (only tensors over llama.cpp's 10 MiB threshold). A
  ``SET_TENSOR`` with ``cache_flag`` set right after it is a miss; anything else is a hit, and
  the tensor's bytes came from the worker's own disk.

Only headers are parsed (a few hundred bytes per tensor), never copied payloads, so counting
costs next to nothing at 1 Gbit/s. A stream that does not parse (another protocol version) stops
being parsed; its bytes are still counted.
"""

from __future__ import annotations

import struct
import time

CMD_SET_TENSOR = 6
CMD_SET_TENSOR_HASH = 7
CMD_GRAPH_COMPUTE = 10
#: Commands of ggml-rpc.cpp's ``rpc_cmd`` (``RPC_CMD_COUNT``); a larger byte is not this protocol.
CMD_COUNT = 19
#: ``sizeof(rpc_tensor)`` (packed): id, type, buffer, ne[4], nb[4], op, op_params[16], flags,
#: src[10], view_src, view_offs, data, name[64], use_count.
RPC_TENSOR_SIZE = 296
_NE = struct.Struct("<4I")
_NE_AT = 20  # offset of ne[] in rpc_tensor (after id u64, type u32, buffer u64)
_NB_AT = 36
SET_TENSOR_HEAD = RPC_TENSOR_SIZE + 1 + 8
SET_TENSOR_HASH_SIZE = RPC_TENSOR_SIZE + 8 + 8
#: llama.cpp hashes (and caches) only tensors larger than this (``HASH_THRESHOLD``).
HASH_THRESHOLD = 10 * 1024 * 1024


def tensor_bytes(rpc_tensor: bytes) -> int:
    """Bytes of a contiguous tensor from its ``rpc_tensor``: row bytes × rows (weights are
    contiguous; ``nb[3]`` itself is 32-bit and would overflow on huge tensors)."""
    ne = _NE.unpack_from(rpc_tensor, _NE_AT)
    nb = _NE.unpack_from(rpc_tensor, _NB_AT)
    return nb[1] * ne[1] * ne[2] * ne[3]


class LoadCounter:
    """The counters of one load: everything since the first connection after the worker was
    idle (a new llama-server), shared by that llama-server's connections.

    Attributes:
        session: how many loads this worker has seen (1 for the first).
        bytes_received: every byte the client sent.
        tensor_bytes: ``SET_TENSOR`` data bytes so far (counted as they arrive, so a large
            tensor shows progress while it travels).
        cached_bytes: bytes of tensors the worker's cache supplied (hash hits).
        hash_hits, hash_misses: ``SET_TENSOR_HASH`` lookups answered from the cache, or not.
        graph_computes: ``GRAPH_COMPUTE`` requests (the load is over once these start).
    """

    def __init__(self) -> None:
        self.session = 0
        self._reset()

    def _reset(self) -> None:
        self.started_at = time.monotonic()
        self.last_at: float | None = None
        self.bytes_received = 0
        self.tensor_bytes = 0
        self.cached_bytes = 0
        self.hash_hits = 0
        self.hash_misses = 0
        self.graph_computes = 0
        self._pending_hash: int | None = None  # bytes of a lookup not yet known as hit or miss

    def new_session(self) -> None:
        """A new llama-server connected to an idle worker: count from zero."""
        self.session += 1
        self._reset()

    # --- called by the parser ---------------------------------------------------------------------

    def _resolve_pending(self, miss: bool) -> None:
        if self._pending_hash is None:
            return
        if miss:
            self.hash_misses += 1
        else:
            self.hash_hits += 1
            self.cached_bytes += self._pending_hash
        self._pending_hash = None

    def on_command(self, cmd: int) -> None:
        if cmd == CMD_GRAPH_COMPUTE:
            self.graph_computes += 1
        if cmd not in (CMD_SET_TENSOR, CMD_SET_TENSOR_HASH):
            self._resolve_pending(miss=False)

    def on_hash_lookup(self, nbytes: int) -> None:
        self._resolve_pending(miss=False)  # two lookups in a row: the first one was a hit
        self._pending_hash = nbytes

    def on_set_tensor(self, cache_flag: bool) -> None:
        self._resolve_pending(miss=cache_flag)

    def snapshot(self) -> dict:
        """The counters for ``/status`` (``rpc.transfer``); ages in seconds, from this node's
        clock only, so the master needs no synchronised clocks."""
        now = time.monotonic()
        return {
            "session": self.session,
            "session_age_s": round(now - self.started_at, 3) if self.session else None,
            "idle_s": round(now - self.last_at, 3) if self.last_at is not None else None,
            "bytes_received": self.bytes_received,
            "tensor_bytes": self.tensor_bytes,
            "cached_bytes": self.cached_bytes,
            "hash_hits": self.hash_hits,
            "hash_misses": self.hash_misses,
            "graph_computes": self.graph_computes,
        }


class StreamParser:
    """Follows one client→worker connection's requests and feeds a :class:`LoadCounter`."""

    def __init__(self, counter: LoadCounter) -> None:
        self.counter = counter
        self.broken = False
        self._head = bytearray()  # the 9 header bytes being read
        self._cmd = -1
        self._left = 0            # payload bytes still to come for the current request
        self._meta = bytearray()  # the payload's leading fields we read (rpc_tensor …)
        self._meta_need = 0
        self._in_payload = False

    def feed(self, data: bytes) -> None:
        """Bytes the client sent, in order."""
        c = self.counter
        c.bytes_received += len(data)
        c.last_at = time.monotonic()
        if self.broken:
            return
        view = memoryview(data)
        i, n = 0, len(view)
        while i < n:
            if not self._in_payload:
                take = min(9 - len(self._head), n - i)
                self._head += view[i:i + take]
                i += take
                if len(self._head) < 9:
                    return
                cmd, size = struct.unpack("<BQ", self._head)
                self._head.clear()
                if cmd >= CMD_COUNT:
                    self.broken = True
                    return
                self._start(cmd, size)
                continue
            take = min(self._left, n - i)
            meta = 0
            if len(self._meta) < self._meta_need:
                meta = min(self._meta_need - len(self._meta), take)
                self._meta += view[i:i + meta]
                if len(self._meta) == self._meta_need:
                    self._got_meta()
            if self._cmd == CMD_SET_TENSOR:
                c.tensor_bytes += take - meta
            self._left -= take
            i += take
            if self._left == 0:
                self._in_payload = False

    def _start(self, cmd: int, size: int) -> None:
        self._cmd, self._left = cmd, size
        self._meta.clear()
        self._meta_need = {CMD_SET_TENSOR: SET_TENSOR_HEAD,
                           CMD_SET_TENSOR_HASH: SET_TENSOR_HASH_SIZE}.get(cmd, 0)
        self._meta_need = min(self._meta_need, size)
        if cmd not in (CMD_SET_TENSOR, CMD_SET_TENSOR_HASH):
            self.counter.on_command(cmd)
        self._in_payload = size > 0
        if self._meta_need == 0 and cmd in (CMD_SET_TENSOR, CMD_SET_TENSOR_HASH):
            self.broken = True  # an empty tensor request: not the layout we know

    def _got_meta(self) -> None:
        meta = bytes(self._meta)
        if self._cmd == CMD_SET_TENSOR_HASH and len(meta) == SET_TENSOR_HASH_SIZE:
            self.counter.on_hash_lookup(tensor_bytes(meta))
        elif self._cmd == CMD_SET_TENSOR and len(meta) == SET_TENSOR_HEAD:
            self.counter.on_set_tensor(bool(meta[RPC_TENSOR_SIZE]))
