"""The desktop app: window assembly and ``run_app``.

:class:`MainWindow` puts the views together — nodes on the left; the model, then tabs for the
split editor, the launch panel, and chat beside the dashboard — and wires the views' intentions
to the :class:`gui.session.ClusterSession`, which runs the core off the GUI thread through the
one :class:`gui.bridge.AsyncBridge`. Nothing in here opens a socket or a process itself.
"""

from __future__ import annotations

import logging
import os
import platform
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

import psutil
from PySide6 import __version__ as PYSIDE_VERSION
from PySide6.QtCore import QLocale, Qt, QTimer, qVersion
from PySide6.QtGui import QAction, QActionGroup, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from agent.engine_lookup import PINNED_BUILD, find_engine
from gui import __version__
from gui.background import BackgroundServing
from gui.bridge import AsyncBridge, describe_error
from gui.cluster import workspace as W
from gui.cluster.chat import history as chat_history
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.nodes.network_errors import explain
from gui.cluster.planning.devices import host_free_bytes
from gui.launch_flow import LaunchFlow, LaunchViews
from gui.profile_actions import ProfileActions
from gui.session import ClusterSession
from gui.settings import COUNTDOWN_CHOICES, OPTIONS, REJOIN_CHOICES, Settings
from gui.translations import install_translator
from gui.widgets.chat_pane import ChatPane
from gui.widgets.dashboard import Dashboard
from gui.widgets.failover_banner import FailoverBanner
from gui.widgets.launch_panel import LaunchPanel
from gui.widgets.model_panel import ModelPanel
from gui.widgets.next_step import NextStep
from gui.widgets.nodes_panel import NodesPanel
from gui.widgets.split_editor import SplitEditor

log = logging.getLogger(__name__)

RESOURCES = Path(__file__).resolve().parent.parent / "resources"
ICON_PATH = RESOURCES / "icons" / "herd.svg"
#: Comma-separated addresses of the interfaces to look for nodes on (default: all).
INTERFACES_ENV = "HERD_INTERFACES"
#: Room left above a first window for the title bar the window manager adds (not known before
#: the window is shown).
TITLE_BAR_ALLOWANCE = 40


def app_icon() -> QIcon:
    """The app's icon."""
    return QIcon(str(ICON_PATH)) if ICON_PATH.is_file() else QIcon()


