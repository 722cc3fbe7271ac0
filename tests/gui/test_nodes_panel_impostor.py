"""A node card shows an impostor report on its own line, next to (not instead of) other warnings,
and hides it once the report is gone."""

from __future__ import annotations

from gui.cluster.nodes import Node
from gui.widgets.nodes_panel import NodesPanel

REPORT = ("identity not proven: the agent at http://10.0.0.66:50050 claims to be node n1 but its "
          "proof does not match the pairing; its token was not sent there")


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
    assert card.impostor.isVisibleTo(card) and "http://10.0.0.66:50050" in card.impostor.text()
    assert "never sent this node's token" in card.impostor.text()
    assert card.warning.isVisibleTo(card) and card.warning.text() == "a Wi-Fi warning"  # both shown

    panel.on_node_event("updated", node)
    assert not card.impostor.isVisibleTo(card) and card.warning.isVisibleTo(card)
