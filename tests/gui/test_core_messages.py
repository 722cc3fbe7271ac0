"""Messages of the Qt-free core (doctor, launcher, agent client, plan) are shown in the app's
language: Chinese in a zh_CN window, English in the CLI (see agent/i18n.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from conftest import free_port
from PySide6.QtWidgets import QApplication

from agent import i18n
from gui.cluster.failover.text import describe_event
from gui.cluster.launching.doctor import ERROR, check_cluster
from gui.cluster.llama import server_process as L
from gui.cluster.llama.server_command import ServerOptions, ServerSpec
from gui.cluster.llama.server_start import serving
from gui.cluster.nodes.records import Node
from gui.translations import install_translator


@pytest.fixture
def zh_cn(qapp: QApplication, tmp_path, monkeypatch):
    """The app's zh_CN translation installed as run_app installs it; removed afterwards."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    installed = install_translator(qapp, "zh_CN")
    assert installed, "the zh_CN catalogue must load"
    yield
    for t in installed:
        qapp.removeTranslator(t)
    i18n.set_translator(None)


def _unreachable_node() -> Node:
    return Node(id="n-gone", name="gone", host="127.0.0.1", api_port=free_port())


def _client_for(node):
    from agent.client import AgentClient

    return AgentClient(node.api_url, timeout=2.0)


async def test_doctor_finding_is_chinese_in_the_window(zh_cn, qtbot, engine):
    from gui.widgets.launch_panel import LaunchPanel

    findings = await check_cluster([_unreachable_node()], _client_for, engine, timeout=2.0)
    gone = [f for f in findings if f.code == "unreachable"]
    assert gone and gone[0].severity == ERROR
    panel = LaunchPanel()
    qtbot.addWidget(panel)
    panel.show_findings(findings)
    texts = [panel.findings.item(i).text() for i in range(panel.findings.count())]
    line = next(t for t in texts if "gone:" in t)
    assert "上的代理没有响应" in line and "127.0.0.1" in line, line
    # the agent client's own error inside it is translated too
    assert "无法连接" in line, line
    assert any(t.startswith("✔ 本机: 已找到 llama-server") for t in texts), texts


async def test_port_in_use_failure_is_chinese_in_the_window(zh_cn, qtbot, engine, demo_model):
    from gui.widgets.launch_panel import LaunchPanel

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(L.LaunchError) as exc:
            async with serving(engine.llama_server, ServerSpec(model=demo_model, options=ServerOptions(ctx=256, port=port)), timeout=60):
                pass
    panel = LaunchPanel()
    qtbot.addWidget(panel)
    panel.show_state("failed", str(exc.value))
    assert panel.status.text() == f"失败：本机端口 {port} 已被占用；请用 --port 换一个端口", panel.status.text()


def test_core_stays_english_without_the_app():
    i18n.set_translator(None)
    assert "is already in use on this machine" in L.explain_failure(
        ["couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080"], 1)


def _cli_env(tmp_path) -> dict:
    env = dict(os.environ, HERD_CONFIG_DIR=str(tmp_path / "config"), LANG="zh_CN.UTF-8",
               LC_ALL="zh_CN.UTF-8", LANGUAGE="zh_CN")
    for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):  # data: the engine
        env[var] = str(tmp_path / var.lower())
    return env


def _has_chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_herd_doctor_stays_english(tmp_path):
    """A Chinese locale does not change the CLI: the agent client's error is in English."""
    port = free_port()
    out = subprocess.run([sys.executable, "-m", "gui.main", "doctor", "--json", "--no-mdns",
                          "--add", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=120,
                         env=_cli_env(tmp_path))
    assert out.returncode != 0
    assert f"cannot reach agent at https://127.0.0.1:{port}" in out.stderr, out.stderr
    assert not _has_chinese(out.stdout + out.stderr)


def test_herd_doctor_findings_stay_english(tmp_path, procs, engine):
    """Real findings about a real (unpaired) agent, under a Chinese locale: English sentences."""
    from cluster.agents import start_agent

    agent = start_agent(procs.popen, tmp_path, "doc-en", mdns=False)
    address = agent.api_url.removeprefix("https://")
    out = subprocess.run([sys.executable, "-m", "gui.main", "doctor", "--json", "--no-mdns",
                          "--add", address], capture_output=True, text=True, timeout=120,
                         env=_cli_env(tmp_path))
    findings = {f["code"]: f["message"] for f in json.loads(out.stdout)}
    assert findings["reachable"] == f"The agent answers at {agent.api_url}."
    assert findings["not-paired"].startswith("This master is not paired with the node"), findings
    assert not _has_chinese(out.stdout + out.stderr)


def test_herd_up_failure_stays_english(tmp_path, engine, demo_model):
    env = _cli_env(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "gui.main", "up", str(demo_model), "--no-mdns",
                              "--ctx", "256", "--port", str(port), "--load-timeout", "60"],
                             capture_output=True, text=True, timeout=180, env=env)
    assert out.returncode != 0
    said = out.stdout + out.stderr
    assert f"the port {port} is already in use on this machine" in said, said[-2000:]
    assert not _has_chinese(said)


