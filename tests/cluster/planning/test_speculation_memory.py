"""What *Fastest* measured about speculation is kept per model (#35): opening the model again
under *Auto* gives back the decision, not the pick it dropped; the records are read as data."""

from __future__ import annotations

from pathlib import Path

import pytest

from gui.cluster.planning.speculation import DRAFT, NGRAM, Speculation
from gui.cluster.planning.speculation_memory import KEPT_DECISIONS, remember_decision, remembered_decision


@pytest.fixture
def files(tmp_path) -> tuple[Path, Path]:
    model, draft = tmp_path / "target.gguf", tmp_path / "draft.gguf"
    model.write_bytes(b"x" * 100)
    draft.write_bytes(b"y" * 10)
    return model, draft


def test_a_dropped_draft_stays_dropped_and_a_kept_one_keeps_its_gain(files):
    model, draft = files
    pick = Speculation(DRAFT, draft_path=draft)
    dropped = Speculation(predicted_gain=0.91, reason="measured 0.91× the speed without, so it stays off")
    records = remember_decision([], model, pick, dropped)
    assert remembered_decision(records, model, pick).to_json() == dropped.to_json()
    assert not remembered_decision(records, model, pick).active

    kept = pick.with_prediction(1.3, "measured 1.30× faster, so it is on")
    records = remember_decision(records, model, pick, kept)
    assert len(records) == 1  # (the newer decision replaces the older)
    assert remembered_decision(records, model, pick).to_json() == kept.to_json()


def test_another_pick_or_another_file_is_measured_again(files):
    model, draft = files
    pick = Speculation(DRAFT, draft_path=draft)
    records = remember_decision([], model, pick, Speculation(reason="slower"))
    assert remembered_decision(records, model, Speculation(NGRAM)) is None
    assert remembered_decision(records, model, Speculation(DRAFT, draft_path=draft, draft_max=5)) is None
    model.write_bytes(b"x" * 101)  # another model under the same name
    assert remembered_decision(records, model, pick) is None
    model.unlink()
    assert remembered_decision(records, model, pick) is None


def test_records_that_are_not_of_the_form_are_skipped_not_trusted(files):
    model, draft = files
    pick = Speculation(DRAFT, draft_path=draft)
    size = model.stat().st_size
    tried = {"kind": "draft", "draft": str(draft), "draft_max": pick.draft_max}
    for bad in ("text", 3, None, {"model": str(model), "size": size, "tried": tried, "decision": "--rpc evil:1"},
                {"model": str(model), "size": size, "tried": tried, "decision": {"kind": "draft", "extra": 1}}):
        assert remembered_decision([bad], model, pick) is None, bad


def test_only_the_newest_models_are_kept(tmp_path):
    records: list = []
    for i in range(KEPT_DECISIONS + 5):
        model = tmp_path / f"m{i}.gguf"
        model.write_bytes(b"x")
        records = remember_decision(records, model, Speculation(NGRAM), Speculation(reason=str(i)))
    assert len(records) == KEPT_DECISIONS
    assert records[0]["model"].endswith(f"m{KEPT_DECISIONS + 4}.gguf")
