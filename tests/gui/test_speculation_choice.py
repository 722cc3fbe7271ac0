"""The window plans speculation (#35): the split editor's *Speculation* choice offers the drafts
found among the models on this PC, says why the others cannot draft, keeps the choice across a
restart, puts it on the command line and in the launch request, and *Fastest* measures it with
and without on a real llama-server and keeps it or drops it with the reason.

HOME points at an empty temporary folder and herd's models folder (the ``hub/models_dir``
setting) at one the test fills, so the local scan finds what the test put there and nothing of
this machine's own.
"""

from __future__ import annotations

import shlex

import psutil
import pytest
from cluster.model_matrix import real_gemma3
from cluster.speculation_models import agreeing_pair
from PySide6.QtCore import Qt

from gui.cluster.llama.random_model import DemoShape, vocab_tokenizer, write_demo_model
from gui.cluster.planning.speculation import DRAFT, NGRAM, NONE


@pytest.fixture
def models_dir(tmp_path, monkeypatch):
    """herd's models folder, empty, and a home with no models in it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("LLAMA_CACHE", "HF_HOME", "HF_HUB_CACHE"):  # this machine's caches stay out
        monkeypatch.delenv(var, raising=False)
    folder = tmp_path / "herd-models"
    folder.mkdir()
    return folder


def _items(choice) -> dict[str, str]:
    combo = choice.combo
    return {combo.itemText(i): combo.itemData(i) for i in range(combo.count())}


def _choose(qtbot, choice, data: str) -> None:
    """Pick the item whose stored form is ``data`` with the keyboard, as a person does."""
    combo = choice.combo
    combo.setFocus()
    target = combo.findData(data)
    assert target >= 0, _items(choice)
    key = Qt.Key.Key_Down if target > combo.currentIndex() else Qt.Key.Key_Up
    while combo.currentIndex() != target:
        qtbot.keyClick(combo, key)


def test_a_draft_with_the_models_vocabulary_is_offered_under_auto_and_goes_on_the_command_line(
        qtbot, make_window, models_dir, smollm2):
    draft = write_demo_model(models_dir / "smol-draft.gguf", DemoShape(layers=1, embd=64),
                             tokenizer=vocab_tokenizer(smollm2))
    win = make_window(browse=False, **{"hub/models_dir": str(models_dir)})
    choice = win.editor.speculation_choice
    assert win.open_model(str(smollm2))
    qtbot.waitUntil(lambda: "smol-draft.gguf" in _items(choice), timeout=30000)

    assert choice.combo.currentData() == "auto"
    assert choice.combo.currentText() == "Auto (draft model smol-draft.gguf, 3 tokens per pass)"
    assert _items(choice)["smol-draft.gguf"] == str(draft)
    assert win.workspace.speculation.kind == DRAFT and win.workspace.speculation.draft_path == draft
    assert f"-md {shlex.quote(str(draft))}" in win.editor.command_line()
    assert "Speculation: draft model smol-draft.gguf, 3 tokens per pass" in win.editor.summary.text()
    # Start's request carries it, and the draft's memory is planned on the host
    request = win.workspace.launch_request(win.editor.plan())
    assert "-md" in request.spec().argv("llama-server")
    assert win.editor.split.fits[-1].is_host and win.editor.split.fits[-1].draft_bytes > 0
    assert choice.line.isHidden()  # nothing refused

    _choose(qtbot, choice, NONE)
    assert win.workspace.speculation.kind == NONE and "-md" not in win.editor.command_line()
    assert win.settings.get("server/draft") == NONE


def test_with_only_a_model_of_another_vocabulary_auto_chooses_none_and_says_why(
        qtbot, make_window, models_dir, smollm2):
    gemma = real_gemma3(models_dir)
    win = make_window(browse=False, **{"hub/models_dir": str(models_dir)})
    choice = win.editor.speculation_choice
    assert win.open_model(str(smollm2))
    qtbot.waitUntil(lambda: choice.line.isVisible(), timeout=60000)

    why = f"{gemma.name}: different tokenizer: llama vs gpt2"
    assert choice.line.text() == f"Not a draft for this model: {why}"
    assert why in choice.combo.toolTip()
    assert choice.combo.currentText() == "Auto (off)"
    assert gemma.name not in _items(choice)
    assert win.workspace.speculation.kind == NONE and "-md" not in win.editor.command_line()
    assert ("Speculation: none (no model on this PC has the target's vocabulary: "
            f"{why})") in win.editor.summary.text()


def test_the_choice_survives_a_restart_of_the_window(qtbot, make_window, models_dir, smollm2):
    draft = write_demo_model(models_dir / "smol-draft.gguf", DemoShape(layers=1, embd=64),
                             tokenizer=vocab_tokenizer(smollm2))
    first = make_window(browse=False, **{"hub/models_dir": str(models_dir)})
    assert first.open_model(str(smollm2))
    qtbot.waitUntil(lambda: "smol-draft.gguf" in _items(first.editor.speculation_choice), timeout=30000)
    _choose(qtbot, first.editor.speculation_choice, NGRAM)
    assert "--spec-type ngram-simple" in first.editor.command_line()
    first.close()

    again = make_window(browse=False, **{"hub/models_dir": str(models_dir)})
    choice = again.editor.speculation_choice
    assert again.open_model(str(smollm2))
    qtbot.waitUntil(lambda: "smol-draft.gguf" in _items(choice), timeout=30000)
    assert choice.combo.currentData() == NGRAM and choice.combo.currentText() == "N-gram look-up"
    assert again.workspace.speculation.kind == NGRAM
    assert "--spec-type ngram-simple" in again.editor.command_line() and "-md" not in again.editor.command_line()

    _choose(qtbot, choice, str(draft))  # and a draft by its file
    assert again.settings.get("server/draft") == str(draft)
    assert f"-md {shlex.quote(str(draft))}" in again.editor.command_line()


def test_fastest_measures_the_draft_with_and_without_and_keeps_or_drops_it_with_the_reason(
        qtbot, make_window, models_dir):
    target, draft = agreeing_pair(models_dir)
    win = make_window(browse=False, **{"hub/models_dir": str(models_dir), "server/ctx": 512})
    choice = win.editor.speculation_choice
    assert win.open_model(str(target))
    qtbot.waitUntil(lambda: win.workspace.speculation.kind == DRAFT, timeout=30000)
    assert win.workspace.speculation.draft_path == draft

    qtbot.waitUntil(lambda: win.editor.fastest_button.isEnabled(), timeout=20000)
    said = []
    win.statusBar().messageChanged.connect(said.append)
    qtbot.mouseClick(win.editor.fastest_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.speculation.trial_call is not None, timeout=300000)
    assert not win.editor.fastest_button.isEnabled()  # (the trial starts the plan itself)
    with qtbot.waitSignal(win.speculation.trial_call.done, timeout=600000):
        pass
    # the status line said what the trial was doing, in order, and how far it was
    counted = [m for m in said if m.startswith("Fastest: measuring ")]
    assert len(counted) >= 6 and counted[-1].endswith(f": {len(counted)} of {len(counted)} measurements done…"), said
    steps = [m for m in said if m.startswith("Fastest: ") and m not in counted]
    assert steps == ["Fastest: trying speculation by draft model agreeing-draft.gguf, 3 tokens per pass against "
                     "none on the planned cluster…",
                     "Fastest: starting the cluster without speculation and measuring it…",
                     "Fastest: starting the cluster with speculation by draft model agreeing-draft.gguf, 3 tokens "
                     "per pass and measuring it…"], said

    note = win.editor.note.text()
    decision = win.workspace.speculation
    assert "measured " in note and " tokens/s)" in note, note
    if decision.active:
        assert decision.kind == DRAFT and "faster, so it is on" in note
        assert f"-md {shlex.quote(str(draft))}" in win.editor.command_line()
    else:
        assert "so it stays off" in note and "-md" not in win.editor.command_line()
    assert decision.predicted_gain is not None
    qtbot.waitUntil(lambda: win.editor.fastest_button.isEnabled(), timeout=5000)
    assert choice.combo.currentData() == "auto"  # the choice stays the user's; the plan has the decision

    # opened again, the model keeps what Fastest measured under Auto (a dropped draft stays dropped)
    assert win.open_model(str(target))
    qtbot.waitUntil(lambda: win.speculation.offer is not None
                    and win.workspace.speculation.to_json() == decision.to_json(), timeout=30000)
    assert choice.combo.currentText() == (f"Auto ({decision.label()})" if decision.active else "Auto (off)")
    assert ("-md" in win.editor.command_line()) == decision.active

    # the draft chosen by name, Start runs llama-server with it (the process's own command line)
    _choose(qtbot, choice, str(draft))
    assert win.workspace.speculation.kind == DRAFT
    qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.launch.state in ("ready", "failed"), timeout=120000)
    assert win.launch.state == "ready", win.launch.status.text()
    server = psutil.Process(win.session.supervisor.launcher.server_start.server.pid)
    argv = server.cmdline()
    assert argv[argv.index("-md") + 1] == str(draft), argv
    assert win.session.cluster_launch.request.speculation.draft_path == draft  # (what failover relaunches)
    with qtbot.waitSignal(win.launch_flow.stop().done, timeout=60000):
        pass
    qtbot.waitUntil(lambda: not server.is_running() or server.status() == psutil.STATUS_ZOMBIE, timeout=30000)


def test_a_profile_keeps_the_speculation_on_export_and_import(qtbot, make_window, models_dir, smollm2, tmp_path):
    from gui.cluster.launching.profile import load_profile

    draft = write_demo_model(models_dir / "smol-draft.gguf", DemoShape(layers=1, embd=64),
                             tokenizer=vocab_tokenizer(smollm2))
    win = make_window(browse=False, **{"hub/models_dir": str(models_dir)})
    assert win.open_model(str(smollm2))
    qtbot.waitUntil(lambda: win.workspace.speculation.kind == DRAFT, timeout=30000)
    path = tmp_path / "cluster.json"
    with qtbot.waitSignal(win.profiles.export(str(path)).done, timeout=60000):
        pass
    profile = load_profile(path)
    assert profile.speculation.kind == DRAFT and profile.speculation.draft_path == draft

    # another PC's window, which had turned speculation off, imports it
    _choose(qtbot, win.editor.speculation_choice, NONE)
    assert "-md" not in win.editor.command_line()
    assert win.profiles.apply(profile)
    qtbot.waitUntil(lambda: win.speculation.offer is not None, timeout=30000)
    assert win.settings.get("server/draft") == str(draft)
    assert win.editor.speculation_choice.combo.currentText() == "smol-draft.gguf"
    assert f"-md {shlex.quote(str(draft))}" in win.editor.command_line()


def test_a_long_draft_name_does_not_widen_the_split_tab_past_a_small_screen(qtbot, tmp_path):
    from gui.cluster.planning.speculation_offer import offer_for
    from gui.widgets.split_editor import SplitEditor

    target = write_demo_model(tmp_path / "target.gguf", DemoShape(layers=8, embd=256, vocab=4096))
    long_name = "qwen2.5-coder-0.5b-instruct-draft-for-speculative-decoding-q4_k_m.gguf"
    draft = write_demo_model(tmp_path / long_name, DemoShape(layers=1, embd=64), tokenizer=vocab_tokenizer(target))
    offer = offer_for(target, [draft])
    editor = SplitEditor()
    qtbot.addWidget(editor)
    editor.speculation_choice.set_offer(offer, "auto", offer.auto.label())
    editor.show()
    assert editor.speculation_choice.combo.currentText() == f"Auto (draft model {long_name}, 3 tokens per pass)"
    assert editor.minimumSizeHint().width() <= 800  # (#17: the Split tab fits an 800 px screen)


def test_a_model_read_that_ends_as_the_window_closes_asks_for_no_more_work(qtbot, make_window, models_dir, smollm2):
    """A model read can end just after the window closed its bridge (the result is queued to the
    GUI thread): judging the drafts then must not submit work to the closed bridge, which raised
    "the bridge is closed" inside Qt's event loop."""
    win = make_window(browse=False, **{"hub/models_dir": str(models_dir)})
    assert win.open_model(str(smollm2))
    qtbot.waitUntil(lambda: win.speculation.offer is not None, timeout=30000)
    win.close()
    win.bridge.close()  # (as the app does once its window is closed)
    # what the queued end of a read and of the local scan do after the close
    win.speculation.model_opened(win.workspace.model)
    win.speculation.local_models_found([])
    assert win.speculation._read_offer() is None
