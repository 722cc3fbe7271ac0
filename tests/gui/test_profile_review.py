"""The import review shows everything a profile will run, and shows a sender's text as text (#32).

Real dialogs, offscreen. A profile is made the way a sender could write one: a model name with
``<img src=/dev/zero>`` (which aborted the app when rendered as rich text) and 5,000 characters
(which made the dialog 59,341 px wide), a node named the same way, and options of its own. The
review stays within the screen, draws those names as the characters they are, and lists every
argument llama-server will get and where the endpoint will listen.
"""

from __future__ import annotations

import shlex

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPushButton

from gui.cluster.launching.doctor import Finding
from gui.cluster.launching.profile import Profile, ProfileModel, ProfileNode
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.planning.plan import Device, Plan
from gui.widgets.profile_dialog import ProfileDiffDialog

HOSTILE = "<img src=/dev/zero>"


def _profile(model_name: str, node_name: str, extra=()) -> Profile:
    dev = Device("id-a", node_name, "127.0.0.1:50052", 0, "CPU", 1 << 30, 2 << 30)
    plan = Plan(8, 2, ((dev, 7),))
    return Profile(nodes={"id-a": ProfileNode("id-a", node_name, "127.0.0.1", 50050)},
                   model=ProfileModel("/models/m.gguf", 123, None, model_name, "llama", 8),
                   plan=plan, server=ServerOptions(ctx=2048, port=8181, extra_args=tuple(extra)))


def test_outside_names_are_plain_text_and_the_dialog_fits_the_screen(qtbot):
    model = "Qwen " + HOSTILE + "x" * 5000
    node = HOSTILE + "rogue" + "y" * 5000
    pair = Finding("error", node, "node is not paired with this computer", advice="Press Pair", pair_with="id-a")
    dlg = ProfileDiffDialog("/home/me/sent.json", _profile(model, node), [pair])
    qtbot.addWidget(dlg)
    dlg.show()
    qtbot.waitExposed(dlg)
    screen = dlg.screen().availableGeometry()
    assert dlg.width() <= screen.width(), (dlg.width(), screen.width())
    assert dlg.minimumSizeHint().width() <= screen.width()
    labels = dlg.findChildren(QLabel)
    shown = [lb for lb in labels if "<img" in lb.text()]
    assert shown, [lb.text()[:80] for lb in labels]  # the name is there, as characters
    assert all(lb.textFormat() == Qt.TextFormat.PlainText for lb in shown)
    button = next(b for b in dlg.findChildren(QPushButton) if "rogue" in b.text())
    assert "<img" in button.text() and button.sizeHint().width() < screen.width()
    cells = [dlg.plan_table.item(r, 0).text() for r in range(dlg.plan_table.rowCount())]
    assert any(c.startswith(HOSTILE + "rogue") and len(c) < 500 for c in cells), cells


def test_every_argument_and_the_endpoint_are_shown(qtbot):
    profile = _profile("Tiny", "alpha", extra=("--temp", "0.7", "-np", "1"))
    dlg = ProfileDiffDialog("/home/me/sent.json", profile, [], host="127.0.0.1")
    qtbot.addWidget(dlg)
    dlg.show()
    assert dlg.command.toPlainText() == shlex.join(["llama-server", *profile.llama_server_args()])
    assert "--rpc 127.0.0.1:50052" in dlg.command.toPlainText()
    assert "--host 127.0.0.1 --port 8181" in dlg.command.toPlainText()
    assert dlg.command.isReadOnly() and dlg.command.isVisible()
    assert "--temp 0.7 -np 1" in dlg.extra_label.text()
    assert "127.0.0.1:8181" in dlg.endpoint_label.text() and "this computer's own setting" in dlg.endpoint_label.text()
    # where this PC's setting shares the endpoint, the command line and the words say so
    shared = ProfileDiffDialog("/home/me/sent.json", profile, [], host="0.0.0.0")
    qtbot.addWidget(shared)
    assert "--host 0.0.0.0 --port 8181" in shared.command.toPlainText()
    assert "0.0.0.0:8181" in shared.endpoint_label.text()
    plain = _profile("Tiny", "alpha")
    other = ProfileDiffDialog("/home/me/plain.json", plain, [])
    qtbot.addWidget(other)
    assert "no llama-server options" in other.extra_label.text()
