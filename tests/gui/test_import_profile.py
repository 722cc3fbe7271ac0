"""Importing a cluster profile whose nodes are gone is refused with what to do (#17).

As a person meets it: `herd demo` gives its agents new ids on every run, so a profile exported
in one run names nodes that the next run does not have, even under the same names. The profile
is exported through File ▸ Export (the real save dialog), the first agents stop, new ones of
the same names are added and paired, and File ▸ Import (the real open dialog) shows the profile:
the missing nodes are errors that say what to do, and *Use this profile* cannot be pressed.
A profile whose nodes are all here is used, on their addresses and free memory as they are now.
"""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QFileDialog

from gui.cli.demo import DemoCluster
from gui.widgets.profile_dialog import ProfileDiffDialog
from person import add_node_by_address, answer_dialog, check, choose_file, click, pair_by_card, use_menu

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
    use_menu(qtbot, win, win.export_action)
    check(seen)
    qtbot.waitUntil(path.is_file, timeout=30000)


def _import(qtbot, win, path, review_with):
    """File ▸ Import cluster profile…, choose ``path``; the profile is read in the background,
    then its review dialog opens and ``review_with(dialog)`` answers it."""
    files = answer_dialog(qtbot, QFileDialog, choose_file(qtbot, str(path)))
    review = answer_dialog(qtbot, ProfileDiffDialog, review_with, timeout=20)
    use_menu(qtbot, win, win.import_action)
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
