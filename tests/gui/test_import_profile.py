"""Importing a cluster profile whose nodes are gone is refused with what to do (#17).

As a person meets it: `herd demo` gives its agents new ids on every run, so a profile exported
in one run names nodes that the next run does not have, even under the same names. The profile
is exported through File ▸ Export (the real save dialog), the first agents stop, new ones of
the same names are added and paired, and File ▸ Import (the real open dialog) shows the profile:
the missing nodes are errors that say what to do, and *Use this profile* cannot be pressed.
A profile whose nodes are all here is used, on their addresses and free memory as they are now.

A profile made on another PC names nodes this one has found but not paired: the review says so,
names them and pairs them from its own buttons, then lets the profile be used without importing
it again; the window confirms what was applied. A split made by hand comes back when its model
is chosen again from *Recent models*, and after a restart.
"""

from __future__ import annotations

import pytest
from person import (
    add_node_by_address,
    answer_dialog,
    check,
    choose_file,
    click,
    pair_by_card,
    type_and_ok,
    use_menu,
)
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox

from gui.cli.demo import DemoCluster
from gui.widgets.nodes_panel import PinDialog
from gui.widgets.profile_dialog import ProfileDiffDialog

pytestmark = pytest.mark.engine


def _add_and_pair(qtbot, win, cluster):
    ours = {a.address: a for a in cluster.agents}
    for a in cluster.agents:
        add_node_by_address(qtbot, win, a.address)
    qtbot.waitUntil(lambda: sum(f"{n.host}:{n.api_port}" in ours for n in win.node_map.values()) == len(ours),
                    timeout=20000)
    ids = {}
    for nid, n in list(win.node_map.items()):
        a = ours.get(f"{n.host}:{n.api_port}")
        if a is not None:
            pair_by_card(qtbot, win, nid, a.pin)
            ids[a.name] = nid
    qtbot.waitUntil(lambda: all(i in win.node_status for i in ids.values()), timeout=15000)
    return ids


def _export(qtbot, win, path):
    seen = answer_dialog(qtbot, QFileDialog, choose_file(qtbot, str(path)))
    use_menu(qtbot, win, win.menus.export_action)
    check(seen)
    qtbot.waitUntil(path.is_file, timeout=30000)


def _import(qtbot, win, path, review_with):
    """File ▸ Import cluster profile…, choose ``path``; the profile is read in the background,
    then its review dialog opens and ``review_with(dialog)`` answers it."""
    files = answer_dialog(qtbot, QFileDialog, choose_file(qtbot, str(path)))
    review = answer_dialog(qtbot, ProfileDiffDialog, review_with, timeout=20)
    use_menu(qtbot, win, win.menus.import_action)
    check(files)
    # (the dialog is answered inside its own event loop: once it is seen here, it has closed)
    qtbot.waitUntil(lambda: "dialog" in review or "error" in review, timeout=25000)
    check(review)


