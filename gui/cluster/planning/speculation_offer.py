"""What the window offers as speculation for the open model, and what a stored choice means (#35).

The window's *Speculation* choice is stored as one text (the ``server/draft`` setting, like
``herd plan --draft``): ``auto``, ``none``, ``ngram``, ``mtp`` or a draft model's path.
:func:`offer_for` reads, once per opened model and off the GUI thread (vocabularies take a
while to read), everything the choice needs: whether the model carries MTP heads, every model on
this PC judged as its draft (:func:`~gui.cluster.planning.speculation.draft_candidates`), and
what *Auto* picks (:func:`~gui.cluster.planning.speculation.choose_speculation`).
:meth:`SpeculationOffer.resolve` then turns the stored text into a
:class:`~gui.cluster.planning.speculation.Speculation` without reading any file again.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agent.i18n import translate
from gui.cluster.llama.model import ModelError
from gui.cluster.planning.speculation import (
    AUTO,
    DRAFT,
    MTP,
    NGRAM,
    NONE,
    DraftCandidate,
    Speculation,
    SpeculationError,
    choose_speculation,
    draft_candidates,
    has_mtp,
)

#: The stored choices besides a draft model's path, in the order offered.
FIXED_CHOICES = (AUTO, NONE, NGRAM, MTP)


@dataclass(frozen=True)
class SpeculationOffer:
    """The speculation that can be chosen for one model (see the module docstring).

    Attributes:
        target: the model's file.
        has_mtp: it carries multi-token-prediction heads (*MTP* is offered).
        candidates: every other model on this PC judged as its draft, the usable ones first.
        auto: what *Auto* chooses, with the reason in words.
        problem: why the model's own file could not be judged, in words ("" when it could).
    """

    target: Path
    has_mtp: bool = False
    candidates: tuple[DraftCandidate, ...] = ()
    auto: Speculation = Speculation()
    problem: str = ""

    @property
    def usable(self) -> list[DraftCandidate]:
        """The draft models that may be chosen."""
        return [c for c in self.candidates if c.usable]

    @property
    def refused(self) -> list[DraftCandidate]:
        """The models on this PC that cannot draft for it, each with its reason."""
        return [c for c in self.candidates if not c.usable]

    def refusals_text(self) -> str:
        """One line per refused model: ``gemma-3-270m.gguf: different tokenizer: gpt2 vs llama``."""
        return "\n".join(f"{c.path.name}: {c.reason}" for c in self.refused)

    def resolve(self, choice: str) -> Speculation:
        """The :class:`Speculation` the stored ``choice`` means for this model.

        Raises:
            SpeculationError: it cannot be had here (MTP without heads, a draft that is gone or
                of another vocabulary), in words.
        """
        if choice == AUTO:
            return self.auto
        if choice == NONE:
            return Speculation()
        if choice == NGRAM:
            return Speculation(NGRAM)
        if choice == MTP:
            if not self.has_mtp:
                raise SpeculationError(translate("Speculation", "{model} carries no multi-token-prediction heads")
                                       .format(model=self.target.name))
            return Speculation(MTP)
        for candidate in self.candidates:
            if str(candidate.path) == choice:
                if not candidate.usable:
                    raise SpeculationError(translate("Speculation", "{draft} cannot draft for {model}: {why}").format(
                        draft=candidate.path.name, model=self.target.name, why=candidate.reason))
                return Speculation(DRAFT, draft_path=candidate.path)
        # a file not among the models on this PC (a profile's, one moved since): judged now
        return choose_speculation(choice, self.target)


def offer_for(target: str | os.PathLike, models: Iterable[str | os.PathLike]) -> SpeculationOffer:
    """Judge ``models`` (those on this PC) as drafts for ``target`` and find what *Auto* picks.
    Reads every file's vocabulary: call it off the GUI thread. Never raises: a target that
    cannot be read gives an offer of none, with ``problem`` in words."""
    target = Path(target)
    models = list(models)
    try:
        candidates = tuple(draft_candidates(target, models))
        mtp = has_mtp(target)
        auto = choose_speculation(AUTO, target, [c.path for c in candidates if c.usable])
    except (OSError, ModelError, SpeculationError) as exc:
        return SpeculationOffer(target, problem=str(exc), auto=Speculation(reason=str(exc)))
    if not auto.active and candidates:
        # the reason names the refused models (choose_speculation saw only the usable ones)
        auto = Speculation(reason=translate("Speculation", "no model on this PC has the target's vocabulary")
                           + ": " + "; ".join(f"{c.path.name}: {c.reason}" for c in candidates[:3]))
    return SpeculationOffer(target, mtp, candidates, auto)
