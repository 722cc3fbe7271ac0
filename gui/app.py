"""The desktop app: window assembly and ``run_app``.

:class:`MainWindow` puts the views together — nodes on the left; the model, then tabs for the
split editor, the launch panel, and chat beside the dashboard — and hands each of its jobs the
views it drives: the menus (:mod:`gui.window_menus`), the nodes (:mod:`gui.node_actions`), the
model (:mod:`gui.model_actions`), the local demo (:mod:`gui.local_demo`), profiles
(:mod:`gui.profile_actions`) and the launch (:mod:`gui.launch_flow`). They send the views'
intentions to the :class:`gui.session.ClusterSession`, which runs the core off the GUI thread
through the one :class:`gui.bridge.AsyncBridge`. Nothing in here opens a socket or a process itself.
"""

from __future__ import annotations

import logging
import os
import platform
import socket
import sys
from pathlib import Path

import psutil
from PySide6.QtCore import QLocale, Qt, QTimer
from PySide6.QtGui import QIcon
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
from gui.bridge import AsyncBridge
from gui.cluster import workspace as W
from gui.cluster.chat import history as chat_history
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.planning.devices import host_free_bytes
from gui.launch_flow import LaunchFlow, LaunchViews
from gui.local_demo import LocalDemo
from gui.model_actions import ModelActions
from gui.node_actions import NodeActions
from gui.profile_actions import ProfileActions
from gui.session import ClusterSession
from gui.settings import Settings
from gui.speculation_actions import SpeculationActions
from gui.translations import install_translator
from gui.widgets.chat_pane import ChatPane
from gui.widgets.dashboard import Dashboard
from gui.widgets.failover_banner import FailoverBanner
from gui.widgets.launch_panel import LaunchPanel
from gui.widgets.model_panel import ModelPanel
from gui.widgets.next_step import NextStep
from gui.widgets.nodes_panel import NodesPanel
from gui.widgets.split_editor import SplitEditor
from gui.window_menus import WindowMenus

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
    """The one window of ``herd``: its assembly.

    The window is a view of a :class:`~gui.cluster.workspace.Workspace` (nodes, their status,
    the open model, the server options, the launch that runs): intentions from the widgets
    change the workspace or go to the session, and the widgets render what the workspace says.
    This class puts the views together (tabs, panels, status bar, the saved layout) and closes
    them; its jobs live in small classes it hands the views they drive (#33):
    :class:`~gui.window_menus.WindowMenus` (the menu bar and its dialogs),
    :class:`~gui.node_actions.NodeActions` (the nodes and the session),
    :class:`~gui.model_actions.ModelActions` (open, read, find a model),
    :class:`~gui.local_demo.LocalDemo`, :class:`~gui.profile_actions.ProfileActions` and
    :class:`~gui.launch_flow.LaunchFlow`.

    Attributes:
        bridge, session: the asyncio bridge and the cluster session the views talk through.
        workspace: the Qt-free state behind the window.
        nodes, model_panel, editor, launch, chat, dashboard, failover_banner, next_step: the views.
        tabs, splitter: the tabs (Split, Launch, Chat & dashboard) and the nodes | the rest split.
        settings: the typed :class:`gui.settings.Settings`.
        menus, node_actions, models, demo, profiles, launch_flow: the window's jobs (see above).
        background, tray: serving on with the window closed, and the tray icon (None without one).
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
                                                 port=self.settings.get("server/port"),
                                                 people=self.settings.get("server/people") or None))
        self._device_sig = None
        self._closing = False
        history_problem = self._build_views()
        # serving in the background: the close-window choice and the tray (#36)
        self.background = BackgroundServing(self, app_icon())
        self.tray = self.background.tray
        self._build_jobs()
        self.statusBar().showMessage(history_problem or self.tr("Looking for nodes…"))
        self._show_settings()
        self._connect_views()
        self._host_timer = QTimer(self)
        self._host_timer.setInterval(5000)
        self._host_timer.timeout.connect(self._show_host)
        self._host_timer.start()
        self._restore_layout()

    def _build_views(self) -> str | None:
        """The views, in their tabs and splitters; returns why the chat history cannot be kept, or None."""
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
        return history_problem

    def _build_jobs(self) -> None:
        """The window's jobs, each given the views it drives (#33)."""
        self.models = ModelActions(self, bridge=self.bridge, settings=self.settings, workspace=self.workspace,
                                   panel=self.model_panel)
        self.demo = LocalDemo(self, bridge=self.bridge, session=self.session, models=self.models, nodes=self.nodes,
                              editor=self.editor, show_editor=lambda: self.tabs.setCurrentWidget(self.editor))
        self.node_actions = NodeActions(self, session=self.session, workspace=self.workspace, settings=self.settings,
                                        nodes=self.nodes, launch=self.launch, dashboard=self.dashboard,
                                        editor=self.editor, banner=self.failover_banner,
                                        status_bar=self.statusBar(), demo=self.demo)
        #: File ▸ Export/Import cluster profile (gui.profile_actions)
        self.profiles = ProfileActions(self, workspace=self.workspace, engine=self.engine, bridge=self.bridge,
                                       models=self.models, editor=self.editor, nodes=self.nodes, tabs=self.tabs,
                                       status_bar=self.statusBar())
        #: Start, Stop, Relaunch and Fastest, and what the cluster says back (gui.launch_flow)
        self.launch_flow = LaunchFlow(LaunchViews(
            launch=self.launch, editor=self.editor, chat=self.chat, banner=self.failover_banner,
            dashboard=self.dashboard, model_panel=self.model_panel, next_step=self.next_step, tabs=self.tabs,
            status_bar=self.statusBar(), tray=self.tray), self.session, self.workspace, self.engine, self.settings, self)
        #: the Speculation choice and Fastest's trial of it (gui.speculation_actions, #35)
        self.speculation = SpeculationActions(self, bridge=self.bridge, settings=self.settings,
                                              workspace=self.workspace, session=self.session, editor=self.editor,
                                              status_bar=self.statusBar())
        self.models.modelUsed.connect(self.speculation.model_opened)
        self.models.localModelsFound.connect(self.speculation.local_models_found)
        self.profiles.speculation = self.launch_flow.speculation = self.speculation
        self.menus = WindowMenus(self, settings=self.settings, session=self.session, engine=self.engine,
                                 profiles=self.profiles, open_model=self.model_panel._open,
                                 quit_asking=self.quit_asking, add_background_menu=self.background.add_settings_menu)

    def _show_settings(self) -> None:
        """The stored settings and this PC, shown in the views as the window opens."""
        self.editor.set_engine(self.engine.llama_server)
        self._show_options()
        self.chat.apply_settings(self.settings.get("chat/system"), self.settings.get("chat/temperature"),
                                 self.settings.get("chat/max_tokens"))
        self.model_panel.set_recent(self.settings.get("model/recent"))
        # the splits made by hand for each model, back from the last run
        self.editor.split.load_remembered(self.settings.get("model/splits"))
        self._show_host()

    def _connect_views(self) -> None:
        """The launch flow's intentions and the session's reports about the launch; the workspace → the views."""
        flow = self.launch_flow
        self.launch.startRequested.connect(flow.start)
        self.launch.stopRequested.connect(flow.stop)
        self.editor.fastestRequested.connect(flow.find_fastest)
        self.editor.relaunchRequested.connect(flow.relaunch_with_shown_split)
        self.editor.planChanged.connect(lambda _p: flow.show_split_differs())
        self.editor.ctxChanged.connect(lambda v: self.workspace.set_options(ctx=v))
        self.models.modelUsed.connect(lambda _info: flow.update_fastest_button())
        self.launch.people.peopleChanged.connect(self._choose_people)
        self.workspace.subscribe(self._on_workspace)
        self.chat.set_send(None)
        self.menus.apply_failover_settings()
        self.session.serverState.connect(flow.on_server_state)
        self.session.serverLog.connect(self.launch.append_log)
        self.session.transferProgress.connect(self.launch.show_transfer)
        self.session.failover.connect(flow.on_failover)
        self.session.replyInterrupted.connect(self.chat.interrupt_reply)
        self.bridge.error.connect(self.show_background_error)

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

    def planned_devices(self) -> list:
        """Plan devices of the nodes a launch can use: reachable, paired, with a known status."""
        return self.workspace.planned_devices()

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
        self.launch.people.show_people(opts.people)

    def _choose_people(self, people) -> None:
        """The launch panel's *People at once* (#34); a ``-np`` among the server options says why not."""
        try:
            self.workspace.set_options(people=people)
        except ValueError as exc:
            self.launch.people.show_people(self.workspace.options.people)
            self.statusBar().showMessage(str(exc), 15000)

    def _update_devices(self, force: bool = False) -> None:
        devices = self.planned_devices()
        # Only the set of devices re-plans; free memory moves all the time and would wipe the
        # user's edits and undo history.
        sig = (id(self.model), tuple(d.key + "@" + (d.endpoint or "") for d in devices))
        if sig == self._device_sig and not force:
            return
        self._device_sig = sig
        self.editor.set_cluster(self.model, devices, host_free_bytes())
        self.demo.split_for_demo(self.model, devices, self.node_map.values())

    def _show_host(self) -> None:
        vm = psutil.virtual_memory()
        eng = (self.tr("llama.cpp build %1 (herd needs %2)").replace("%1", str(self.engine.build))
               .replace("%2", str(PINNED_BUILD)) if self.engine.complete
               else self.tr("llama.cpp engine missing: run herd engine install"))
        self.nodes.host_card.show_host(socket.gethostname(), platform.processor() or platform.machine(),
                                       psutil.cpu_count() or 0, vm.available, vm.total, eng)

    # ------------------------------------------------------------ for scripts and tests

    def open_model(self, path: str) -> bool:
        """Open the model at ``path`` now (:meth:`ModelActions.open_model <gui.model_actions.ModelActions.open_model>`)."""
        return self.models.open_model(path)

    def read_model(self, path: str):
        """Read the model at ``path`` in the background (:meth:`ModelActions.read_model <gui.model_actions.ModelActions.read_model>`)."""
        return self.models.read_model(path)

    def add_node(self, address: str) -> None:
        """Add a node by address (:meth:`NodeActions.add_node <gui.node_actions.NodeActions.add_node>`)."""
        self.node_actions.add_node(address)

    def pair_node(self, node_id: str, pin: str) -> None:
        """Pair with a node (:meth:`NodeActions.pair_node <gui.node_actions.NodeActions.pair_node>`)."""
        self.node_actions.pair_node(node_id, pin)

    def on_sample(self, sample) -> None:
        """Show a telemetry sample (:meth:`NodeActions.on_sample <gui.node_actions.NodeActions.on_sample>`)."""
        self.node_actions.on_sample(sample)

    # ------------------------------------------------------------ open / close

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
            self.models.read_model(last)
        self.model_panel.set_capacity(self.planned_devices(), host_free_bytes())
        self.models.find_local_models()

    def confirm_quit(self) -> bool:
        """While the cluster serves, ask before quitting stops it (#17); True: go ahead."""
        if not self.session.cluster_launch.is_running:
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

    def show_background_error(self, label: str, message: str) -> None:
        """Work done in the background failed: say what and why in the status bar."""
        self.statusBar().showMessage(f"{label}: {message}", 10000)

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
        self.models.stop()
        self._save_settings()
        self.chat.stop()
        if self.chat_store is not None:  # a reply arriving now is kept as far as it came, marked
            self.chat.history.let_go()
            self.chat_store.close()
        self._host_timer.stop()
        self.session.close()
        if self._own_bridge:
            self.bridge.close()
        self.demo.close()
        if self.tray is not None:
            self.tray.hide()
        super().closeEvent(event)

    def _save_settings(self) -> None:
        """The layout, the context, the hand-made splits and the chat settings, for the next start."""
        s = self.settings
        s.set("window/geometry", self.saveGeometry())
        s.set("window/splitter", self.splitter.saveState())
        s.set("window/tab", self.tabs.currentIndex())
        s.set("server/ctx", self.workspace.options.ctx)
        s.set("server/people", self.workspace.options.people or 0)
        s.set("model/splits", self.editor.split.remembered())
        chat = self.chat.chat_settings()
        s.set("chat/system", chat["system"])
        s.set("chat/temperature", chat["temperature"])
        s.set("chat/max_tokens", chat["max_tokens"])
        s.sync()


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
        win.demo.attach(demo, model, stop_on_close=False)  # `herd demo` stops its own agents after the app closes
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
