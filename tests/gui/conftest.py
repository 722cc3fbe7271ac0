"""Fixtures for the desktop app's tests: a bridge per test, a real llama-server, demo agents, the
main window. (No QThread, widget or event-loop state outlives a test: ``tests/leak_guard.py``.)
"""

from __future__ import annotations

import pytest
from conftest import llama_server_process


@pytest.fixture(autouse=True)
def _app(qapp):
    """Every test of the app has its QApplication, as the app itself does."""
    return qapp


@pytest.fixture(autouse=True)
def _chats_kept_in_tmp(tmp_path, monkeypatch):
    """The windows a test opens keep their chats in its own folder, not the user's (#36)."""
    monkeypatch.setattr("gui.cluster.chat.history.default_path", lambda: tmp_path / "chats.sqlite3")


@pytest.fixture
def app_state_restored(qapp):
    """For a test that runs the app's main loop (``run_app``, ``herd demo``): afterwards, puts back what a real run keeps until the process exits: the translators
    (Qt's and the core's), the Ctrl-C/SIGTERM handlers, the style and names it sets, the objects
    ``gc.freeze()`` set aside, and Qt's nested event loops, which a Quit handled after the main
    loop ended leaves off (every later modal dialog and ``waitSignal`` would return at once)."""
    import gc
    import signal

    from person import revive_event_loops

    from agent import i18n

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    style, names = qapp.style().name(), (qapp.applicationName(), qapp.organizationName(),
                                         qapp.applicationVersion())
    frozen = gc.get_freeze_count()
    yield
    for t in getattr(qapp, "_herd_translators", []):
        qapp.removeTranslator(t)
    qapp._herd_translators = []
    i18n.set_translator(None)
    for s, h in handlers.items():
        signal.signal(s, h)
    qapp.setStyle(style)
    qapp.setApplicationName(names[0])
    qapp.setOrganizationName(names[1])
    qapp.setApplicationVersion(names[2])
    if gc.get_freeze_count() > frozen:
        gc.unfreeze()
    revive_event_loops()


@pytest.fixture
def bridge(qapp):
    """A started :class:`gui.bridge.AsyncBridge`, closed (and its thread joined) afterwards."""
    from gui.bridge import AsyncBridge

    b = AsyncBridge()
    yield b
    b.close()


@pytest.fixture(scope="module")
def llama_server(engine, demo_model, tmp_path_factory):
    """A real llama-server on loopback serving the demo model; yields its base URL."""
    with llama_server_process(engine, demo_model, tmp_path_factory.mktemp("llama-server"), ctx=2048,
                              extra_args=("-t", "1", "-np", "1")) as url:
        yield url


@pytest.fixture
def agents():
    """Two real demo agents (``demo-a``, ``demo-b``) on loopback, stopped afterwards."""
    from gui.cli.demo import DemoCluster

    cluster = DemoCluster(2)
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def make_window(qtbot, tmp_path, monkeypatch, engine):
    """``make_window(browse=True, **settings)``: the whole main window with its own config,
    cache and settings file, discovery on loopback only, liveness checks every 0.5 s; shown,
    started, and closed (bridge joined) after the test."""
    from conftest import free_port

    from gui.app import MainWindow
    from gui.bridge import AsyncBridge
    from gui.session import ClusterSession
    from gui.settings import Settings

    monkeypatch.setenv("HERD_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # measurements, compiled translations
    opened = []

    def make(browse: bool = True, **settings_values):
        settings = Settings(str(tmp_path / "herd.ini"))
        settings.set("server/port", free_port())
        for key, value in settings_values.items():
            settings.set(key, value)
        bridge = AsyncBridge()
        session = ClusterSession(bridge, interfaces=["127.0.0.1"], browse=browse, link_interval=0.5,
                                 status_interval=0.5)
        win = MainWindow(settings, bridge=bridge, session=session, engine=engine)
        qtbot.addWidget(win)
        win.show()
        win.start()
        opened.append((win, bridge))
        return win

    yield make
    for win, bridge in opened:
        win.close()
        bridge.close()


@pytest.fixture
def launch_on_both(qtbot):
    """``launch_on_both(win, agents, model) -> {name: node id}``: add both demo agents by
    address, pair them, open the model (context 512) and Start; asserts the cluster is ready."""
    from PySide6.QtCore import Qt

    def launch(win, agents, model) -> dict[str, str]:
        ours = {a.address for a in agents.agents}  # other agents may announce on loopback too
        for a in agents.agents:
            win.add_node(a.address)
        qtbot.waitUntil(lambda: sorted(n.name for n in win.node_map.values()
                                       if f"{n.host}:{n.api_port}" in ours) == ["demo-a", "demo-b"], timeout=20000)
        ids = {n.name: n.id for n in win.node_map.values() if f"{n.host}:{n.api_port}" in ours}
        for a in agents.agents:
            win.pair_node(ids[a.name], a.pin)
        qtbot.waitUntil(lambda: all(i in win.node_status for i in ids.values()), timeout=15000)
        assert win.open_model(str(model))
        qtbot.waitUntil(lambda: win.editor.plan() is not None and len(win.editor.plan().devices()) == 2,
                        timeout=10000)
        win.editor.ctx.setValue(512)
        qtbot.mouseClick(win.launch.start_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: win.launch.state in ("ready", "failed"), timeout=120000)
        assert win.launch.state == "ready", win.launch.status.text()
        return ids

    return launch
