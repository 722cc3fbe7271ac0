"""What *Fastest* measured about speculation, kept per model (#35).

Under *Auto*, herd picks a draft for the open model; *Fastest* then measures it with and without
and may drop it as slower. That decision is a measurement of this model on this PC, so it must
not be forgotten the next time the model is opened: :func:`remember_decision` keeps it as a record
(the model's file, its size, the speculation that was tried, and the decision with its measured
gain and reason), and :func:`remembered_decision` gives it back for as long as *Auto* would try
the same speculation on the same file. A new *Fastest* run replaces it.

The records are stored in the settings (``speculation/measured``), which a person can edit, so
they are read as data: a record that is not of the expected form is skipped, never trusted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from gui.cluster.planning.speculation import Speculation, SpeculationError

#: How many models' decisions are kept (the most recent first).
KEPT_DECISIONS = 20


def _tried_key(speculation: Speculation) -> dict:
    """What identifies the speculation that was tried (not its gain or reason)."""
    doc = speculation.to_json()
    return {k: doc[k] for k in ("kind", "draft", "draft_max") if k in doc}


def _model_key(model_path: Path) -> dict | None:
    """The model's file and size (a file replaced by another model is another model), or None
    when it cannot be read."""
    try:
        return {"model": str(model_path), "size": model_path.stat().st_size}
    except OSError:
        return None


def remember_decision(records: Sequence, model_path: Path, tried: Speculation, decision: Speculation) -> list:
    """``records`` with ``decision`` (what *Fastest* measured for ``tried`` on ``model_path``)
    first, any earlier one for that model dropped, at most :data:`KEPT_DECISIONS` kept."""
    key = _model_key(model_path)
    kept = [r for r in records if isinstance(r, Mapping) and r.get("model") != str(model_path)]
    if key is None:
        return kept[:KEPT_DECISIONS]
    record = {**key, "tried": _tried_key(tried), "decision": decision.to_json()}
    return [record, *kept][:KEPT_DECISIONS]


def remembered_decision(records: Sequence, model_path: Path, tried: Speculation) -> Speculation | None:
    """The decision *Fastest* made for ``tried`` on ``model_path`` (the same file, the same
    size), or None when it never measured that speculation for it."""
    key = _model_key(model_path)
    if key is None:
        return None
    for record in records:
        if not isinstance(record, Mapping) or record.get("model") != key["model"]:
            continue
        if record.get("size") != key["size"] or record.get("tried") != _tried_key(tried):
            return None  # the file or Auto's pick changed since: measure again
        try:
            return Speculation.from_json(record.get("decision"), "speculation/measured")
        except SpeculationError:
            return None
    return None
