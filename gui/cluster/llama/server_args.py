"""Which further llama-server arguments herd passes on: an allow-list of tuning options (#32).

herd builds llama-server's command line itself (:mod:`gui.cluster.llama.server_command`). What
a user or a profile may add after it are *tuning* options only: sampling, context handling,
batch sizes, threads, cache types, flash attention, slots, chat template and reasoning. The rule:

* **Owned** (:data:`OWNED_FLAGS`): what herd plans or must know — the model, the workers
  (``--rpc``), layers and split (``-ngl``, ``-ts``, ``-ot``, ``--fit``), the context (``-c``),
  where the endpoint listens (``--host``, ``--port``), the model id, the log level and
  ``--metrics``. herd sets them; they never come from outside, so nothing can send the weights
  to another host or open the endpoint behind the user's back.
* **Allowed** (:data:`ALLOWED_FLAGS`): tuning options that neither move weights, nor open the
  endpoint, nor read or write files, nor fetch anything. Each spelling (short, long, alias) is
  listed with whether it takes a value.
* **Everything else is refused**, named in the error: file options (``--log-file``,
  ``--slot-save-path``, ``--lora``, ``--chat-template-file``, ``--ssl-*``, ``--api-key-file``,
  ``--path`` …), downloads (``-mu``, ``-hf*``), other models (``-md``), devices and placement
  (``-dev``, ``-sm``, ``-cmoe``), ``--api-key`` (a secret in a shared file), ``--props`` …, and
  any option a newer llama.cpp adds until it is reviewed and listed here.

``--flag=value`` is read as ``--flag value``. A value may not look like an option (a leading
``-`` is allowed only for a number such as ``--seed -1``), so no option hides inside another
one's value, and a word that is no option's value is refused. :func:`check_extra_args` is the
one check; :class:`~gui.cluster.llama.server_command.ServerOptions` runs it whenever options are
made, so a profile, ``herd up --server-args`` and the app all meet the same rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agent.i18n import translate

#: Options the plan and :class:`~gui.cluster.llama.server_command.ServerOptions` own; further
#: arguments never repeat them (the number says whether the option takes a value).
OWNED_FLAGS = {"-m": 1, "--model": 1, "--rpc": 1, "-fit": 1, "--fit": 1, "-ngl": 1, "--gpu-layers": 1,
               "--n-gpu-layers": 1, "-ts": 1, "--tensor-split": 1, "-ot": 1, "--override-tensor": 1,
               "-c": 1, "--ctx-size": 1, "--host": 1, "--port": 1, "-lv": 1, "--verbosity": 1,
               "--log-verbosity": 1, "--metrics": 0, "-v": 0, "--verbose": 0, "--log-verbose": 0,
               "-a": 1, "--alias": 1}
#: Speculation's options: herd plans them (:mod:`gui.cluster.planning.speculation`, #35) —
#: a draft model is a file to read, and where it runs decides whether it pays. Refused with
#: their own reason, by every spelling llama-server (build 11434) knows.
SPECULATION_FLAGS = frozenset('''
    --spec-type -md --model-draft --spec-draft-model -ngld --gpu-layers-draft --n-gpu-layers-draft
    --spec-draft-ngl -devd --device-draft --spec-draft-device --spec-draft-n-max --spec-draft-n-min
    --draft --draft-n --draft-max --draft-min --draft-n-min --spec-synth-len --spec-synth-rates
    -hfd -hfrd --hf-repo-draft --spec-draft-hf -otd --override-tensor-draft --spec-draft-override-tensor
'''.split())

_SWITCHES = """
    --swa-full -kvu --kv-unified -no-kvu --no-kv-unified -nr --no-repack --repack
    -kvo --kv-offload -nkvo --no-kv-offload --op-offload --no-op-offload
    -cb --cont-batching -nocb --no-cont-batching --context-shift --no-context-shift
    --cache-prompt --no-cache-prompt --cache-idle-slots --no-cache-idle-slots
    --warmup --no-warmup --perf --no-perf --jinja --no-jinja --ignore-eos -sp --special
    --ui --webui --no-ui --no-webui --slots --no-slots --check-tensors
    --reasoning-preserve --no-reasoning-preserve
