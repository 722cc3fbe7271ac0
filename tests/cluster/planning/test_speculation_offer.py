"""What the window's Speculation choice offers for a model, and what a stored choice means (#35),
on real generated files: a draft with the target's vocabulary, one with another, one too large."""

from __future__ import annotations

import pytest

from gui.cluster.llama.random_model import DemoShape, vocab_tokenizer, write_demo_model
from gui.cluster.planning.speculation import DRAFT, NGRAM, NONE, SpeculationError
from gui.cluster.planning.speculation_offer import offer_for


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("offer")
    target = write_demo_model(folder / "target.gguf", DemoShape(layers=8, embd=256, vocab=4096))
    draft = write_demo_model(folder / "draft.gguf", DemoShape(layers=1, embd=64), tokenizer=vocab_tokenizer(target))
    other = write_demo_model(folder / "other.gguf", DemoShape(layers=1, embd=64, vocab=2048))
    big = write_demo_model(folder / "big.gguf", DemoShape(layers=8, embd=256), tokenizer=vocab_tokenizer(target))
    return target, draft, other, big


def test_the_offer_lists_the_usable_draft_and_says_why_the_others_are_refused(models):
    target, draft, other, big = models
    offer = offer_for(target, [target, draft, other, big])
    assert [c.path for c in offer.usable] == [draft]
    assert not offer.has_mtp and offer.problem == ""
    assert offer.auto.kind == DRAFT and offer.auto.draft_path == draft
    lines = offer.refusals_text().splitlines()
    assert sorted(line.split(":")[0] for line in lines) == ["big.gguf", "other.gguf"]
    assert any(line.startswith("big.gguf: too large to draft: ") for line in lines), lines
    assert any(line.startswith("other.gguf: different ") for line in lines), lines


def test_auto_without_a_usable_draft_is_none_and_names_the_refused(models):
    target, _draft, other, _big = models
    offer = offer_for(target, [other])
    assert offer.auto.kind == NONE
    assert offer.auto.reason.startswith("no model on this PC has the target's vocabulary: other.gguf: different ")


def test_a_stored_choice_resolves_against_the_offer_or_says_why_not(models):
    target, draft, other, _big = models
    offer = offer_for(target, [draft, other])
    assert offer.resolve("auto") == offer.auto
    assert offer.resolve("none").kind == NONE and offer.resolve("ngram").kind == NGRAM
    assert offer.resolve(str(draft)).draft_path == draft
    with pytest.raises(SpeculationError, match="target.gguf carries no multi-token-prediction heads"):
        offer.resolve("mtp")
    with pytest.raises(SpeculationError, match="^other.gguf cannot draft for target.gguf: different "):
        offer.resolve(str(other))
    # a file the scan did not find (a profile's): judged when asked for
    assert offer_for(target, []).resolve(str(draft)).draft_path == draft
    with pytest.raises(SpeculationError):
        offer_for(target, []).resolve(str(target.parent / "gone.gguf"))


def test_a_target_that_cannot_be_read_gives_none_with_the_reason_in_words(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file")
    offer = offer_for(bad, [])
    assert offer.auto.kind == NONE and offer.problem and offer.auto.reason == offer.problem
    assert "Traceback" not in offer.problem and "Error(" not in offer.problem
