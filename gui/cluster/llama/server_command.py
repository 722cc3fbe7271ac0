"""The one place where ``llama-server``'s command line is built.

Two typed halves go in:

* the plan's layout — ``--rpc`` endpoints in device order, ``-ngl`` and the whole-number ``-ts``
  counts that are the exact inverse of llama.cpp's layer map (:meth:`gui.cluster.planning.plan.Plan.layout`);
* :class:`ServerOptions` — what the user chooses besides the plan: context, where the endpoint
  listens, the model id it shows, further arguments.

:func:`layout_args` and :meth:`ServerSpec.args` turn them into strings; nothing in herd parses
those strings back. Only what a user typed is ever parsed (:meth:`Plan.from_llama_args`,
:func:`gui.cluster.launching.profile.load_profile`). The plan, the profile, the settings, the split
editor's preview and the launcher all build their command line here, so they cannot disagree.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from agent.i18n import translate
from gui.cluster.llama.model import DEFAULT_SEQUENCES, DEFAULT_UBATCH, CacheShape
from gui.cluster.llama.server_args import OWNED_FLAGS, check_extra_args  # noqa: F401 (OWNED_FLAGS: re-exported)

#: Where llama-server says which device a slot went to, per slot, only at ``-lv 5``.
LAYER_LINES_LEVEL = 5
#: The level at which the device order, offload summary and buffer sizes are printed.
BUFFER_LINES_LEVEL = 4

#: llama-server's context size when the user does not choose one (herd's, not llama.cpp's
#: own default, which is the model's whole training context).
DEFAULT_CTX = 4096
#: Where the OpenAI-compatible endpoint listens unless told: this PC only, llama-server's port.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080

#: llama-server's switch that keeps host weights as they are in the file (no CPU repacking).
NO_REPACK_FLAG = "--no-repack"
#: The most "people at once" (parallel slots, ``-np``) herd asks of llama-server (#34): each one
#: holds a whole context of KV cache, so more than a household needs only wastes memory.
MAX_PEOPLE = 64




@dataclass(frozen=True)
class ServerOptions:
    """llama-server's options besides the plan.

    Attributes:
        ctx: context size (``-c``).
        host, port: where the OpenAI-compatible endpoint listens.
        alias: the model id the endpoint shows in ``/v1/models`` and accepts as ``model``
            (``--alias``); None: the model file's name (:func:`model_alias`), never its path.
        extra_args: further tuning arguments, passed after ours; only those on the allow-list of
            :mod:`gui.cluster.llama.server_args` (never ``--rpc``, ``--host``, ``--log-file`` …:
            :class:`~gui.cluster.llama.server_args.ServerArgsError`, a ValueError, names the
            first one that is not, #32).
        people: how many people the endpoint serves at once (#34): llama-server's parallel slots
            (``-np``), each with its own ``ctx`` tokens of context, so llama-server gets
            ``-c people × ctx`` (:attr:`total_ctx`) and the memory fit plans the bigger KV cache.
            None: llama-server's own default (4 sequences sharing ``ctx``), as before the setting.
    """

    ctx: int = DEFAULT_CTX
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    alias: str | None = None
    extra_args: tuple[str, ...] = ()
    people: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.extra_args, list):  # a list from a caller: frozen dataclasses need a tuple
            object.__setattr__(self, "extra_args", tuple(self.extra_args))
        # the one check of further arguments: a profile, --server-args and the app all pass here (#32)
        check_extra_args(self.extra_args)
        if int(self.ctx) <= 0:
            raise ValueError(f"the context size must be positive, not {self.ctx!r}")
        if not 1 <= int(self.port) <= 65535:
            raise ValueError(f"the port must be 1…65535, not {self.port!r}")
        if self.people is not None:
            _check_people(self.people, self.extra_args)

    @property
    def total_ctx(self) -> int:
        """llama-server's ``-c``: the context of every person together (#34: llama-server splits
        ``-c`` between its slots, so each person gets the ``ctx`` the user chose)."""
        return int(self.ctx) * (self.people or 1)

    def with_extra(self, *args: str) -> "ServerOptions":
        """These options with ``args`` appended to the extra arguments (once each)."""
        return replace(self, extra_args=self.extra_args + tuple(a for a in args if a not in self.extra_args))

    def cache_shape(self) -> CacheShape:
        """How llama-server will size its caches with these options: the context, and what the
        further arguments change (``-np``, ``-kvu``/``-no-kvu``, ``-ub``, ``-b``, ``--swa-full``;
        the last one given wins, as in llama.cpp). ``-np`` left at auto is 4 sequences sharing
        a unified cache; an explicit ``-np`` gives each sequence its own stream unless ``-kvu``."""
        values: dict[str, str] = {}
        flags: dict[str, bool] = {}
        args = list(self.extra_args)
        i = 0
        while i < len(args):
            name, eq, value = str(args[i]).partition("=")
            if name in _SHAPE_VALUE_OPTIONS:
                if not eq:
                    value = str(args[i + 1]) if i + 1 < len(args) else ""
                    i += 1
                values[_SHAPE_VALUE_OPTIONS[name]] = value
            elif name in _SHAPE_FLAGS:
                key, on = _SHAPE_FLAGS[name]
                flags[key] = on
            i += 1
        try:
            parallel = int(values.get("parallel", "-1"))
            ubatch = int(values.get("ubatch", DEFAULT_UBATCH))
            batch = int(values.get("batch", DEFAULT_BATCH))
        except ValueError as exc:
            raise ValueError(f"a server argument that sizes the cache is not a number: {exc}") from None
        if self.people is not None:  # one cache stream per person, unless -kvu shares one
            return CacheShape(ctx=self.total_ctx, sequences=self.people, unified=flags.get("unified", False),
                              ubatch=max(1, min(ubatch, batch)), swa_full=flags.get("swa_full", False))
        auto = parallel < 1
        return CacheShape(ctx=int(self.ctx), sequences=DEFAULT_SEQUENCES if auto else parallel,
                          unified=flags.get("unified", auto), ubatch=max(1, min(ubatch, batch)),
                          swa_full=flags.get("swa_full", False))

    def to_json(self) -> dict:
        """The ``server`` section of a profile."""
        out = {"ctx": self.ctx, "host": self.host, "port": self.port, "extra_args": list(self.extra_args)}
        if self.alias:
            out["alias"] = self.alias
        if self.people is not None:
            out["people"] = self.people
        return out


def _check_people(people, extra_args: Sequence[str]) -> None:
    """ValueError, in words, when ``people`` is not a whole number 1…:data:`MAX_PEOPLE` or the
    further arguments set the parallel slots too."""
    if isinstance(people, bool) or not isinstance(people, int) or not 1 <= people <= MAX_PEOPLE:
        raise ValueError(translate("ServerOptions", "people at once must be a whole number from 1 to {most}, "
                                                    "not {value}").format(most=MAX_PEOPLE, value=people))
    if any(str(a).partition("=")[0] in ("-np", "--parallel") for a in extra_args):
        raise ValueError(translate("ServerOptions", "-np in llama-server's further arguments and people at once "
                                                    "both set how many are served at once: remove -np and keep "
                                                    "people at once"))


#: llama-server's options that size its caches (:meth:`ServerOptions.cache_shape`), by spelling.
_SHAPE_VALUE_OPTIONS = {"-np": "parallel", "--parallel": "parallel", "-ub": "ubatch", "--ubatch-size": "ubatch",
                        "-b": "batch", "--batch-size": "batch"}
_SHAPE_FLAGS = {"-kvu": ("unified", True), "--kv-unified": ("unified", True),
                "-no-kvu": ("unified", False), "--no-kv-unified": ("unified", False),
                "--swa-full": ("swa_full", True)}
#: llama-server's logical batch (``-b``), which caps the micro-batch.
DEFAULT_BATCH = 2048

_SHARD_RE = re.compile(r"-\d{5}-of-\d{5}$")


def model_alias(model_path: str | os.PathLike) -> str:
    """The model id an endpoint shows for ``model_path``: the file's name without ``.gguf`` (and
    without a split model's ``-00001-of-00003``), e.g. ``Qwen2.5-7B-Instruct-Q4_K_M``."""
    stem = Path(model_path).name
    if stem.lower().endswith(".gguf"):
        stem = stem[:-5]
    return _SHARD_RE.sub("", stem) or "model"


def layout_args(rpc: Sequence[str], ngl: int | None, tensor_split: Sequence[int]) -> list[str]:
    """``--rpc a,b --fit off -ngl N -ts c0,c1,…`` for a layout (parts with nothing to say are
    left out; without ``ngl`` llama.cpp's own defaults apply and ``--fit`` stays on)."""
    a: list[str] = []
    if rpc:
        a += ["--rpc", ",".join(rpc)]
    if ngl is not None:
        # --fit (on by default) would re-plan layers and context behind our back.
        a += ["--fit", "off", "-ngl", str(int(ngl))]
        if tensor_split:
            a += ["-ts", ",".join(str(int(c)) for c in tensor_split)]
    return a


#: The expert tensors of a block as llama.cpp names them (common/common.h, LLM_FFN_EXPS_REGEX):
#: ``ffn_{up,down,gate,gate_up}_exps`` and the ``_chexps`` kind, weights and biases.
EXPERT_TENSORS_RE = r"ffn_(up|down|gate|gate_up)_(ch|)exps"


class ExpertOverride(NamedTuple):
    """The expert tensors of ``blocks`` kept on device ``device`` of the worker at ``rpc``
    (its place in :attr:`ServerSpec.rpc`): one ``-ot`` argument. By place, not address, so
    the tunnel's local ports (:meth:`ServerSpec.with_rpc`) carry over."""

    blocks: tuple[int, ...]
    rpc: int
    device: int

    def arg(self, rpc: Sequence[str]) -> str:
        r"""``blk\.(3|4)\.ffn_(…)_exps=RPC1[host:port]``: llama-server names a worker's buffer
        type by the device's number on that worker and the address it was reached at."""
        blocks = "|".join(str(b) for b in self.blocks)
        return rf"blk\.({blocks})\.{EXPERT_TENSORS_RE}=RPC{self.device}[{rpc[self.rpc]}]"


def expert_overrides(plan) -> tuple[ExpertOverride, ...]:
    """The ``-ot`` placements of ``plan``'s :attr:`~gui.cluster.planning.plan.Plan.expert_homes`."""
    rpc = plan.rpc_endpoints()
    out = []
    for _, k, blocks in plan.expert_moves():
        home = plan.assignments[k].device
        out.append(ExpertOverride(tuple(blocks), rpc.index(home.endpoint), home.index))
    return tuple(out)


@dataclass(frozen=True)
class ServerSpec:
    """Everything that goes on ``llama-server``'s command line: a layout and the user's options.

    A spec never changes once made: what changes later (the tunnel's local ports, ``--no-repack``
    on a CPU that needs it) makes a new one (:func:`dataclasses.replace`, :meth:`with_rpc`,
    :meth:`with_extra`).

    Attributes:
        model: the GGUF file.
        rpc: worker endpoints ``host:port`` in the plan's device order (RPC0, RPC1, …).
        ngl: layer slots offloaded to devices (``-ngl``); the rest stay on the host CPU.
        tensor_split: whole-number layer counts per device in model order (``-ts``), or empty.
        expert_overrides: blocks whose experts go to another device of their worker (``-ot``).
        options: the user's half: context, endpoint, alias, further arguments
            (:class:`ServerOptions`).
        speculation: the plan's :class:`~gui.cluster.planning.speculation.Speculation` (a draft
            model, n-gram or MTP, #35), or None: none. Anything with ``server_args()``.
        verbosity: ``-lv`` level. 4 prints what the placement check needs (device order,
            offload summary, weights per device); 5 adds one line per layer and ~20 debug lines
            per generated token, which costs decode speed.
    """

    model: Path
    rpc: tuple[str, ...] = ()
    ngl: int | None = None
    tensor_split: tuple[int, ...] = ()
    expert_overrides: tuple[ExpertOverride, ...] = ()
    options: ServerOptions = ServerOptions()
    verbosity: int = BUFFER_LINES_LEVEL
    speculation: Any = None

    def __post_init__(self) -> None:
        # lists from callers: a frozen spec holds tuples
        object.__setattr__(self, "model", Path(self.model))
        object.__setattr__(self, "rpc", tuple(self.rpc))
        object.__setattr__(self, "tensor_split", tuple(int(c) for c in self.tensor_split))
        object.__setattr__(self, "expert_overrides", tuple(ExpertOverride(*o) for o in self.expert_overrides))

    @classmethod
    def for_plan(cls, plan, model: str | os.PathLike, options: ServerOptions = ServerOptions(), *,
                 verify_layers: bool = False, speculation: Any = None) -> "ServerSpec":
        """The spec that runs ``plan`` (a :class:`gui.cluster.planning.plan.Plan`) with ``options``.

        The plan's own layout (its exact inverse of the layer map) goes in typed, so the
        command line and the planner can never disagree. ``verify_layers`` runs llama-server at
        ``-lv 5`` so that the log names every layer's device (slower decoding; for debugging).
        The endpoint's model id is the file's name unless ``options`` give an alias.
        ``speculation`` adds its own arguments (a draft model, n-gram or MTP, #35).
        """
        rpc, ngl, ts = plan.layout()
        return cls(model=Path(model), rpc=tuple(rpc), ngl=ngl, tensor_split=tuple(ts),
                   expert_overrides=expert_overrides(plan), options=replace(options, alias=options.alias or model_alias(model)),
                   verbosity=LAYER_LINES_LEVEL if verify_layers else BUFFER_LINES_LEVEL, speculation=speculation)

    def with_rpc(self, rpc) -> "ServerSpec":
        """This spec with other worker endpoints (e.g. the tunnel's local forwarders)."""
        return replace(self, rpc=tuple(rpc))

    def with_extra(self, *args: str) -> "ServerSpec":
        """This spec with ``args`` appended to the further arguments (once each)."""
        return replace(self, options=self.options.with_extra(*args))

    def args(self) -> list[str]:
        """The arguments after the program name."""
        a = ["-m", str(self.model), *layout_args(self.rpc, self.ngl, self.tensor_split)]
        for o in self.expert_overrides:  # after --rpc: llama-server looks the buffer type up then
            a += ["-ot", o.arg(self.rpc)]
        o = self.options
        a += ["-c", str(o.total_ctx), "--host", o.host, "--port", str(o.port)]
        if o.people is not None:
            a += ["-np", str(o.people)]
        if o.alias:
            a += ["--alias", o.alias]
        a += ["--metrics", "-lv", str(self.verbosity)]
        if self.speculation is not None:
            a += [str(x) for x in self.speculation.server_args()]
        return a + [str(x) for x in o.extra_args]

    def argv(self, llama_server: str | os.PathLike) -> list[str]:
        """The whole command line."""
        return [str(llama_server), *self.args()]

    @property
    def url(self) -> str:
        """Base URL of the endpoint (``/v1/chat/completions`` lives under it)."""
        host = "127.0.0.1" if self.options.host in ("0.0.0.0", "") else self.options.host
        return f"http://{host}:{self.options.port}"