def test_placement_problem_is_chinese_in_the_window(zh_cn, qtbot):
    from gui.cluster.launching.placement import check_placement
    from gui.cluster.llama.placement_log import parse_placement
    from gui.cluster.llama.server_command import BUFFER_LINES_LEVEL
    from gui.cluster.planning.plan import Plan
    from gui.widgets.launch_panel import LaunchPanel

    # a log without the placement lines (llama-server run below -lv 4)
    check = check_placement(Plan(8, 9, []), parse_placement("main: server is listening on http://127.0.0.1:1\n"))
    assert not check.ok
    panel = LaunchPanel()
    qtbot.addWidget(panel)
    panel.show_placement(check)
    assert panel.verified.text().endswith(
        f"llama-server 的日志中没有层分布报告（需要 -lv {BUFFER_LINES_LEVEL} 或更高）"), panel.verified.text()


def test_wrong_pin_is_chinese_in_the_window(zh_cn, qtbot, tmp_path, monkeypatch, engine):
    """The whole path: the agent client's error is made in the bridge thread, shown by the window."""
    from gui.app import MainWindow
    from gui.bridge import AsyncBridge
    from gui.cli.demo import DemoCluster
    from gui.session import ClusterSession
    from gui.settings import Settings

    monkeypatch.setenv("HERD_CONFIG_DIR", str(tmp_path / "config"))
    cluster = DemoCluster(1)
    cluster.start()
    bridge = AsyncBridge()
    try:
        session = ClusterSession(bridge, interfaces=["127.0.0.1"], link_interval=0.5, status_interval=0.5)
        win = MainWindow(Settings(str(tmp_path / "herd.ini")), bridge=bridge, session=session, engine=engine)
        qtbot.addWidget(win)
        win.show()
        win.start()
        agent = cluster.agents[0]
        win.add_node(agent.address)
        qtbot.waitUntil(lambda: any(f"{n.host}:{n.api_port}" == agent.address for n in win.node_map.values()),
                        timeout=20000)
        node = next(n for n in win.node_map.values() if f"{n.host}:{n.api_port}" == agent.address)
        win.pair_node(node.id, "000000" if agent.pin != "000000" else "111111")
        qtbot.waitUntil(lambda: "PIN 错误" in win.nodes.message.text(), timeout=10000)
        assert "请输入该节点当前显示的 PIN" in win.nodes.message.text(), win.nodes.message.text()
        win.close()
    finally:
        bridge.close()
        cluster.stop()


def test_model_error_is_chinese_in_the_window(zh_cn, qtbot, tmp_path):
    from gui.cluster.llama.model import ModelError, inspect_model
    from gui.widgets.model_panel import ModelPanel

    notes = tmp_path / "notes.gguf"
    notes.write_text("not a model")
    with pytest.raises(ModelError) as exc:
        inspect_model(notes)
    panel = ModelPanel()
    qtbot.addWidget(panel)
    panel.show_error(str(notes), str(exc.value))
    text = panel.info.text()
    assert "不是 GGUF 文件（它不以每个 llama.cpp 模型文件都有的 GGUF 签名开头）" in text, text
    assert "b'" not in text  # in words, never Python's byte notation (#37)


async def test_failover_reason_is_chinese_in_the_app(zh_cn):
    """Why a node counts as lost, from a real refused connection, in the words the banner shows."""
    from agent.client import AgentClient, AgentError
    from gui.cluster.failover.text import describe_loss
    from gui.cluster.nodes.health import Loss, LossCause

    async with AgentClient(f"http://127.0.0.1:{free_port()}", timeout=2.0) as client:
        with pytest.raises(AgentError) as exc:
            await client.info()
    said = describe_loss(Loss(None, LossCause.AGENT_SILENT, str(exc.value), 2.0))
    assert said.endswith("连接被拒绝（该电脑上的 herd-agent 已不在运行）"), said


def test_failover_events_are_said_in_chinese_in_the_app(zh_cn):
    """The supervisor's events carry facts; the sentence is made in the app's language."""
    from gui.cluster.failover.events import EventKind, FailoverEvent

    ev = FailoverEvent(EventKind.REPLANNED, nodes=("a", "b"), back=("b",))
    assert describe_event(ev) == "新的分层方案：a, b（b 已恢复）", describe_event(ev)
