"""What the user sees of speculation (#35): the split editor's summary and command line show the
choice and its predicted gain; the dashboard says how many drafted tokens were accepted and the
effective tokens/s of the last reply."""

from __future__ import annotations

import re

import pytest

from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.random_model import DemoShape, vocab_tokenizer, write_demo_model
from gui.cluster.nodes.telemetry import Sample
from gui.cluster.planning.plan import Device
from gui.cluster.planning.speculation import DRAFT, Speculation
from gui.widgets.dashboard import Dashboard
from gui.widgets.split_editor import SplitEditor

GiB = 1 << 30


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    target = write_demo_model(folder / "target.gguf", DemoShape(layers=8, embd=256, vocab=4096))
    draft = write_demo_model(folder / "draft.gguf", DemoShape(layers=2, embd=64), tokenizer=vocab_tokenizer(target))
    return target, draft


def test_the_split_editor_shows_the_speculation_and_its_predicted_gain(qtbot, pair):
    target, draft = pair
    editor = SplitEditor()
    qtbot.addWidget(editor)
    editor.set_cluster(inspect_model(target), [Device("node-a", "alpha", "127.0.0.1:50101", 0, "CPU", 8 * GiB,
                                                      16 * GiB)], host_free_bytes=8 * GiB)
    assert "peculation" not in editor.summary.text() and "-md" not in editor.command_line()
    editor.set_speculation(Speculation(DRAFT, draft_path=draft, draft_max=4).with_prediction(
        1.18, "the round trips are paid once for several tokens"))
    summary = editor.summary.text()
    assert "Everything fits." in summary
    assert ("Speculation: draft model draft.gguf, 4 tokens per pass — predicted 1.18× the speed without "
            "(the round trips are paid once for several tokens).") in summary
    cmd = editor.command.toPlainText()
    assert re.search(rf"-md {re.escape(str(draft))} -ngld 0 -devd none", cmd), cmd
    # the draft's memory is planned on the host, in the table's host row
    host = editor.split.fits[-1]
    assert host.is_host and host.draft_bytes > inspect_model(draft).file_bytes
    editor.set_speculation(None)
    assert "peculation" not in editor.summary.text() and "-md" not in editor.command.toPlainText()


def test_the_dashboard_counts_accepted_drafts_over_the_replies(qtbot):
    board = Dashboard()
    qtbot.addWidget(board)
    board.show()
    t = 1000.0
    # a reply without speculation says nothing about drafts
    board.add_sample(Sample(t, "reply", "chat", {"predicted_n": 20, "predicted_ms": 400.0,
                                                 "predicted_per_second": 47.5, "prompt_ms": 10.0}))
    assert board.acceptance_line.isHidden() and board.acceptance_line.text() == ""
    board.add_sample(Sample(t + 1, "reply", "chat", {"predicted_n": 24, "predicted_ms": 300.0, "prompt_ms": 9.0,
                                                     "predicted_per_second": 76.7, "draft_n": 30,
                                                     "draft_n_accepted": 12}))
    assert board.acceptance_line.isVisible()
    assert board.acceptance_line.text() == ("Speculation: 40 % of drafted tokens accepted (12 of 30). "
                                            "Last reply: 76.7 tokens/s effective.")
    board.add_sample(Sample(t + 2, "reply", "chat", {"predicted_n": 24, "predicted_ms": 200.0, "prompt_ms": 9.0,
                                                     "predicted_per_second": 115.0, "draft_n": 10,
                                                     "draft_n_accepted": 10}))
    assert board.acceptance_line.text().startswith("Speculation: 55 % of drafted tokens accepted (22 of 40).")
    assert "115.0 tokens/s effective" in board.acceptance_line.text()