def test_profile_of_gone_nodes_is_refused_and_a_live_one_used(qtbot, make_window, agents, demo_model, tmp_path,
                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the file dialogs open
    win = make_window(browse=False)
    first = _add_and_pair(qtbot, win, agents)
    assert win.open_model(str(demo_model))
    qtbot.waitUntil(lambda: len(win.editor.plan().devices()) == 2, timeout=10000)
    n = win.model.n_layer + 1
    assert win.editor.set_counts(2, [3, n - 5])
    saved = tmp_path / "cluster.json"
    _export(qtbot, win, saved)

    # the same profile, the same nodes: used as saved, on the nodes as they are now
    win.editor.reset_by_memory()
    assert win.editor.plan().host_layers != 2
    dialogs = []

    def use_it(dlg: ProfileDiffDialog) -> None:
        dialogs.append(dlg)
        assert dlg.apply_button.isEnabled(), [dlg.list.item(i).text() for i in range(dlg.list.count())]
        click(qtbot, dlg.apply_button)

    _import(qtbot, win, saved, use_it)
    assert win.editor.plan().host_layers == 2 and win.editor.plan().counts() == [3, n - 5]
    live = {d.key: d for d in win.planned_devices()}
    assert all(d == live[d.key] for d in win.editor.plan().devices())  # today's free memory

    # a new demo: the same names, other agents (other ids); the first ones stop
    second = DemoCluster(2)
    second.start()
    try:
        _add_and_pair(qtbot, win, second)
        agents.stop()
        qtbot.waitUntil(lambda: not any(win.node_map[i].reachable for i in first.values() if i in win.node_map),
                        timeout=30000)
        qtbot.waitUntil(lambda: not any(d.node_id in first.values() for d in win.planned_devices()), timeout=10000)
        before = win.editor.plan()

        def refuse(dlg: ProfileDiffDialog) -> None:
            rows = [dlg.list.item(i).text() for i in range(dlg.list.count())]
            # the old demo-a is gone (or listed, but silent): either way an error with what to do
            assert any(r.startswith("✖ demo-a: node is missing") and "Start its herd-agent and pair" in r
                       or r.startswith("✖ demo-a: node does not answer") and "herd-agent runs" in r
                       for r in rows), rows
            assert not dlg.apply_button.isEnabled()
            assert "cannot be used" in dlg.verdict.text()
            click(qtbot, dlg.apply_button)  # a click on the greyed button does nothing
            assert dlg.isVisible()
            dlg.reject()

        _import(qtbot, win, saved, refuse)
        # nothing changed: no dead endpoint in the split
        assert win.editor.plan() == before
        assert not any(d.node_id in first.values() for d in win.editor.plan().devices())
    finally:
        second.stop()


def _add(qtbot, win, cluster) -> dict:
    """Add the cluster's agents by address (not paired); {name: node id}."""
    ours = {a.address: a for a in cluster.agents}
    for a in cluster.agents:
        add_node_by_address(qtbot, win, a.address)
    qtbot.waitUntil(lambda: sum(f"{n.host}:{n.api_port}" in ours for n in win.node_map.values()) == len(ours),
                    timeout=20000)
    return {ours[f"{n.host}:{n.api_port}"].name: nid for nid, n in win.node_map.items()
            if f"{n.host}:{n.api_port}" in ours}


def test_a_profile_of_nodes_not_paired_here_offers_to_pair_them_then_is_used(qtbot, make_window, agents,
                                                                            demo_model, tmp_path, monkeypatch):
    from gui.cluster.launching.profile import make_profile, save_profile
    from gui.cluster.llama.model import inspect_model
    from gui.cluster.planning.plan import Device, Plan

    monkeypatch.chdir(tmp_path)
    win = make_window(browse=False)
    ids = _add(qtbot, win, agents)
    assert not any(win.node_map[i].paired for i in ids.values())
    pins = {a.name: a.pin for a in agents.agents}
    # The profile another master made of these PCs, as its File ▸ Export writes it (through the
    # same core function); that master measured its own free memory, this one binds to today's.
    info = inspect_model(demo_model)
    n = info.n_slots
    devs = [Device(ids[name], name, f"{win.node_map[ids[name]].host}:{50052 + i}", 0, "CPU", 1 << 30, 2 << 30)
            for i, name in enumerate(sorted(ids))]
    plan = Plan(info.n_layer, 2, ((devs[0], 3), (devs[1], n - 5)))
    made = make_profile(plan, info, list(win.node_map.values()), engine=win.engine, ctx=512)
    saved = save_profile(tmp_path / "cluster.json", made)

    # Use refuses it by the same check the review shows, naming the nodes and what to do
    before = win.editor.plan()
    texts = []
    told = answer_dialog(qtbot, QMessageBox, lambda box: (texts.append(box.text()), box.accept()))
    assert not win.profiles.apply(made)
    check(told)
    said = texts[0]
    assert all(f"{name}: node is not paired with this computer — Press Pair" in said for name in ids), said
    assert win.editor.plan() == before

    def pair_then_use(dlg: ProfileDiffDialog) -> None:
        def rows():
            return [dlg.list.item(i).text() for i in range(dlg.list.count())]

        # no promise the Use button then breaks: the review says what Use would say
        assert not any(r.startswith("✔") for r in rows()), rows()
        for name in ids:
            assert any(r.startswith(f"✖ {name}: node is not paired with this computer") and "PIN" in r
                       for r in rows()), rows()
        assert set(dlg.pair_buttons) == set(ids.values())
        assert not dlg.apply_button.isEnabled()
        assert "once its nodes are paired" in dlg.verdict.text()
        for name in sorted(ids):
            typed = answer_dialog(qtbot, PinDialog, type_and_ok(qtbot, pins[name]))
            click(qtbot, dlg.pair_buttons[ids[name]])
            check(typed)
            qtbot.waitUntil(lambda name=name: ids[name] not in dlg.pair_buttons, timeout=20000)
        # the same review, checked again as the nodes paired and reported: usable now
        qtbot.waitUntil(dlg.apply_button.isEnabled, timeout=20000)
        # no error is left; what it changes here is said as warnings (context, split), never
        # "✔ Matches" while something differs (#37 item 14)
        assert not any(r.startswith("✖") for r in rows()), rows()
        assert any(r.startswith("⚠ server: context 512 replaces") for r in rows()), rows()
        assert not any(r.startswith("✔") for r in rows()), rows()
        click(qtbot, dlg.apply_button)

    review = answer_dialog(qtbot, ProfileDiffDialog, pair_then_use, timeout=60)
    # (past File ▸ Import's file dialog, which the test above goes through: once a process has
    # used a file dialog, Qt opens the next one in that folder, another test's)
    assert win.profiles.review(str(saved))
    check(review)
    assert all(win.node_map[i].paired for i in ids.values())
    assert win.editor.plan().host_layers == 2 and win.editor.plan().counts() == [3, n - 5]
    # the window says what it did: which model, which split
    said = f"Profile applied: {info.name}, layer slots this computer 2, demo-a 3, demo-b {n - 5}."
    assert win.statusBar().currentMessage().startswith(said), win.statusBar().currentMessage()
    assert win.editor.note.isVisible() and win.editor.note.text().startswith(said)


def _choose_recent(qtbot, win, path) -> None:
    """Pick ``path`` in the *Recent models* list: open the list, click its row."""
    box = win.model_panel.recent
    row = box.findData(str(path))
    assert row >= 0, [box.itemData(i) for i in range(box.count())]
    box.showPopup()
    view = box.view()
    qtbot.waitUntil(view.isVisible, timeout=5000)
    rect = view.visualRect(view.model().index(row, 0))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: win.model is not None and str(win.model.path) == str(path), timeout=5000)


