"""The main window's menu bar and what its actions open.

:class:`WindowMenus` builds *File* (open a model, export/import a cluster profile, quit),
*Cluster* (share on the LAN, what happens when a node is lost, closing the window while
serving) and *Help* (keyboard shortcuts, troubleshooting, about), and holds the actions so
tests and the window can reach them. It is given what the actions drive — the settings, the
session, the profile actions, the model panel — not the whole window (#33).
"""

from __future__ import annotations

import platform
from collections.abc import Callable

from PySide6 import __version__ as PYSIDE_VERSION
from PySide6.QtCore import QObject, qVersion
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QMessageBox

from agent.engine_lookup import PINNED_BUILD
from gui import __version__
from gui.settings import COUNTDOWN_CHOICES, OPTIONS, REJOIN_CHOICES


class WindowMenus(QObject):
    """The menu bar of one :class:`~gui.app.MainWindow` (see the module docstring).

    Attributes:
        window: the window the menus sit in (and the parent of the dialogs they open).
        settings, session, engine: the stored settings, the cluster session, the llama.cpp engine.
        export_action, import_action, quit_action: *File*'s actions.
        share_action, auto_recover_action: *Cluster ▸ Share…* and the automatic relaunch switch.
        countdown_actions: {seconds: action} of *Countdown before relaunching*.
        rejoin_actions: {"ask" or "auto": action} of *When a lost node returns*.
        shortcuts_action, troubleshooting_action: two of *Help*'s actions.
        share_dialog: the *Share…* dialog last opened, or None.
    """

    def __init__(self, window: QMainWindow, *, settings, session, engine, profiles, open_model: Callable[[], None],
                 quit_asking: Callable[[], None], add_background_menu: Callable[[QMenu], None]) -> None:
        """``open_model`` asks for a model file, ``quit_asking`` quits (asking while the cluster
        serves), ``add_background_menu`` adds the closing-while-serving choices to a menu."""
        super().__init__(window)
        self.window, self.settings, self.session, self.engine = window, settings, session, engine
        self.share_dialog = None
        self._build_file_menu(profiles, open_model, quit_asking)
        self._build_cluster_menu(add_background_menu)
        self._build_help_menu()

    def _build_file_menu(self, profiles, open_model, quit_asking) -> None:
        m = self.window.menuBar().addMenu(self.tr("&File"))
        a = QAction(self.tr("&Open model…"), self)
        a.setShortcut(QKeySequence.StandardKey.Open)
        a.triggered.connect(open_model)
        m.addAction(a)
        self.export_action = QAction(self.tr("&Export cluster profile…"), self)
        self.export_action.triggered.connect(lambda: profiles.export_dialog())
        m.addAction(self.export_action)
        self.import_action = QAction(self.tr("&Import cluster profile…"), self)
        self.import_action.triggered.connect(lambda: profiles.import_dialog())
        m.addAction(self.import_action)
        m.addSeparator()
        self.quit_action = QAction(self.tr("&Quit"), self)
        self.quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        self.quit_action.triggered.connect(quit_asking)
        m.addAction(self.quit_action)

    def _build_cluster_menu(self, add_background_menu) -> None:
        """Cluster ▸ Share, and what happens when a node is lost (stored settings, applied at once)."""
        c = self.window.menuBar().addMenu(self.tr("&Cluster"))
        self.share_action = c.addAction(self.tr("&Share…"), self.open_share_dialog)  # (#34)
        c.addSeparator()
        self.auto_recover_action = QAction(self.tr("&Relaunch automatically when a node is lost"), self)
        self.auto_recover_action.setCheckable(True)
        self.auto_recover_action.setChecked(self.settings.get("failover/auto_recover"))
        self.auto_recover_action.toggled.connect(lambda on: self._set_failover("failover/auto_recover", on))
        c.addAction(self.auto_recover_action)
        current = max(0, self.settings.get("failover/countdown"))
        titles = {secs: self.tr("At once") if secs == 0 else self.tr("%1 s").replace("%1", str(secs))
                  for secs in sorted(set(COUNTDOWN_CHOICES) | {current})}
        self.countdown_actions = self._choices(c.addMenu(self.tr("&Countdown before relaunching")),
                                               "failover/countdown", titles, current)
        titles = {"ask": self.tr("Ask before using it again"), "auto": self.tr("Use it again automatically")}
        self.rejoin_actions = self._choices(c.addMenu(self.tr("When a lost node &returns")), "failover/rejoin",
                                            {mode: titles[mode] for mode in REJOIN_CHOICES}, self._rejoin_setting())
        add_background_menu(c)  # closing the window while serving (#36)

    def _choices(self, menu: QMenu, key: str, titles: dict, current) -> dict:
        """One checkable action per value of the setting ``key`` in ``menu``, ``current``
        checked, the others exclusive; returns {value: action}."""
        group = QActionGroup(self)
        actions = {}
        for value, title in titles.items():
            a = QAction(title, self)
            a.setCheckable(True)
            a.setChecked(value == current)
            a.triggered.connect(lambda _on=False, v=value: self._set_failover(key, v))
            group.addAction(a)
            menu.addAction(a)
            actions[value] = a
        return actions

    def _build_help_menu(self) -> None:
        h = self.window.menuBar().addMenu(self.tr("&Help"))
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

    # ------------------------------------------------------------ failover settings

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

    # ------------------------------------------------------------ dialogs

    def open_share_dialog(self):
        """*Share…*: the Share on the LAN switch, what a phone app needs, and the keys (#34)."""
        from gui.widgets.share_dialog import ShareDialog

        self.share_dialog = ShareDialog(self.settings, self.session.sharing.keys, self.session.share_info,
                                        self.window)
        self.session.serverState.connect(self.share_dialog.follow_server)  # shared or not, as it changes
        self.share_dialog.show()
        return self.share_dialog

    def show_shortcuts(self) -> None:
        """Help → Keyboard shortcuts."""
        rows = [("Ctrl+O", self.tr("Open a model")),
                (self.tr("Left / Right"), self.tr("Move the focused handle of the layer bar one slot")),
                (self.tr("Up / Down"), self.tr("Focus the previous / next handle")),
                ("Ctrl+Z / Ctrl+Y", self.tr("Undo / redo a split edit")),
                ("Ctrl+Enter", self.tr("Send the chat message")),
                ("Ctrl+Q", self.tr("Quit (asks first while the cluster serves)"))]
        QMessageBox.information(self.window, self.tr("Keyboard shortcuts"), "<table>" + "".join(
            f"<tr><td><b>{k}</b>&nbsp;&nbsp;</td><td>{v}</td></tr>" for k, v in rows) + "</table>")

    def show_troubleshooting(self) -> None:
        """Help → Troubleshooting: where to look first."""
        QMessageBox.information(self.window, self.tr("Troubleshooting"), "<p>" + "</p><p>".join([
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
        QMessageBox.about(self.window, self.tr("About llama-herd"), "<h3>llama-herd %s</h3><p>%s</p><p>%s</p>" % (
            __version__,
            self.tr("Turn the PCs of your home network into one llama.cpp cluster."),
            "<br>".join([
                self.tr("llama.cpp build: %1 (pinned %2)").replace("%1", str(eng.build or "—")).replace("%2", str(PINNED_BUILD)),
                self.tr("Qt %1, PySide6 %2, Python %3").replace("%1", qVersion()).replace("%2", PYSIDE_VERSION)
                .replace("%3", platform.python_version()),
                self.tr("Platform: %1").replace("%1", platform.platform()),
            ])))
