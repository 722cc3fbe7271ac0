"""Whether a GGUF has a chat template, read from its header alone (#37.13)."""

from __future__ import annotations

import pytest

from gui.cluster.llama.chat_template import has_chat_template, suggested_template, template_in, with_template
from gui.cluster.llama.random_model import DemoShape, write_demo_model


@pytest.fixture(scope="module")
def without_template(tmp_path_factory):
    return write_demo_model(tmp_path_factory.mktemp("tpl") / "plain.gguf", DemoShape(layers=2))


def test_a_generated_model_without_a_template_says_so(without_template):
    assert has_chat_template(without_template) is False


def test_a_real_model_with_a_template_says_so(smollm2):
    assert has_chat_template(smollm2) is True


def test_what_is_not_a_whole_gguf_reads_as_unknown(tmp_path, without_template):
    notes = tmp_path / "notes.gguf"
    notes.write_bytes(b"not a gguf at all")
    assert has_chat_template(notes) is None
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(without_template.read_bytes()[:200])  # ends inside the key/value section
    assert has_chat_template(cut) is None
    assert has_chat_template(tmp_path / "missing.gguf") is None


def test_the_option_replaces_an_earlier_one_and_keeps_other_arguments():
    args = with_template(("-np", "2", "--chat-template", "chatml"), "gemma")
    assert args == ("-np", "2", "--chat-template", "gemma") and template_in(args) == "gemma"
    assert with_template(args, None) == ("-np", "2") and template_in(("-np", "2")) is None
    assert suggested_template("gemma3") == "gemma" and suggested_template("unheard-of") == "chatml"