def test_a_split_made_by_hand_comes_back_with_its_model(qtbot, make_window, agents, demo_model, tmp_path):
    from gui.cluster.llama.random_model import DemoShape, write_demo_model

    other = write_demo_model(tmp_path / "other-4L.gguf", DemoShape(layers=4))
    win = make_window(browse=False)
    _add_and_pair(qtbot, win, agents)
    assert win.open_model(str(demo_model))
    qtbot.waitUntil(lambda: len(win.editor.plan().devices()) == 2, timeout=10000)
    n = win.model.n_slots
    assert win.editor.set_counts(2, [3, n - 5])
    made = win.editor.plan()
    assert win.open_model(str(other))
    assert win.editor.plan().n_layer == 4
    _choose_recent(qtbot, win, demo_model)
    # the same split on the same devices (their free memory is live and may have moved)
    back = win.editor.plan()
    assert [(d.key, c) for d, c in back.assignments] == [(d.key, c) for d, c in made.assignments]
    assert back.host_layers == made.host_layers

    # after a restart: the same model opens first, the nodes report one by one, the split returns
    win.close()
    again = make_window(browse=False)
    # (the last model is read off the GUI thread at start)
    qtbot.waitUntil(lambda: again.model is not None and str(again.model.path) == str(demo_model), timeout=20000)
    qtbot.waitUntil(lambda: len(again.editor.plan().devices()) == 2, timeout=20000)
    assert again.editor.plan().counts() == [3, n - 5] and again.editor.plan().host_layers == 2