"""
_WITH_VALUE = """
    -t --threads -tb --threads-batch -b --batch-size -ub --ubatch-size -np --parallel
    -n --predict --n-predict --keep -fa --flash-attn -ctk --cache-type-k -ctv --cache-type-v
    -cram --cache-ram -ctxcp --ctx-checkpoints --swa-checkpoints -cms --checkpoint-min-step
    --cache-reuse --kv-unified-per-slot -sps --slot-prompt-similarity -to --timeout --threads-http
    --poll --poll-batch --rope-scaling --rope-scale --rope-freq-base --rope-freq-scale --yarn-orig-ctx
    --yarn-ext-factor --yarn-attn-factor --yarn-beta-slow --yarn-beta-fast
    -s --seed --samplers --sampling-seq --sampler-seq --temp --temperature --top-k --top-p --min-p
    --top-nsigma --top-n-sigma --xtc-probability --xtc-threshold --typical --typical-p
    --repeat-last-n --repeat-penalty --presence-penalty --frequency-penalty --dry-multiplier
    --dry-base --dry-allowed-length --dry-penalty-last-n --dynatemp-range --dynatemp-exp
    --mirostat --mirostat-lr --mirostat-ent --chat-template --chat-template-kwargs
    --reasoning-format -rea --reasoning --reasoning-budget --reasoning-effort
"""
#: The tuning options a user or a profile may add, by every spelling: 0 a switch, 1 takes a value.
ALLOWED_FLAGS: dict[str, int] = {**dict.fromkeys(_SWITCHES.split(), 0), **dict.fromkeys(_WITH_VALUE.split(), 1)}

#: The longest value passed on (a chat template fits; a wall of text does not).
MAX_VALUE_CHARS = 16384
_NUMBER = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")


class ServerArgsError(ValueError):
    """A further llama-server argument herd does not pass on; the message names it."""

    def __init__(self, message: str, argument: str) -> None:
        super().__init__(message)
        #: the argument at fault, as it was given
        self.argument = argument


def _shown(arg: str) -> str:
    """``arg`` as an error shows it: its first 60 characters, control characters made visible."""
    text = "".join(c if c.isprintable() else "?" for c in arg)
    return text if len(text) <= 60 else text[:59] + "…"


def _refuse(name: str, given: str) -> ServerArgsError:
    shown = _shown(name)
    if name in SPECULATION_FLAGS:
        why = translate("ServerArgs", "llama-server option {flag} is not accepted: herd plans speculation "
                                      "itself; choose it with --draft (herd plan, herd up) or in the split "
                                      "editor").format(flag=shown)
    elif name in OWNED_FLAGS:
        why = translate("ServerArgs", "llama-server option {flag} is not accepted: herd sets it itself (the "
                                      "model, the workers and layers, the context, where the endpoint listens, "
                                      "the log level)").format(flag=shown)
    else:
        why = translate("ServerArgs", "llama-server option {flag} is not accepted: it is not one of the tuning "
                                      "options herd passes on (sampling, context, batch, threads, cache, "
                                      "flash attention, slots); options that read or write files, open the "
                                      "endpoint or fetch models are refused — see docs/security.md").format(flag=shown)
    return ServerArgsError(why, given)


def _check_value(name: str, value: str, given: str) -> None:
    if value.startswith("-") and not _NUMBER.match(value):
        # llama.cpp would take it as the value; a word that is an option belongs on its own
        raise ServerArgsError(translate("ServerArgs", "the value of {flag} looks like an option ({value}): "
                                                      "give each option separately").format(
            flag=name, value=_shown(value)), given)
    if len(value) > MAX_VALUE_CHARS or any(c in value for c in "\0\r"):
        raise ServerArgsError(translate("ServerArgs", "the value of {flag} is too long or holds control "
                                                      "characters").format(flag=name), given)


def check_extra_args(args: Iterable[str]) -> tuple[str, ...]:
    """``args`` as a tuple when every one is an allowed tuning option with its value.

    Raises:
        ServerArgsError: naming the first argument that is owned by herd, not on the
            allow-list, a value that looks like an option, or a word that is no option's value.
    """
    out = tuple(args)
    i = 0
    while i < len(out):
        given = out[i]
        if not isinstance(given, str):
            raise ServerArgsError(translate("ServerArgs", "llama-server arguments must be text, not {value}")
                                  .format(value=type(given).__name__), str(given))
        name, eq, value = given.partition("=") if given.startswith("--") else (given, "", "")
        if not name.startswith("-") or _NUMBER.match(name):
            raise ServerArgsError(translate("ServerArgs", "{arg} is not a llama-server option (nor the value of "
                                                          "one)").format(arg=_shown(given)), given)
        takes = ALLOWED_FLAGS.get(name)
        if takes is None:
            raise _refuse(name, given)
        if takes and not eq:
            if i + 1 >= len(out):
                raise ServerArgsError(translate("ServerArgs", "llama-server option {flag} needs a value")
                                      .format(flag=name), given)
            i += 1
            value = out[i]
            if not isinstance(value, str):
                raise ServerArgsError(translate("ServerArgs", "llama-server arguments must be text, not {value}")
                                      .format(value=type(value).__name__), str(value))
        elif eq and not takes:
            raise ServerArgsError(translate("ServerArgs", "llama-server option {flag} takes no value")
                                  .format(flag=name), given)
        if takes:
            _check_value(name, value, given)
        i += 1
    return out
