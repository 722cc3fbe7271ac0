"""The node card says whether the worker PC is kept awake while it serves (#36), in English and
Chinese. The statuses are what the agent's own :class:`agent.keep_awake.KeepAwake` reports (with
a stand-in of Windows' SetThreadExecutionState, since the OS call is not what is shown here)."""

from __future__ import annotations

from agent.keep_awake import KeepAwake, WindowsInhibitor
from agent.protocol import AgentStatus
from gui.cluster.nodes.records import Node
from gui.translations import load_translator
from gui.widgets.nodes_panel import NodesPanel


class StandInKernel32:
    """Stand-in for kernel32 (no Windows here): answers ``ok`` (non-zero = success)."""

    def __init__(self, ok: int) -> None:
        self.ok = ok

    def SetThreadExecutionState(self, flags: int) -> int:  # noqa: N802 - the API's name
        return self.ok


async def _reported(enabled: bool, ok: int = 1) -> dict:
    awake = KeepAwake(enabled, lambda: True, inhibitor=WindowsInhibitor(StandInKernel32(ok)))
    try:
        await awake.apply()
        return awake.status()
    finally:
        await awake.close()


def _card(qtbot):
    panel = NodesPanel()
    qtbot.addWidget(panel)
    panel.on_node_event("added", Node(id="n1", name="den", host="10.0.0.5", api_port=50050, paired=True))
    return panel, panel.card("n1")


def _show(card, keep_awake: dict) -> str:
    card.show_status(AgentStatus.from_json({"id": "n1", "rpc": {"state": "busy"}, "keep_awake": keep_awake}))
    return card.hardware.text()


async def test_the_card_says_whether_the_pc_is_kept_awake(qtbot):
    _panel, card = _card(qtbot)
    assert "Kept awake while serving" in _show(card, await _reported(True)).splitlines()
    assert ("May sleep while serving (keep_awake is off in its agent.toml)"
            in _show(card, await _reported(False)).splitlines())
    assert ("Cannot keep this computer awake: Windows refused SetThreadExecutionState"
            in _show(card, await _reported(True, ok=0)).splitlines())
    idle = {"enabled": True, "held": False, "error": None, "how": "logind"}  # nobody uses it now
    assert "awake" not in _show(card, idle) and "sleep" not in _show(card, idle)


async def test_the_card_says_it_in_chinese(qtbot, qapp, tmp_path):
    t = load_translator("zh_CN", cache=tmp_path)
    qapp.installTranslator(t)
    try:
        _panel, card = _card(qtbot)
        assert "服务期间保持唤醒" in _show(card, await _reported(True)).splitlines()
        assert ("服务期间可能进入睡眠（其 agent.toml 中 keep_awake 已关闭）"
                in _show(card, await _reported(False)).splitlines())
    finally:
        qapp.removeTranslator(t)
