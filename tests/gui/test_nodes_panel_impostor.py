"""A node card shows an impostor report on its own line, next to (not instead of) other warnings,
and hides it once the report is gone."""

from __future__ import annotations

from gui.cluster.nodes.records import Node
from gui.widgets.nodes_panel import NodesPanel

REPORT = ("wrong key: the agent at https://10.0.0.66:50050 claims to be node n1 but its key is not "
          "the one pinned at pairing; this master does not use it")


def test_a_node_card_shows_and_clears_an_impostor_report(qtbot):
    panel = NodesPanel()
    qtbot.addWidget(panel)
    panel.show()
    node = Node(id="n1", name="alpha", host="10.0.0.5", api_port=50050, paired=True)
    panel.on_node_event("added", node)
    card = panel.card("n1")
    assert not card.impostor.isVisibleTo(card)

    card.set_warning("a Wi-Fi warning")
    panel.on_node_event("updated", node.with_(impostor=REPORT))
    assert card.impostor.isVisibleTo(card) and "https://10.0.0.66:50050" in card.impostor.text()
    assert "not the one pinned at pairing" in card.impostor.text()
    assert card.warning.isVisibleTo(card) and card.warning.text() == "a Wi-Fi warning"  # both shown

    panel.on_node_event("updated", node)
    assert not card.impostor.isVisibleTo(card) and card.warning.isVisibleTo(card)


def test_a_paired_node_card_shows_its_key_fingerprint(qtbot):
    """Like Syncthing's device ids: the card shows the start of the pinned key's fingerprint, the
    tooltip more of it, for comparing with what herd-agent logs on the node."""
    panel = NodesPanel()
    qtbot.addWidget(panel)
    key = "ab12cd34ef56" + "0" * 52
    panel.on_node_event("added", Node(id="n1", name="alpha", host="10.0.0.5", api_port=50050, paired=True,
                                      key=key))
    card = panel.card("n1")
    assert "AB12-CD34-EF56-0000" in card.paired_label.text()
    assert card.paired_label.toolTip().startswith("Key AB12-CD34-EF56-0000-0000")
    panel.on_node_event("updated", Node(id="n1", name="alpha", host="10.0.0.5", api_port=50050, repair=True))
    assert "pair again" in card.paired_label.text()
