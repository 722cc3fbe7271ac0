"""Speculation as part of the plan: none, a draft model, n-gram lookup or the model's own MTP heads (#35).

Over a LAN every decoded token pays a round trip to each worker that holds layers; speculative
decoding drafts a few tokens cheaply and has the cluster verify them in one pass, so the round
trips are paid once per accepted run. llama-server (build 11434) has it built in; herd plans it:

* :class:`Speculation` is the choice — its kind, the draft model's file, how many tokens are
  drafted per pass, and (when herd predicted or measured it) the gain and the reason in words.
  :meth:`Speculation.server_args` is what it adds to llama-server's command line (the one
  builder, :class:`gui.cluster.llama.server_command.ServerSpec`, puts it there); the same
  options typed by a user are refused (:mod:`gui.cluster.llama.server_args`).
* :func:`draft_candidates` finds, among model files (those on this PC:
  :func:`gui.cluster.models.local.find_local_models`), the ones with the target's vocabulary,
  and says for every other one why not, in words.
* :func:`choose_speculation` turns what a user asks for (``--draft MODEL|auto|ngram|mtp|none``)
  into a :class:`Speculation`, or a :class:`SpeculationError` that says what to do.

The draft runs on the master's CPU (``-ngld 0 -devd none``: llama-server would otherwise offload
it to the same devices as the target, the workers across the LAN, and pay the round trips it is
there to save). Its weights and KV cache are planned there, in the memory fit
(:func:`gui.cluster.planning.plan.fit.estimate`, ``draft``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent.i18n import QT_TRANSLATE_NOOP, translate
from gui.cluster.llama.model import ModelError, ModelInfo, inspect_model, read_model_header
from gui.cluster.llama.vocabulary import mtp_layers, read_vocabulary, vocabulary_mismatch

NONE, DRAFT, NGRAM, MTP = "none", "draft", "ngram", "mtp"
#: The kinds of speculation herd plans, and how each is shown.
KINDS = {NONE: QT_TRANSLATE_NOOP("Speculation", "none"),
         DRAFT: QT_TRANSLATE_NOOP("Speculation", "draft model"),
         NGRAM: QT_TRANSLATE_NOOP("Speculation", "n-gram lookup"),
         MTP: QT_TRANSLATE_NOOP("Speculation", "the model's own MTP heads")}
#: llama-server's ``--spec-type`` for each kind. ``ngram-simple`` looks the last tokens up in
#: the conversation so far: it drafts well where a reply repeats its prompt (rewriting, code).
SPEC_TYPES = {DRAFT: "draft-simple", NGRAM: "ngram-simple", MTP: "draft-mtp"}
#: Tokens drafted per pass unless told (llama-server's own default, ``--spec-draft-n-max 3``).
DEFAULT_DRAFT_MAX = 3
#: The most tokens drafted per pass herd accepts: a verify pass of more costs compute no
#: acceptance pays back on the models herd serves.
MAX_DRAFT_MAX = 32
#: What ``--draft`` takes besides a model's path.
AUTO = "auto"
CHOICES = (AUTO, NGRAM, MTP, NONE)
#: A draft whose file is larger than this share of the target's drafts too slowly to pay.
MAX_DRAFT_SHARE = 0.5


class SpeculationError(ValueError):
    """A speculation that cannot be planned; the message says why and what to do."""


@dataclass(frozen=True)
class Speculation:
    """How llama-server speculates: part of the plan and of the launch request (#35).

    Attributes:
        kind: :data:`NONE`, :data:`DRAFT`, :data:`NGRAM` or :data:`MTP`.
        draft_path: the draft model's file (kind :data:`DRAFT` only).
        draft_max: tokens drafted per verify pass (``--spec-draft-n-max``).
        predicted_gain: tokens/s with speculation over without, as predicted or measured;
            None when not known.
        reason: why this choice, in words (empty when the user chose it and nothing was measured).
    """

    kind: str = NONE
    draft_path: Path | None = None
    draft_max: int = DEFAULT_DRAFT_MAX
    predicted_gain: float | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SpeculationError(translate("Speculation", "speculation must be one of {kinds}, not {kind}")
                                   .format(kinds=", ".join(KINDS), kind=_shown(self.kind)))
        if self.draft_path is not None:
            object.__setattr__(self, "draft_path", Path(self.draft_path))
        if (self.kind == DRAFT) != (self.draft_path is not None):
            raise SpeculationError(translate("Speculation", "a draft model's file goes with speculation by a "
                                                            "draft model, and only with it"))
        if isinstance(self.draft_max, bool) or not isinstance(self.draft_max, int) \
                or not 1 <= self.draft_max <= MAX_DRAFT_MAX:
            raise SpeculationError(translate("Speculation", "tokens drafted per pass must be a whole number from "
                                                            "1 to {most}, not {value}").format(
                most=MAX_DRAFT_MAX, value=_shown(self.draft_max)))

    @property
    def active(self) -> bool:
        """True unless the kind is :data:`NONE`."""
        return self.kind != NONE

    def server_args(self) -> list[str]:
        """llama-server's arguments for this speculation (none for :data:`NONE`)."""
        if not self.active:
            return []
        args = ["--spec-type", SPEC_TYPES[self.kind]]
        if self.kind == DRAFT:
            # the draft stays on the master's CPU: offloaded to the workers it would pay the
            # round trips it is there to save (#35)
            args += ["-md", str(self.draft_path), "-ngld", "0", "-devd", "none"]
        if self.kind in (DRAFT, MTP):
            args += ["--spec-draft-n-max", str(self.draft_max)]
        return args

    def label(self) -> str:
        """What it is, in a few words: ``draft model tiny.gguf, 3 tokens per pass``, ``none``."""
        if self.kind == DRAFT:
            return translate("Speculation", "draft model {name}, {n} tokens per pass").format(
                name=self.draft_path.name, n=self.draft_max)
        return translate("Speculation", KINDS[self.kind])

    def describe(self) -> str:
        """One line for people: ``speculation: draft model tiny.gguf, 3 tokens per pass —
        predicted 1.18× (…)``."""
        text = translate("Speculation", "speculation: {kind}").format(kind=self.label())
        if self.predicted_gain is not None:
            text += " — " + translate("Speculation", "predicted {gain}× the speed without").format(
                gain=f"{self.predicted_gain:.2f}")
        if self.reason:
            text += f" ({self.reason})"
        return text

    def with_prediction(self, gain: float | None, reason: str) -> "Speculation":
        """This speculation with a predicted (or measured) gain and its reason."""
        return replace(self, predicted_gain=gain, reason=reason)

    def draft_model(self) -> ModelInfo | None:
        """The draft's :class:`ModelInfo` (None unless kind :data:`DRAFT`); :class:`ModelError`
        in words when its file cannot be read."""
        return inspect_model(self.draft_path) if self.kind == DRAFT else None

    def to_json(self) -> dict:
        """The ``speculation`` section of a profile."""
        out: dict[str, Any] = {"kind": self.kind, "draft_max": self.draft_max}
        if self.draft_path is not None:
            out["draft"] = str(self.draft_path)
        if self.predicted_gain is not None:
            out["predicted_gain"] = round(float(self.predicted_gain), 4)
        if self.reason:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_json(cls, doc: Any, where: str = "speculation") -> "Speculation":
        """A :class:`Speculation` from :meth:`to_json`'s form, which comes from outside: every
        field checked, :class:`SpeculationError` naming the field otherwise. The draft's path
        is data: it is only ever passed to llama-server as the draft model's file."""
        if not isinstance(doc, Mapping):
            raise SpeculationError(translate("Speculation", "{where} must be an object").format(where=where))
        unknown = sorted(set(doc) - {"kind", "draft", "draft_max", "predicted_gain", "reason"})
        if unknown:
            raise SpeculationError(translate("Speculation", "{where}: unknown field {field}").format(
                where=where, field=_shown(unknown[0])))
        kind = doc.get("kind", NONE)
        draft = doc.get("draft")
        gain = doc.get("predicted_gain")
        reason = doc.get("reason", "")
        if draft is not None and (not isinstance(draft, str) or not draft or "\0" in draft or len(draft) > 4096):
            raise SpeculationError(translate("Speculation", "{where}.draft must be the path of a model file")
                                   .format(where=where))
        if gain is not None and (isinstance(gain, bool) or not isinstance(gain, (int, float)) or not 0 < gain < 100):
            raise SpeculationError(translate("Speculation", "{where}.predicted_gain must be a positive number")
                                   .format(where=where))
        if not isinstance(reason, str) or len(reason) > 1000:
            raise SpeculationError(translate("Speculation", "{where}.reason must be a short text").format(where=where))
        try:
            return cls(kind=kind if isinstance(kind, str) else repr(kind), draft_path=draft,
                       draft_max=doc.get("draft_max", DEFAULT_DRAFT_MAX),
                       predicted_gain=float(gain) if gain is not None else None, reason=reason)
        except SpeculationError as exc:
            raise SpeculationError(f"{where}: {exc}") from None


def _shown(value: Any) -> str:
    text = "".join(c if c.isprintable() else "?" for c in str(value))
    return text if len(text) <= 60 else text[:59] + "…"


@dataclass(frozen=True)
class DraftCandidate:
    """A model file considered as a draft for a target.

    Attributes:
        path: the file.
        usable: it has the target's vocabulary and is small enough to draft.
        reason: why not, in words (empty when usable).
        size_bytes: the file's size.
    """

    path: Path
    usable: bool
    reason: str = ""
    size_bytes: int = 0


def draft_candidates(target: str | os.PathLike, models: Iterable[str | os.PathLike]) -> list[DraftCandidate]:
    """Every file of ``models`` (but the target) judged as a draft for ``target``: the usable
    ones first, smallest first (a smaller draft drafts faster), then the refused with the reason.

    A draft must have the target's vocabulary (tokenizer kind, token count and token list,
    :func:`~gui.cluster.llama.vocabulary.vocabulary_mismatch`) and be at most
    :data:`MAX_DRAFT_SHARE` of the target's size. Raises :class:`ModelError` when the target
    itself cannot be read.
    """
    target = Path(target)
    target_vocab = read_vocabulary(target)
    target_bytes = target.stat().st_size
    out = []
    for path in dict.fromkeys(Path(m) for m in models):
        if _same_file(path, target):
            continue
        out.append(_judge(path, target_vocab, target_bytes))
    return sorted(out, key=lambda c: (not c.usable, c.size_bytes, str(c.path)))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _judge(path: Path, target_vocab, target_bytes: int) -> DraftCandidate:
    try:
        vocab = read_vocabulary(path)  # first: its errors say what is wrong in words
        size = path.stat().st_size
    except (OSError, ModelError) as exc:
        return DraftCandidate(path, False, str(exc))
    why = vocabulary_mismatch(target_vocab, vocab)
    if why is None and size > target_bytes * MAX_DRAFT_SHARE:
        why = translate("Speculation", "too large to draft: {size} MiB against the target's {target} MiB").format(
            size=f"{size / 2**20:.0f}", target=f"{target_bytes / 2**20:.0f}")
    return DraftCandidate(path, why is None, why or "", size)


def has_mtp(model: str | os.PathLike) -> bool:
    """True when the GGUF file carries multi-token-prediction heads llama-server drafts with."""
    return mtp_layers(read_model_header(model)) > 0


def choose_speculation(choice: str, target: str | os.PathLike, models: Iterable[str | os.PathLike] = (), *,
                       draft_max: int = DEFAULT_DRAFT_MAX) -> Speculation:
    """The :class:`Speculation` a user asks for with ``--draft``: ``none``, ``ngram``, ``mtp``
    (the model must carry MTP heads), ``auto`` (the best draft among ``models``, else none,
    the reason said) or a model file's path (it must share the target's vocabulary).

    Raises:
        SpeculationError: what was asked for cannot be done here, and why, in words.
    """
    target = Path(target)
    if choice == AUTO:
        try:
            return _auto(target, models, draft_max)
        except (OSError, ModelError) as exc:
            raise SpeculationError(str(exc)) from None
    if choice in (NONE, NGRAM, MTP):
        chosen = Speculation(choice, draft_max=draft_max)
    else:
        chosen = Speculation(DRAFT, draft_path=Path(choice), draft_max=draft_max)
    problem = speculation_problem(chosen, target)
    if problem:
        raise SpeculationError(problem)
    return chosen


def speculation_problem(speculation: Speculation, target: str | os.PathLike) -> str | None:
    """What stops ``speculation`` from running with the model at ``target``, in words (None:
    nothing): a draft that is gone, unreadable or has another vocabulary, or MTP on a model
    without MTP heads. A profile's draft is checked again at every launch: files change."""
    target = Path(target)
    try:
        if speculation.kind == MTP and not has_mtp(target):
            return translate("Speculation", "{model} carries no multi-token-prediction heads; choose --draft "
                                            "auto, ngram or a draft model").format(model=target.name)
        if speculation.kind != DRAFT:
            return None
        candidate = _judge(speculation.draft_path, read_vocabulary(target), target.stat().st_size)
    except (OSError, ModelError) as exc:
        return str(exc)
    if candidate.usable:
        return None
    return translate("Speculation", "{draft} cannot draft for {model}: {why}").format(
        draft=speculation.draft_path.name, model=target.name, why=candidate.reason)


def _auto(target: Path, models: Iterable[str | os.PathLike], draft_max: int) -> Speculation:
    """``--draft auto``: the model's own MTP heads, else the smallest draft with its vocabulary,
    else none — the reason said in each case."""
    if has_mtp(target):
        return Speculation(MTP, draft_max=draft_max,
                           reason=translate("Speculation", "the model carries its own MTP heads"))
    candidates = draft_candidates(target, models)
    usable = [c for c in candidates if c.usable]
    if usable:
        best = usable[0]
        return Speculation(DRAFT, draft_path=best.path, draft_max=draft_max,
                           reason=translate("Speculation", "the smallest model on this PC with the target's "
                                                           "vocabulary"))
    why = translate("Speculation", "no model on this PC has the target's vocabulary")
    if candidates:
        why += ": " + "; ".join(f"{c.path.name}: {c.reason}" for c in candidates[:3])
    return Speculation(reason=why)


@dataclass(frozen=True)
class ReplyDrafts:
    """What speculation did for one finished reply, from llama-server's final ``timings``.

    Attributes:
        drafted: tokens drafted (``draft_n``).
        accepted: of them, accepted by the target (``draft_n_accepted``).
        tokens_per_s: the reply's effective decode speed, accepted drafts included
            (``predicted_per_second``); None when not given.
    """

    drafted: int
    accepted: int
    tokens_per_s: float | None = None

    @classmethod
    def of(cls, timings: Mapping) -> "ReplyDrafts | None":
        """The drafts of a reply's ``timings``; None when nothing was drafted (no speculation)."""
        drafted, accepted = timings.get("draft_n"), timings.get("draft_n_accepted")
        if not isinstance(drafted, int) or isinstance(drafted, bool) or drafted <= 0:
            return None
        accepted = accepted if isinstance(accepted, int) and 0 <= accepted <= drafted else 0
        speed = timings.get("predicted_per_second")
        return cls(drafted, accepted, float(speed) if isinstance(speed, (int, float)) else None)

