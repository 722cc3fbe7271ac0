"""Start, Stop, Relaunch and Fastest in the window, and what the cluster says back.

:class:`LaunchFlow` connects the views that take part in a launch — the split editor, the
launch panel, the chat pane, the failover banner, the dashboard — with the
:class:`~gui.cluster.workspace.Workspace` and the :class:`~gui.session.ClusterSession`. A click on
Start makes a :class:`~gui.cluster.launching.request.LaunchRequest` from the workspace at that moment,
checks it at once (:func:`~gui.cluster.launching.request.check_request`), runs the doctor
(:meth:`~gui.session.ClusterSession.preflight`) and launches that same request; the session's
signals then drive the views. The window builds it and wires the views' intentions to it.

The launch's state is the core's (:class:`~gui.cluster.cluster_launch.ClusterLaunch`,
relayed by the session as ``serverState``); the checks' findings are read by
:func:`~gui.cluster.launching.preflight_reading.read_findings`, as ``herd up`` reads them (#33).
It is given the views it drives (:class:`LaunchViews`), not the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, QTimer

from gui.cluster import workspace as W
from gui.cluster.launching.preflight_reading import Refusal
from gui.cluster.launching.state import FAILED, READY, RELAUNCHING, STARTING_UP, STOPPED, LaunchState
from gui.cluster.failover.text import describe_event
from gui.cluster.launching.login_service import owner_of_port
from gui.cluster.planning.devices import host_free_bytes
from gui.widgets import next_step as S


@dataclass(frozen=True)
class LaunchViews:
    """The views a launch drives (#33: :class:`LaunchFlow` gets these, not the window).

    Attributes:
        launch: the :class:`~gui.widgets.launch_panel.LaunchPanel`.
        editor: the :class:`~gui.widgets.split_editor.SplitEditor`.
        chat: the :class:`~gui.widgets.chat_pane.ChatPane`.
        banner: the :class:`~gui.widgets.failover_banner.FailoverBanner`.
        dashboard: the :class:`~gui.widgets.dashboard.Dashboard`.
        model_panel: the :class:`~gui.widgets.model_panel.ModelPanel` (is a model being read?).
        next_step: the :class:`~gui.widgets.next_step.NextStep` line beside the tabs.
        tabs: the window's ``QTabWidget`` (a launch brings its panel to the front).
        status_bar: the window's ``QStatusBar`` (what the failover supervisor says).
        tray: the tray icon, or None without one.
    """

    launch: Any
    editor: Any
    chat: Any
    banner: Any
    dashboard: Any
    model_panel: Any
    next_step: Any
    tabs: Any
    status_bar: Any
    tray: Any = None


class LaunchFlow(QObject):
    """The launch-related half of the main window (see the module docstring).

    Attributes:
        views: the :class:`LaunchViews` it drives.
        session, workspace, engine, settings: what a launch uses.
        editor, launch, chat, banner, dashboard: the views it drives most (from ``views``).
        fastest_call: the bridge call of the last *Fastest* search, or None.
    """

    def __init__(self, views: LaunchViews, session, workspace, engine, settings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.views = views
        self.session, self.workspace = session, workspace
        self.engine, self.settings = engine, settings
        self.editor, self.launch, self.chat = views.editor, views.launch, views.chat
        self.banner, self.dashboard = views.banner, views.dashboard
        self.fastest_call = None
        #: the window's :class:`~gui.speculation_actions.SpeculationActions` (Fastest measures the
        #: chosen speculation after the split search, #35), or None
        self.speculation = None
        self._relaunch_pending = False
        self._awaiting_ready = False  # a Start's launch call is out: its READY shows the placement
        self._recovered = None  # the failover's RECOVERED event, said once READY follows it
        # the panel shows the launch's state as the session relays it from the core (#33)
        self.launch.show_states_of(lambda: self.session.launch_state)
        # the next step said beside the tabs follows the model and the launch (#37)
        self.launch.stateChanged.connect(lambda _s: self.update_next_step())
        views.model_panel.readingChanged.connect(lambda _r: self.update_next_step())
        self.workspace.subscribe(lambda event: event == W.MODEL and self.update_next_step())
        self.update_next_step()
        # a model without a chat template gets one of llama-server's built-in ones (#37)
        self.workspace.subscribe(lambda event: event == W.MODEL and self.check_chat_template())
        self.launch.templateChosen.connect(self.use_chat_template)
        self.launch.startWithoutRequested.connect(self.start_without)
        # Start wakes the sleeping nodes the plan needs and says so while it waits (#36)
        self._after_waking = False
        self.session.wakeProgress.connect(self.launch.show_waking)
        #: the ``--chat-template`` herd added to the server options (not one the user typed)
        self._our_template: str | None = None
        self.template_call = None

    def _set_tray_tip(self, text: str) -> None:
        if self.views.tray is not None:
            self.views.tray.setToolTip(text)

    def check_chat_template(self):
        """Read off the GUI thread whether the open model has a chat template; without one, the
        launch panel says so and offers llama-server's built-in templates, the one suggested for
        its architecture first. Nothing is passed until one is chosen: Start and ``herd up`` run
        the same command line for the same profile. Returns the bridge call (None without a model)."""
        import asyncio

        from gui.cluster.llama.chat_template import BUILT_IN, has_chat_template, suggested_template, template_in

        model = self.workspace.model
        if model is None:
            return None

        async def check():
            return await asyncio.to_thread(has_chat_template, model.path)

        def show(has_one) -> None:
            if call is not self.template_call or self.workspace.model is not model:
                return  # another model was opened meanwhile
            if has_one is False:
                first = suggested_template(model.architecture)
                self.use_chat_template(None)  # (one chosen for the model before)
                self.launch.offer_templates((first, *(n for n in BUILT_IN if n != first)),
                                            template_in(self.workspace.options.extra_args) or "")
            else:  # its own (or unreadable here: llama-server reads it itself)
                self.launch.offer_templates((), "")
                self.use_chat_template(None)

        call = self.template_call = self.session.bridge.submit(check(), "read the chat template")
        call.finished.connect(show)
        return call

    def use_chat_template(self, name: str | None) -> None:
        """Pass ``--chat-template name`` to llama-server (None: the model's own template)."""
        from gui.cluster.llama.chat_template import template_in, with_template

        name = name or None  # ("" is the offer's "ChatML, llama-server's fallback": nothing passed)
        extra = self.workspace.options.extra_args
        if name is None and (self._our_template is None or template_in(extra) != self._our_template):
            return  # a template the user gave by hand stays
        self._our_template = name
        self.workspace.set_options(extra_args=with_template(extra, name))

    def update_next_step(self) -> None:
        """Say the next step of a first run beside the tabs: open a model, Launch ▸ Start, Chat."""
        state = self.session.launch_state
        if state in STARTING_UP:
            step = S.STARTING
        elif state == READY:
            step = S.CHAT
        elif self.views.model_panel.is_reading():
            step = S.READING
        elif self.workspace.model is None:
            step = S.OPEN_MODEL
        else:
            step = S.START
        self.views.next_step.show_step(step)

    def find_fastest(self):
        """Ask the planner for the fastest split (measures the nodes first, once per model)."""
        if self.workspace.model is None or not self.engine.complete or self.session.cluster_launch.is_running:
            return None
        self.editor.set_fastest_available(False)
        self.editor.show_summary(self.tr("Measuring the nodes to find the fastest split…"))
        devices = self.workspace.planned_devices()
        self.session.fastest_for = self.editor.fastest_objective()  # chat or documents (#16)
        call = self.session.fastest(self.engine, self.workspace.model, devices, self.workspace.options.ctx,
                                    host_free_bytes())
        call.finished.connect(lambda plan, devices=devices: self._show_fastest(plan, devices))
        call.failed.connect(lambda exc: self.editor.show_summary(
            self.tr("Could not find the fastest split: %1").replace("%1", str(exc))))
        call.done.connect(self.update_fastest_button)
        # its bandwidth probes are not the cluster's traffic: the throughput graph leaves them out
        self.dashboard.set_probing(True)
        call.done.connect(lambda: self.dashboard.set_probing(False, tail_s=self.session.status_interval))
        self.fastest_call = call
        return call

    def _show_fastest(self, plan, devices) -> None:
        """Show the fastest plan, and say why when it leaves nodes out (or keeps all on the host)."""
        self.editor.apply_plan(plan)
        used = {d.node_id for d, c in plan.assignments if c}
        names = {d.node_id: d.node_name for d in devices}
        left_out = [names[nid] for nid in dict.fromkeys(d.node_id for d in devices) if nid not in used]
        note = ""
        if devices and not used:
            note = self.tr("Fastest keeps all %1 layer slots on this computer: by the measurements, sending "
                           "each token's activations to the nodes and back costs more time than their share "
                           "of the work saves.").replace("%1", str(plan.n_slots))
        elif left_out:
            note = self.tr("Fastest leaves %1 out: by the measurements, using it would make each token "
                           "slower.").replace("%1", ", ".join(left_out))
        local = sorted({names[d.node_id] for d in devices if d.endpoint
                        and d.endpoint.rsplit(":", 1)[0].strip("[]") in ("127.0.0.1", "::1", "localhost")})
        if note and local:
            note += " " + self.tr("(%1 run on this computer too, so they add no computing power.)").replace(
                "%1", ", ".join(local))
        note = " ".join(t for t in (self.editor.predicted_text(self.session.last_fastest), note) if t)
        self.editor.set_note(note)
        # then the chosen speculation, with and without on this split (#35)
        trial = self.speculation.measure(self.engine, plan) if self.speculation is not None else None
        if trial is not None:
            self.editor.set_fastest_available(False, self.tr("Measuring speculation with and without…"))
            trial.done.connect(self.update_fastest_button)

    def update_fastest_button(self) -> None:
        why = ""
        if self.workspace.model is None:
            why = self.tr("Open a model first.")
        elif not self.engine.complete:
            why = self.tr("The llama.cpp engine is missing; run herd engine install.")
        elif self.session.cluster_launch.is_running:
            why = self.tr("Stop the cluster first: measuring needs the nodes' workers free.")
        elif self.speculation is not None and self.speculation.measuring:
            why = self.tr("Measuring speculation with and without…")
        self.editor.set_fastest_available(not why, why)

    # ------------------------------------------------------------ launch

    def start(self) -> None:
        """Make the launch request now (plan, model, server options), check it, run the doctor,
        then launch that same request; refuse with the reason otherwise."""
        request = self.workspace.launch_request(self.editor.plan())
        if request is None:
            self.launch.refuse([self._why_no_split()])
            return
        owner = owner_of_port(request.options.port)
        if owner is not None:
            self.attach_to(owner)
            return
        if not self._after_waking and self._wake_for_start():
            return
        reading = self.session.cluster_launch.check(request, self.workspace.nodes.values(), self.engine,
                                                    host_free_bytes=host_free_bytes())
        if self._refuse_at_once(reading.refusal(), reading):
            return
        self.settings.set("server/ctx", request.options.ctx)
        self.views.tabs.setCurrentWidget(self.launch)
        self.launch.begin(request.plan.n_slots)
        call = self.session.preflight(request, self.engine)
        call.finished.connect(lambda reading: self._after_preflight(reading, request))
        call.failed.connect(lambda exc: self._launch_failed(str(exc)))

    def _refuse_at_once(self, refusal: Refusal | None, reading) -> bool:
        """Say why Start may not go, from the checks that need no network; False: it may go on
        (what else blocks it, the doctor's checks say next)."""
        if refusal == Refusal.DOES_NOT_FIT:
            # (the editor shows the same estimate, per device and in the user's language)
            self.launch.refuse([self.tr("The plan does not fit.")] + self.editor.problems() + [self.editor.fit_hint()])
            self.views.tabs.setCurrentWidget(self.launch)
        elif refusal == Refusal.ENGINE_MISSING:
            self.launch.refuse([self.tr("The llama.cpp engine is missing; run herd engine install.")])
        elif refusal == Refusal.NODES_UNANSWERED:
            lost = list(reading.unanswered)
            self.launch.refuse([self.tr("Not reachable or not paired: %1.").replace("%1", ", ".join(lost))])
            self.launch.offer_start_without(lost)
        else:
            return False
        return True

    #: how long Start waits for the sleeping nodes it wakes, as ``herd up --wake-wait`` (#36)
    WAKE_WAIT_S = 120.0

    def _wake_for_start(self) -> bool:
        """Wake the paired nodes that do not answer and whose MAC is known, wait for them, then
        Start again; False when there is none to wake. The split by free memory is a split over
        all of the user's nodes (as for ``herd up``), so a sleeping one is woken first; a node
        that stays asleep, or whose MAC is not known, is left to what Start did before (#36)."""
        ids = [nid for nid, n in self.workspace.nodes.items()
               if n.paired and not n.reachable and getattr(n, "wakeable", False)]
        if not ids:
            return False
        self.views.tabs.setCurrentWidget(self.launch)
        call = self.session.wake_and_wait(ids, self.WAKE_WAIT_S)
        call.finished.connect(self._start_once_planned)
        call.failed.connect(lambda exc: self._launch_failed(str(exc)))
        return True

    def _start_once_planned(self, took: dict) -> None:
        """Start again once the split has the woken nodes' devices (their status comes a moment
        after they answer), or after 15 s with the split as it is (one the user made by hand)."""
        import time

        awake = {nid for nid, seconds in took.items() if seconds is not None}
        deadline = time.monotonic() + 15.0
        timer = QTimer(self)

        def check() -> None:
            plan = self.editor.plan()
            planned = {d.node_id for d in plan.devices()} if plan is not None else set()
            if awake <= planned or time.monotonic() > deadline:
                timer.stop()
                timer.deleteLater()
                self._start_after_waking()
        timer.timeout.connect(check)
        timer.start(200)

    def _start_after_waking(self) -> None:
        self._after_waking = True
        try:
            self.start()
        finally:
            self._after_waking = False

    def start_without(self, names: list[str]) -> None:
        """Re-plan by free memory over the devices of every node but ``names`` (node names that
        did not answer at Start), show that split, and Start with it."""
        from gui.cluster.planning.plan import PlanError, plan_by_memory

        model = self.workspace.model
        if model is None:
            return
        left_out = {nid for nid, n in self.workspace.nodes.items() if n.name in names or nid in names}
        devices = [d for d in self.workspace.planned_devices() if d.node_id not in left_out]
        try:
            plan = plan_by_memory(model, devices, self.workspace.options.ctx, host_free_bytes=host_free_bytes())
        except PlanError as exc:
            self.launch.refuse([str(exc)])
            return
        self.launch.offer_start_without([])
        self.editor.apply_plan(plan)
        self.editor.set_note(self.tr("Started without %1: the split was made again over the other devices "
                                     "by their free memory.").replace("%1", ", ".join(names)))
        self.start()

    def _why_no_split(self) -> str:
        """Why Start has no split to launch yet, and what to do (#37: "Open a model first"
        while the demo's model was still being read sent people looking for a button)."""
        if self.views.model_panel.is_reading():
            return self.tr("The model is still being read; press Start again once the Split tab shows "
                           "its layers.")
        if self.workspace.model is None:
            return self.tr("Open a model first: Open model… above, or click one under On this PC.")
        return self.tr("The split is not ready yet: the Split tab shows why.")

    def attach_to(self, owner) -> None:
        """herd already serves on the endpoint's port (the login service, or ``herd up``): show that
        endpoint and chat with it instead of starting a second cluster — one owner of the endpoint
        (#36). Read-only: the window does not stop or change a cluster it did not start."""
        self.launch.refuse([self.tr("herd already serves on port %1 (process %2), so the window uses that "
                                    "endpoint. To start a cluster from here, stop that one first; herd "
                                    "service status says whether the login service runs it.")
                            .replace("%1", str(owner.port)).replace("%2", str(owner.pid))])
        self.launch.set_endpoint(owner.url)
        self.chat.set_send(self.session.chat_sender(owner.url))
        self.views.tabs.setCurrentWidget(self.launch)

    def _after_preflight(self, reading, request) -> None:
        """The doctor's findings (a :class:`~gui.cluster.launching.preflight_reading.PreflightReading`)
        are shown; when nothing blocks, the same request is launched."""
        self.launch.show_findings(reading.findings)
        if not reading.may_start:
            self.launch.show_state(STOPPED)  # (nothing started: Start is on again)
            self.launch.refuse([f"{self.launch.subject_text(f)}: {f.message}" for f in reading.blocking])
            if reading.silent_only:  # (anything else wrong would stop a start without them too)
                self.launch.offer_start_without(list(reading.silent_only))
            return
        self._awaiting_ready = True
        # shared on the LAN through the front door when the switch is on (#34)
        call = self.session.launch(self.engine.llama_server, request,
                                   share=self.settings.get("server/share_lan"),
                                   share_https=self.settings.get("server/share_https"))
        call.failed.connect(lambda exc: self._launch_failed(str(exc)))

    @staticmethod
    def layout_of(plan):
        """What llama.cpp will do with ``plan`` (host slots, then each holding device and its
        count), to compare two plans by: the free memory in them changes all the time."""
        return None if plan is None else (plan.host_layers, tuple((d.key, d.endpoint, c) for d, c in plan.assignments
                                                                  if c))

    def running_plan(self):
        """The plan the cluster serves now (after a failover, the survivors' plan), or None."""
        return self.session.cluster_launch.plan

    def show_split_differs(self) -> None:
        """While serving, say when the split shown is not the one running, with a way to use it."""
        running = self.running_plan()
        differs = (running is not None and self.session.launch_state == READY
                   and self.layout_of(running) != self.layout_of(self.editor.plan()))
        self.editor.set_differs_from_running(differs)
        self.launch.set_start_hint(
            self.tr("The cluster is running. To use the split shown, press Relaunch with this split on "
                    "the Split tab, or Stop first.") if running is not None else "")

    def relaunch_with_shown_split(self) -> None:
        """Stop the running cluster, then Start it again with the split shown."""
        if not self.session.cluster_launch.is_running:
            self.start()
            return
        self._relaunch_pending = True
        self.editor.set_differs_from_running(False)
        # Start again only once the stop has finished on the loop: a launch begun while the old
        # one is still winding down would have its states and log taken by the old one's end.
        call = self.stop()
        call.finished.connect(lambda _=None: self._relaunch_after_stop())
        call.failed.connect(lambda _=None: self._relaunch_after_stop())

    def _relaunch_after_stop(self) -> None:
        if self._relaunch_pending:
            self._relaunch_pending = False
            self.start()

    def _launched(self, check) -> None:
        """A Start's launch is ready: the placement check, the endpoint, the chat."""
        self.launch.show_state(READY)
        self.show_split_differs()
        self.update_fastest_button()
        self._set_tray_tip(self.tr("llama-herd: %1").replace("%1", "ready"))
        launch = self.session.cluster_launch
        self.workspace.set_running(launch.request)
        self.launch.show_placement(check, launch.supervisor.notes if launch.is_running else ())
        self.launch.set_endpoint(self.session.endpoint_url)  # (#34)
        self.chat.set_send(self.session.chat_sender())
        # (the dashboard keeps its history across Starts: a cluster that lives for days, #36)

    def _serving_again(self) -> None:
        """The failover supervisor relaunched the cluster and it serves again (its RECOVERED
        event came just before): the survivors' request, the endpoint, the chat goes on."""
        ev, self._recovered = self._recovered, None
        self.workspace.set_running(self.session.cluster_launch.request)
        self.launch.show_state(READY)
        self.show_split_differs()
        self.launch.set_endpoint(self.session.endpoint_url)  # (#34)
        self.chat.set_send(self.session.chat_sender())
        self.chat.resume_reply()  # a reply the lost worker cut goes on where it stopped (#34)
        if ev is not None:
            self.launch.set_status(describe_event(ev), "#2ca02c")
            self._set_tray_tip("llama-herd: " + describe_event(ev))

    def _launch_failed(self, message: str) -> None:
        # (also a launch that failed before it reached the core: the front door's port taken…)
        self._awaiting_ready = False
        self.launch.show_state(FAILED, message)

    def on_server_state(self, state: str, error: str) -> None:
        """The launch's state, as the core says it: launch panel, chat availability, tray."""
        state = LaunchState(state)
        if state == READY:
            if not self.session.cluster_launch.is_running:
                # a "ready" relayed just before a Stop and delivered after it: nothing serves now,
                # and the "stopping" and "stopped" that follow say so
                return
            if self._awaiting_ready:
                self._awaiting_ready = False
                self._launched(self.session.cluster_launch.placement)
            else:
                self._serving_again()
            return
        self.launch.show_state(state, error)
        if state in (FAILED, STOPPED, RELAUNCHING):
            self._server_ended(state, error)
        self._set_tray_tip(self.tr("llama-herd: %1").replace("%1", str(state)))

    def _server_ended(self, state: LaunchState, error: str) -> None:
        """llama-server failed or stopped: the chat waits; while the failover supervisor holds
        the cluster (it relaunches, or waits for a node or the user), Stop stays the way out."""
        running = self.session.cluster_launch.is_running
        if not running:
            self._awaiting_ready = False
            self.workspace.set_running(None)
        self.chat.set_send(None)
        # (on the next turn, when the state has settled; dropped if the window is gone by then)
        QTimer.singleShot(0, self, self.update_fastest_button)
        QTimer.singleShot(0, self, self.show_split_differs)
        if state == FAILED:
            self.chat.set_available(False, self.tr("llama-server stopped: %1").replace("%1", error))
            if running:
                self.launch.hold_for_recovery()
        elif state == RELAUNCHING:
            self.chat.set_available(False, self.tr("The cluster is recovering; the conversation "
                                                   "continues once it serves again."))

    def on_failover(self, ev) -> None:
        """What the failover supervisor says: a lost node, a countdown, serving again…"""
        from gui.cluster.failover import events as E
        self.banner.show_event(ev, self.session.failover_nodes)
        if ev.kind in (E.EventKind.LOST, E.EventKind.SERVER_EXITED):
            # The reply in flight (if any) is marked interrupted by the chat pane; sending waits
            # for the relaunch, after which the conversation so far is resent.
            self.chat.set_available(False, self.tr("The cluster is recovering; the conversation "
                                                   "continues once it serves again."))
        if ev.kind != E.EventKind.COUNTDOWN_TICK:
            self.launch.append_log(["[herd] " + describe_event(ev), *ev.lines])
        self.views.status_bar.showMessage(describe_event(ev), 15000)
        if ev.kind == E.EventKind.RECOVERED:
            self._recovered = ev  # the launch's READY follows: _serving_again says it
            return
        bad = {E.EventKind.LOST, E.EventKind.NO_FIT, E.EventKind.RECOVERY_FAILED, E.EventKind.SERVER_EXITED}
        self.launch.set_status(describe_event(ev), "#d62728" if ev.kind in bad else "#e6a700")
        self._set_tray_tip("llama-herd: " + describe_event(ev))

    def stop(self):
        """Stop llama-server and the workers the launch started; returns the bridge call."""
        self.banner.clear()
        self.chat.stop()
        self.chat.set_send(None)
        return self.session.stop_launch()