class MainWindow(QMainWindow):
    """The one window of ``herd``.

    The window is a view of a :class:`~gui.cluster.workspace.Workspace` (nodes, their status,
    the open model, the server options, the launch that runs): intentions from the widgets
    change the workspace or go to the session, and the widgets render what the workspace says.

    Attributes:
        bridge, session: the asyncio bridge and the cluster session the views talk through.
        workspace: the Qt-free state behind the window.
        nodes, model_panel, editor, launch, chat, dashboard: the views.
        settings: the typed :class:`gui.settings.Settings`.
    """

    def __init__(self, settings: Settings | None = None, *, bridge: AsyncBridge | None = None,
                 session: ClusterSession | None = None, engine=None) -> None:
        super().__init__()
        self.setWindowTitle("llama-herd")
        self.setWindowIcon(app_icon())
        self.settings = settings or Settings()
        self.bridge = bridge or AsyncBridge()
        self._own_bridge = bridge is None
        self.session = session or ClusterSession(self.bridge)
        self.engine = engine if engine is not None else find_engine(probe=True)
        self.workspace = W.Workspace(ServerOptions(ctx=self.settings.get("server/ctx"),
                                                 host=self.settings.get("server/host"),
                                                 port=self.settings.get("server/port")))
        self._device_sig = None
        self._closing = False
        #: the newest model read asked for (:meth:`read_model`); an older one's result is dropped
        self._model_read = None
        #: the newest scan for the models on this PC (:meth:`find_local_models`)
        self._local_scan = None

        self.nodes = NodesPanel()
        self.model_panel = ModelPanel()
        self.editor = SplitEditor()
        self.launch = LaunchPanel()
        #: where every chat is kept (#36); None when it cannot be opened (the status bar says why)
        self.chat_store, history_problem = chat_history.open_default()
        self.chat = ChatPane(history=self.chat_store)
        self.dashboard = Dashboard()
        self.tabs = QTabWidget()
        self.tabs.addTab(self.editor, self.tr("Split"))
        self.tabs.addTab(self.launch, self.tr("Launch"))
        chat_split = QSplitter(Qt.Orientation.Horizontal)
        chat_split.addWidget(self.chat)
        chat_split.addWidget(self.dashboard)
        chat_split.setSizes([500, 500])
        self.tabs.addTab(chat_split, self.tr("Chat && dashboard"))
        # beside the tabs, what to do next; its link opens the tab where it is done (#37)
        self.next_step = NextStep()
        self.tabs.setCornerWidget(self.next_step, Qt.Corner.TopRightCorner)
        self.next_step.tabRequested.connect(
            lambda name: self.tabs.setCurrentIndex({"launch": 1, "chat": 2}.get(name, self.tabs.currentIndex())))
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.addWidget(self.model_panel)
        rl.addWidget(self.tabs, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.nodes)
        self.splitter.addWidget(right)
        self.splitter.setSizes([340, 860])
        # A lost worker: the banner says which and why and offers the choices (hidden otherwise).
        self.failover_banner = FailoverBanner()
        central = QWidget()
        cl = QVBoxLayout(central)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addWidget(self.failover_banner)
        cl.addWidget(self.splitter, 1)
        self.setCentralWidget(central)
        # serving in the background: the close-window choice and the tray (#36)
        self.background = BackgroundServing(self, app_icon())
        self.tray = self.background.tray
        self._build_menus()
        self.statusBar().showMessage(history_problem or self.tr("Looking for nodes…"))

        self.editor.set_engine(self.engine.llama_server)
        self._show_options()
        self.chat.apply_settings(self.settings.get("chat/system"), self.settings.get("chat/temperature"),
                                 self.settings.get("chat/max_tokens"))
        self.model_panel.set_recent(self.settings.get("model/recent"))
        # the splits made by hand for each model, back from the last run
        self.editor.split.load_remembered(self.settings.get("model/splits"))
        self._show_host()

        # intentions → session
        self.nodes.addRequested.connect(self.add_node)
        self.nodes.pairRequested.connect(self.pair_node)
        self.nodes.workerRequested.connect(self.set_worker)
        self.nodes.wakeRequested.connect(self.wake_node)
        self.nodes.demoRequested.connect(self.start_local_demo)
        self.model_panel.modelChosen.connect(self.read_model)
        self.model_panel.demoRequested.connect(self.make_demo_model)
        self.model_panel.hubRequested.connect(self.open_hub_dialog)
        #: File ▸ Export/Import cluster profile (gui.profile_actions)
        self.profiles = ProfileActions(self)
        #: Start, Stop, Relaunch and Fastest, and what the cluster says back (gui.launch_flow)
        self.launch_flow = flow = LaunchFlow(LaunchViews(
            launch=self.launch, editor=self.editor, chat=self.chat, banner=self.failover_banner,
            dashboard=self.dashboard, model_panel=self.model_panel, next_step=self.next_step, tabs=self.tabs,
            status_bar=self.statusBar(), tray=self.tray), self.session, self.workspace, self.engine, self.settings, self)
        self.launch.startRequested.connect(flow.start)
        self.launch.stopRequested.connect(flow.stop)
        self.editor.fastestRequested.connect(flow.find_fastest)
        self.editor.relaunchRequested.connect(flow.relaunch_with_shown_split)
        self.editor.planChanged.connect(lambda _p: flow.show_split_differs())
        self.editor.ctxChanged.connect(lambda v: self.workspace.set_options(ctx=v))
        self.workspace.subscribe(self._on_workspace)
        self.failover_banner.cancelRequested.connect(self.session.cancel_failover)
        self.failover_banner.optionChosen.connect(self.choose_failover)
        self.chat.set_send(None)
        self.apply_failover_settings()
        # session → views
        self.session.nodeEvent.connect(self.on_node_event)
        self.session.sample.connect(self.on_sample)
        self.session.serverState.connect(flow.on_server_state)
        self.session.serverLog.connect(self.launch.append_log)
        self.session.transferProgress.connect(self.launch.show_transfer)
        self.session.failover.connect(flow.on_failover)
        self.session.replyInterrupted.connect(self.chat.interrupt_reply)
        self.bridge.error.connect(lambda label, msg: self.statusBar().showMessage(f"{label}: {msg}", 10000))
        self._host_timer = QTimer(self)
        self._host_timer.setInterval(5000)
        self._host_timer.timeout.connect(self._show_host)
        self._host_timer.start()
        self._demo = None
        #: the demo agents' addresses until they hold the demo's layers (see _split_for_demo)
        self._demo_addresses: set[str] = set()
        self._restore_layout()

    # ------------------------------------------------------------ the workspace

    @property
    def model(self):
        """The open :class:`~gui.cluster.llama.model.ModelInfo`, or None (the workspace's)."""
        return self.workspace.model

    @property
    def node_map(self) -> dict:
        """{node id: node} as discovery reports them (the workspace's)."""
        return self.workspace.nodes

    @property
    def node_status(self) -> dict:
        """{node id: its agent's last status} (the workspace's)."""
        return self.workspace.statuses

    def _on_workspace(self, event: str) -> None:
        if event == W.OPTIONS:
            self._show_options()
        elif event in (W.NODES, W.STATUS, W.MODEL):
            self._update_devices(force=event == W.MODEL)
            # nodes come and go, their free memory moves: whether each local model fits follows
            self.model_panel.set_capacity(self.planned_devices(), host_free_bytes())

    def _show_options(self) -> None:
        opts = self.workspace.options
        self.editor.set_ctx(opts.ctx)
        self.editor.set_options(opts)

    # ------------------------------------------------------------ setup

    def _build_menus(self) -> None:
        m = self.menuBar().addMenu(self.tr("&File"))
        a = QAction(self.tr("&Open model…"), self)
        a.setShortcut(QKeySequence.StandardKey.Open)
        a.triggered.connect(self.model_panel._open)
        m.addAction(a)
        self.export_action = QAction(self.tr("&Export cluster profile…"), self)
        self.export_action.triggered.connect(lambda: self.profiles.export_dialog())
        m.addAction(self.export_action)
        self.import_action = QAction(self.tr("&Import cluster profile…"), self)
        self.import_action.triggered.connect(lambda: self.profiles.import_dialog())
        m.addAction(self.import_action)
        m.addSeparator()
        q = QAction(self.tr("&Quit"), self)
        q.setShortcut(QKeySequence.StandardKey.Quit)
        q.triggered.connect(self.quit_asking)
        m.addAction(q)
        self.quit_action = q
        self._build_failover_menu()
        h = self.menuBar().addMenu(self.tr("&Help"))
        # more than About (#17): the keys, and where to look when something does not work
        self.shortcuts_action = QAction(self.tr("&Keyboard shortcuts"), self)
        self.shortcuts_action.triggered.connect(self.show_shortcuts)
        h.addAction(self.shortcuts_action)
        self.troubleshooting_action = QAction(self.tr("&Troubleshooting"), self)
        self.troubleshooting_action.triggered.connect(self.show_troubleshooting)
        h.addAction(self.troubleshooting_action)
        h.addSeparator()
        about = QAction(self.tr("&About llama-herd"), self)
        about.triggered.connect(self.show_about)
        h.addAction(about)

    def _build_failover_menu(self) -> None:
        """Cluster ▸ what happens when a node is lost (stored settings, applied at once)."""
        c = self.menuBar().addMenu(self.tr("&Cluster"))
        self.share_action = c.addAction(self.tr("&Share…"), self.open_share_dialog)  # (#34)
        c.addSeparator()
        self.auto_recover_action = QAction(self.tr("&Relaunch automatically when a node is lost"), self)
        self.auto_recover_action.setCheckable(True)
        self.auto_recover_action.setChecked(self.settings.get("failover/auto_recover"))
        self.auto_recover_action.toggled.connect(lambda on: self._set_failover("failover/auto_recover", on))
        c.addAction(self.auto_recover_action)
        countdown = c.addMenu(self.tr("&Countdown before relaunching"))
        group = QActionGroup(self)
        self.countdown_actions: dict[int, QAction] = {}
        current = max(0, self.settings.get("failover/countdown"))
        for secs in sorted(set(COUNTDOWN_CHOICES) | {current}):
            a = QAction(self.tr("At once") if secs == 0 else self.tr("%1 s").replace("%1", str(secs)), self)
            a.setCheckable(True)
            a.setChecked(secs == current)
            a.triggered.connect(lambda _on=False, s=secs: self._set_failover("failover/countdown", s))
            group.addAction(a)
            countdown.addAction(a)
            self.countdown_actions[secs] = a
        rejoin = c.addMenu(self.tr("When a lost node &returns"))
        group = QActionGroup(self)
        self.rejoin_actions: dict[str, QAction] = {}
        titles = {"ask": self.tr("Ask before using it again"), "auto": self.tr("Use it again automatically")}
        for mode in REJOIN_CHOICES:
            a = QAction(titles[mode], self)
            a.setCheckable(True)
            a.setChecked(mode == self._rejoin_setting())
            a.triggered.connect(lambda _on=False, m=mode: self._set_failover("failover/rejoin", m))
            group.addAction(a)
            rejoin.addAction(a)
            self.rejoin_actions[mode] = a
        self.background.add_settings_menu(c)  # closing the window while serving (#36)

    def _set_failover(self, key: str, value) -> None:
        self.settings.set(key, value)
        self.apply_failover_settings()

    def apply_failover_settings(self) -> None:
        """Hand the stored failover settings to the session (and the launch running now)."""
        s = self.settings
        self.session.set_failover_policy(auto_recover=s.get("failover/auto_recover"),
                                         countdown=max(0, s.get("failover/countdown")),
                                         rejoin=self._rejoin_setting())

    def _rejoin_setting(self) -> str:
        # a stored value that is not one of the choices (hand-edited file) means the default
        value = self.settings.get("failover/rejoin")
        return value if value in REJOIN_CHOICES else OPTIONS["failover/rejoin"].default

    def choose_failover(self, option: str) -> None:
        """A banner button: relaunch now, keep waiting, more layers here, or use a node again."""
        call = self.session.choose_failover(option)
        call.failed.connect(lambda exc: (self.failover_banner.choice_failed(),
                                         self.statusBar().showMessage(str(exc), 15000)))

    def _restore_layout(self) -> None:
        geo = self.settings.get("window/geometry")
        if not geo.isEmpty():
            self.restoreGeometry(geo)  # (Qt puts a saved window back on the screen it fits)
        else:
            fit_first_window(self)
        split = self.settings.get("window/splitter")
        if not split.isEmpty():
            self.splitter.restoreState(split)
        self.tabs.setCurrentIndex(self.settings.get("window/tab"))

    def start(self, addresses: list[str] | None = None) -> None:
        """Start discovery (and add remembered or given node addresses); open the last model."""
        addrs = list(dict.fromkeys(self.settings.get("nodes/addresses") + list(addresses or [])))
        call = self.session.start(addrs)
        call.finished.connect(lambda missing: missing and self.nodes.show_message(
            self.tr("Remembered nodes that did not answer: %1").replace("%1", "; ".join(missing))))
        last = self.settings.get("model/last")
        if last and Path(last).is_file() and self.model is None:
            self.read_model(last)
        self.model_panel.set_capacity(self.planned_devices(), host_free_bytes())
        self.find_local_models()

    # ------------------------------------------------------------ nodes

    def _show_host(self) -> None:
        vm = psutil.virtual_memory()
        eng = (self.tr("llama.cpp build %1 (herd needs %2)").replace("%1", str(self.engine.build))
               .replace("%2", str(PINNED_BUILD)) if self.engine.complete
               else self.tr("llama.cpp engine missing: run herd engine install"))
        self.nodes.host_card.show_host(socket.gethostname(), platform.processor() or platform.machine(),
                                       psutil.cpu_count() or 0, vm.available, vm.total, eng)

    def on_node_event(self, kind: str, node) -> None:
        """A node appeared, changed or left."""
        self.nodes.on_node_event(kind, node)
        if self.workspace.node_event(kind, node):
            self.statusBar().showMessage(self.tr("Lost contact with %1.").replace("%1", node.name), 10000)
            # (asked of the launch that runs, not of the split being edited)
            if self.workspace.running_uses(node):
                self.launch.set_status(self.tr("%1 stopped answering; the running model may fail.")
                                       .replace("%1", node.name), "#d62728")
        n = len(self.node_map)
        self.statusBar().showMessage(self.tr("%1 node(s) found.").replace("%1", str(n)))
        # "Try a local demo" is for a first start with nobody around
        self.nodes.demo_button.setVisible(n == 0 and self._demo is None)
        # the same nodes to every view, so each picks the same colour for a node
        names = {nid: nd.name for nid, nd in self.node_map.items()}
        self.dashboard.set_node_names(names)
        self.editor.set_node_names(names)

    def on_sample(self, sample) -> None:
        """A telemetry sample: cards, dashboard, and device memory for the planner."""
        self.nodes.on_sample(sample)
        self.dashboard.add_sample(sample)
        if sample.kind == "node" and isinstance(sample.values.get("status"), Mapping):
            self.workspace.set_status(sample.source, sample.values["status"])

    def planned_devices(self) -> list:
        """Plan devices of the nodes a launch can use: reachable, paired, with a known status."""
        return self.workspace.planned_devices()

    def _update_devices(self, force: bool = False) -> None:
        devices = self.planned_devices()
        # Only the set of devices re-plans; free memory moves all the time and would wipe the
        # user's edits and undo history.
        sig = (id(self.model), tuple(d.key + "@" + (d.endpoint or "") for d in devices))
        if sig == self._device_sig and not force:
            return
        self._device_sig = sig
        self.editor.set_cluster(self.model, devices, host_free_bytes())
        self._split_for_demo(devices)

    def _split_for_demo(self, devices: list) -> None:
        """Once the demo's agents are paired and known, give them all the layers: the demo shows
        a cluster at work, and its workers run on this computer anyway (the host would only add
        a third share of the same RAM)."""
        wanted = self._demo_addresses
        if not wanted or self.model is None:
            return
        ours = {n.id for n in self.node_map.values() if f"{n.host}:{n.api_port}" in wanted}
        mine = [d for d in devices if d.node_id in ours]
        if len(ours) < len(wanted) or {d.node_id for d in mine} != ours:
            return
        from gui.cluster.planning.plan import PlanError, plan_from_split
        n = self.model.n_slots
        counts = [n // len(mine) + (1 if i < n % len(mine) else 0) for i in range(len(mine))]
        try:
            plan = plan_from_split(self.model, devices, {"host": 0, **{d.key: c for d, c in zip(mine, counts)}})
        except PlanError as exc:
            log.warning("demo split: %s", exc)
            return
        self._demo_addresses = set()
        self.editor.apply_plan(plan)

    def add_node(self, address: str) -> None:
        """Add a node by address (remembered when it answers)."""
        from gui.cluster.nodes.discovery import parse_address

        try:
            parse_address(address)
        except ValueError as exc:
            self.nodes.show_message(str(exc))
            return
        # a sign of life at once: an address that does not answer takes seconds to time out (#37)
        self.nodes.show_message(self.tr("Connecting to %1…").replace("%1", address), error=False)
        call = self.session.add_address(address)
        call.finished.connect(lambda node: (self.settings.add_recent("nodes/addresses", address, 50),
                                            self.nodes.show_message(
                                                self.tr("Added %1.").replace("%1", node.name) if node else "",
                                                error=False)))
        call.failed.connect(lambda exc: self.nodes.show_message(
            self.tr("Could not add %1: %2").replace("%1", address).replace("%2", explain(exc))))

    def pair_node(self, node_id: str, pin: str) -> None:
        """Pair with a node using its PIN."""
        name = self.node_map[node_id].name if node_id in self.node_map else node_id
        call = self.session.pair(node_id, pin)
        # a success replaces whatever error was shown before, and says so
        call.finished.connect(lambda _t: self.nodes.show_message(
            self.tr("Paired with %1.").replace("%1", name), error=False))
        call.failed.connect(lambda exc: self.nodes.show_message(
            self.tr("Pairing with %1 failed: %2").replace("%1", name).replace("%2", explain(exc))))

    def set_worker(self, node_id: str, running: bool) -> None:
        """Start or stop a node's RPC worker."""
        call = self.session.set_worker(node_id, running)
        call.finished.connect(lambda _r: self.nodes.show_message(""))
        call.failed.connect(lambda exc: self.nodes.show_message(explain(exc)))

    def wake_node(self, node_id: str) -> None:
        """Send a sleeping node its Wake-on-LAN packet and say so under the cards (#36)."""
        name = self.nodes.cards[node_id].name if node_id in self.nodes.cards else node_id
        call = self.session.wake(node_id)
        call.finished.connect(lambda target: self.nodes.show_message(
            self.tr("Sent %1 a Wake-on-LAN packet (%2); its card turns back on when it answers.")
            .replace("%1", name).replace("%2", target.mac), error=False))
        call.failed.connect(lambda exc: self.nodes.show_message(
            self.tr("Could not wake %1: %2").replace("%1", name).replace("%2", explain(exc))))

    # ------------------------------------------------------------ model

    def open_model(self, path: str) -> bool:
        """Inspect ``path`` on the calling thread and use it; on error say why and keep the
        previous model. For scripts and tests that want the model open when this returns: what
        the user does goes through :meth:`read_model`, which keeps the window responsive."""
        from gui.cluster.llama.model import ModelError, inspect_model

        self._model_read = None  # this one is newer than any read still running
        try:
            info = inspect_model(path)
        except (ModelError, OSError) as exc:
            self.model_panel.show_error(path, str(exc))
            return False
        self.use_model(info)
        return True

    def read_model(self, path: str):
        """Inspect ``path`` off the GUI thread, then use it; returns the bridge call.

        Parsing a GGUF's header takes seconds for a vocabulary of a quarter million tokens, so
        it runs in a thread of its own (the window keeps painting, the sparklines keep moving)
        while the model panel names the file; closing the window abandons it. The latest file chosen wins: a read
        that ends after a newer one was asked for is dropped, whichever finishes first. On
        error the panel says why and the previous model stays."""
        from gui.bridge import in_background_thread
        from gui.cluster.llama.model import inspect_model

        async def read():
            # a thread nothing waits for: closing the window mid-read does not wait for the read
            return await in_background_thread(inspect_model, path, name="herd-read-model")

        log.info("reading the model %s", path)
        self.model_panel.show_reading(path)
        call = self.bridge.submit(read(), "read model")
        self._model_read = call
        call.finished.connect(lambda info: call is self._model_read and self.use_model(info))
        call.failed.connect(lambda exc: call is self._model_read
                            and self.model_panel.show_error(path, describe_error(exc)))
        return call

    def find_local_models(self):
        """List the models already on this PC in the model panel; the folders are scanned off
        the GUI thread (a large cache takes a while). Returns the bridge call, or None while
        the window closes."""
        import asyncio

        from gui.cluster.models.local import find_local_models

        if self._closing:
            return None
        herd_dir = self.settings.get("hub/models_dir") or None
        recent = list(self.settings.get("model/recent"))

        async def scan():
            return await asyncio.to_thread(find_local_models, herd_dir, recent)

        call = self.bridge.submit(scan(), "find models on this PC")
        self._local_scan = call
        call.finished.connect(lambda models: call is self._local_scan and self.model_panel.set_local_models(models))
        return call

    def use_model(self, info) -> None:
        """Make ``info`` (a read :class:`~gui.cluster.llama.model.ModelInfo`) the open model:
        show it, remember it, plan for it."""
        self.model_panel.show_model(info)
        self.settings.set("model/last", str(info.path))
        self.model_panel.set_recent(self.settings.add_recent("model/recent", str(info.path)))
        self.find_local_models()  # (the recent files changed; a new download may be there)
        self.workspace.open_model(info)  # (lowers a context beyond the model's own; re-plans)
        self.launch_flow.update_fastest_button()

    def open_share_dialog(self):
        """*Share…*: the Share on the LAN switch, what a phone app needs, and the keys (#34)."""
        from gui.widgets.share_dialog import ShareDialog

        self.share_dialog = ShareDialog(self.settings, self.session.sharing.keys, self.session.share_info, self)
        self.session.serverState.connect(self.share_dialog.follow_server)  # shared or not, as it changes
        self.share_dialog.show()
        return self.share_dialog

    def open_hub_dialog(self):
        """*Get model…*: a model from a hub that fits the cluster, opened when downloaded (#14)."""
        from gui.hub_session import open_hub_dialog

        self.hub_dialog = open_hub_dialog(self, self.bridge, self.settings, self.planned_devices,
                                          self.workspace.options.ctx, self.read_model)
        return self.hub_dialog

    def make_demo_model(self) -> None:
        """Write the demo model off the GUI thread, then open it."""
        from gui.cluster.demo_cluster import ensure_demo_model

        async def make():
            import asyncio
            return await asyncio.to_thread(ensure_demo_model)

        self.model_panel.info.setText(self.tr("Making the demo model…"))
        call = self.bridge.submit(make(), "demo model")
        call.finished.connect(lambda p: self.read_model(str(p)))
        call.failed.connect(lambda exc: self.model_panel.show_error("demo model", str(exc)))

    # ------------------------------------------------------------ demo

    def start_local_demo(self) -> None:
        """"Try a local demo": two agents on loopback, paired, and the demo model."""
        from gui.cluster.demo_cluster import DemoCluster, ensure_demo_model

        if self._demo is not None:
            return
        self.nodes.show_message(self.tr("Starting two local workers…"))

        async def go():
            import asyncio
            cluster = DemoCluster(2)
            await asyncio.to_thread(cluster.start)
            path = await asyncio.to_thread(ensure_demo_model)
            return cluster, path

        call = self.bridge.submit(go(), "local demo")
        call.finished.connect(lambda r: self.attach_demo(*r))
        call.failed.connect(lambda exc: self.nodes.show_message(
            self.tr("The local demo could not start: %1").replace("%1", str(exc))))

    def attach_demo(self, cluster, model_path) -> None:
        """Add and pair the demo's agents, open the demo model (ready to press Start)."""
        self._demo = cluster
        self._demo_addresses = {a.address for a in cluster.agents}
        self.nodes.show_message("")
        for a in cluster.agents:
            call = self.session.add_address(a.address)
            # (the window may have been closed meanwhile: then there is nobody to pair for)
            call.finished.connect(lambda node, pin=a.pin: node and not self._closing
                                  and self.session.pair(node.id, pin))
        self.read_model(str(model_path))
        self.tabs.setCurrentWidget(self.editor)

    # ------------------------------------------------------------ about / close

    def show_shortcuts(self) -> None:
        """Help → Keyboard shortcuts."""
        rows = [("Ctrl+O", self.tr("Open a model")),
                (self.tr("Left / Right"), self.tr("Move the focused handle of the layer bar one slot")),
                (self.tr("Up / Down"), self.tr("Focus the previous / next handle")),
                ("Ctrl+Z / Ctrl+Y", self.tr("Undo / redo a split edit")),
                ("Ctrl+Enter", self.tr("Send the chat message")),
                ("Ctrl+Q", self.tr("Quit (asks first while the cluster serves)"))]
        QMessageBox.information(self, self.tr("Keyboard shortcuts"), "<table>" + "".join(
            f"<tr><td><b>{k}</b>&nbsp;&nbsp;</td><td>{v}</td></tr>" for k, v in rows) + "</table>")

    def show_troubleshooting(self) -> None:
        """Help → Troubleshooting: where to look first."""
        QMessageBox.information(self, self.tr("Troubleshooting"), "<p>" + "</p><p>".join([
            self.tr("<b>A node does not appear:</b> check that herd-agent runs on it (herd-agent pin shows its "
                    "PIN); where the network blocks discovery, use Add by address… with its IP address."),
            self.tr("<b>Start refuses or fails:</b> the Launch tab lists the checks; in a terminal, herd doctor "
                    "runs the same checks and herd engine status shows which llama.cpp build is used."),
            self.tr("<b>The model does not fit:</b> lower the context on the Split tab, or give layers to the "
                    "devices with memory to spare."),
            self.tr("<b>Slow replies:</b> Fastest measures the nodes and picks the quickest split; a node on "
                    "Wi-Fi is marked on its card."),
        ]) + "</p>")

    def show_about(self) -> None:
        """Help → About, with versions."""
        eng = self.engine
        QMessageBox.about(self, self.tr("About llama-herd"), "<h3>llama-herd %s</h3><p>%s</p><p>%s</p>" % (
            __version__,
            self.tr("Turn the PCs of your home network into one llama.cpp cluster."),
            "<br>".join([
                self.tr("llama.cpp build: %1 (pinned %2)").replace("%1", str(eng.build or "—")).replace("%2", str(PINNED_BUILD)),
                self.tr("Qt %1, PySide6 %2, Python %3").replace("%1", qVersion()).replace("%2", PYSIDE_VERSION)
                .replace("%3", platform.python_version()),
                self.tr("Platform: %1").replace("%1", platform.platform()),
            ])))

    def confirm_quit(self) -> bool:
        """While the cluster serves, ask before quitting stops it (#17); True: go ahead."""
        if self.session.supervisor is None:
            return True
        box = QMessageBox(QMessageBox.Icon.Question, self.tr("Quit llama-herd"),
                          self.tr("The cluster is serving. Quitting stops llama-server and the workers herd "
                                  "started, and ends the chat."), parent=self)
        quit_button = box.addButton(self.tr("Stop and quit"), QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(quit_button)
        box.exec()
        return box.clickedButton() is quit_button

    def quit_asking(self) -> None:
        """File → Quit: ask first while serving, then close."""
        if self.confirm_quit():
            self._confirmed = True
            self.close()

    def bring_to_front(self) -> None:
        """Show the window on top, restored if minimised (a second herd asked for it)."""
        self.setWindowState(self.windowState() & ~Qt.WindowState.WindowMinimized)
        self.show()
        self.raise_()
        self.activateWindow()

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt override
        if self._closing:
            return super().closeEvent(event)
        # The window's close button asks too; a close from code (Ctrl-C, --quit-after, tests)
        # does not: nobody is there to answer.
        # (#36) while serving: keep serving in the background, stop and quit, or cancel
        if event.spontaneous() and not getattr(self, "_confirmed", False) and self.background.on_window_close(event):
            return
        self._closing = True
        s = self.settings
        s.set("window/geometry", self.saveGeometry())
        s.set("window/splitter", self.splitter.saveState())
        s.set("window/tab", self.tabs.currentIndex())
        s.set("server/ctx", self.workspace.options.ctx)
        s.set("model/splits", self.editor.split.remembered())
        chat = self.chat.chat_settings()
        s.set("chat/system", chat["system"])
        s.set("chat/temperature", chat["temperature"])
        s.set("chat/max_tokens", chat["max_tokens"])
        s.sync()
        self.chat.stop()
        if self.chat_store is not None:  # a reply arriving now is kept as far as it came, marked
            self.chat.history.let_go()
            self.chat_store.close()
        self._host_timer.stop()
        self.session.close()
        if self._own_bridge:
            self.bridge.close()
        if self._demo is not None:
            self._demo.stop()
            self._demo = None
        if self.tray is not None:
            self.tray.hide()
        super().closeEvent(event)


def fit_first_window(win: QMainWindow) -> None:
    """A first start: 1280×820 where the screen has room, else as large as its free area less
    the title bar the window manager adds, centred. On a 1366×768 laptop the fixed size put the
    bottom of the window, the command line on the Split tab, off the screen (#37)."""
    screen = win.screen() or QApplication.primaryScreen()
    if screen is None:
        win.resize(1280, 820)
        return
    free = screen.availableGeometry()
    width, height = min(1280, free.width() - 16), min(820, free.height() - TITLE_BAR_ALLOWANCE)
    win.resize(width, height)
    win.move(free.x() + (free.width() - width) // 2,
             free.y() + max(0, (free.height() - height - TITLE_BAR_ALLOWANCE) // 2))


def freeze_startup_objects() -> None:
    """Move everything allocated so far (Qt bindings, pyqtgraph, numpy…) out of the cyclic GC.

    A full collection otherwise walks all of them and holds the GIL for tens of milliseconds,
    a stall the user sees while a reply streams (measured with bench/gui_bench.py).
    """
    import gc

    gc.collect()
    gc.freeze()


def run_app(args, demo=None, model: Path | None = None) -> int:
    """Open the app (``herd`` without a command, or ``herd demo``); returns the exit code."""
    logging.basicConfig(level=logging.INFO if os.environ.get("HERD_DEBUG") else logging.WARNING)
    if QApplication.instance() is None:
        # Qt aborts when its X11 plugin cannot load, naming the wrong library: say which first
        from gui.qt_libraries import platform_problem

        problem = platform_problem()
        if problem:
            print(problem, file=sys.stderr)
            return 2
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("llama-herd")
    app.setOrganizationName("llama-herd")
    app.setApplicationVersion(__version__)
    app.setWindowIcon(app_icon())
    # Fusion follows the system's light/dark colour scheme on every platform (Qt ≥ 6.5).
    app.setStyle("Fusion")
    # one window per user: a second herd shows the first and leaves (gui/single_instance.py)
    from gui.single_instance import claim

    instance = claim()
    if instance is None:
        print("herd is already open; its window is brought to the front.", file=sys.stderr)
        return 0
    settings = Settings()
    lang = getattr(args, "lang", None) or settings.get("ui/language") or QLocale.system().name()
    install_translator(app, lang)
    session_kw = {}
    if getattr(args, "mdns_interfaces", None):
        session_kw = {"interfaces": list(args.mdns_interfaces)}
    elif os.environ.get(INTERFACES_ENV):
        # e.g. HERD_INTERFACES=192.168.1.5 to browse one network only
        session_kw = {"interfaces": [a.strip() for a in os.environ[INTERFACES_ENV].split(",") if a.strip()]}
    if demo is not None:
        # The demo's agents announce on loopback only; browse there too.
        session_kw = {"interfaces": ["127.0.0.1"]}
    bridge = AsyncBridge()
    session = ClusterSession(bridge, **session_kw)
    win = MainWindow(settings, bridge=bridge, session=session)
    win._own_bridge = True
    # before start(): it begins reading the last model, and a close asked for from then on must
    # find the handler (SIGTERM's default would end the process at once, unclean)
    _quit_on_signals(app, win)
    instance.activated.connect(win.bring_to_front)
    win.show()
    win.start()
    if demo is not None:
        win.attach_demo(demo, model)
        win._demo = None  # `herd demo` stops its own agents after the app closes
    if getattr(args, "quit_after", None):
        # `herd --quit-after 5`: the packaged-app smoke test opens the window and closes it the
        # way a user does, so start-up and shutdown (discovery, bridge thread) are both exercised.
        def close() -> None:
            if getattr(args, "dump_texts", None):  # what the installed-app test reads (#37)
                from gui.visible_texts import write_visible_texts

                write_visible_texts(win, args.dump_texts)
            win.close()
            app.quit()

        QTimer.singleShot(int(args.quit_after * 1000), close)
    freeze_startup_objects()
    try:
        return app.exec()
    finally:
        instance.close()
        instance.deleteLater()


def _quit_on_signals(app: QApplication, win: MainWindow) -> None:
    """Ctrl-C or SIGTERM close the window properly (stopping llama-server and workers).

    Python only runs signal handlers between bytecodes, and Qt's loop runs none while idle, so a
    cheap timer gives the interpreter a chance every 200 ms.
    """
    import signal

    def close(*_args) -> None:
        win.close()
        # posted, not called: a signal that comes before the main loop runs (the window reads
        # the last model as it opens) would otherwise be lost, and the app run on, windowless
        QTimer.singleShot(0, app.quit)

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, close)
        except (ValueError, OSError):  # not the main thread, or not supported here
            pass
    tick = QTimer(win)  # the window's: it goes with the window, not on for the process
    tick.timeout.connect(lambda: None)
    tick.start(200)
