"""Speculation in the window (#35): the split editor's choice, what it means for the open model,
and *Fastest*'s trial of it.

:class:`SpeculationActions` keeps the user's choice in the settings (``server/draft``: ``auto``,
``none``, ``ngram``, ``mtp`` or a draft model's path, as ``herd plan --draft`` takes it). When a
model is opened, the models the local scan found (:class:`~gui.model_actions.ModelActions`) are
judged as its drafts off the GUI thread (:func:`~gui.cluster.planning.speculation_offer.offer_for`);
the choice resolved against that offer becomes the workspace's speculation (the next launch's)
and the split editor's (its draft's memory in the fit, ``-md`` on the command line, the choice
and its predicted gain in the summary). After *Fastest*'s split search, a chosen speculation is
measured with and without on that split
(:func:`~gui.cluster.launching.speculation_trial_run.measure_on_cluster`, as ``herd plan
--fastest --draft``) and kept only when it is faster; the reason goes under the split. Under
*Auto* that decision is remembered for the model (:mod:`gui.cluster.planning.speculation_memory`),
so opening it again does not bring back a draft *Fastest* dropped.
"""

from __future__ import annotations

import asyncio
import logging

from PySide6.QtCore import QObject, Signal

from gui.cluster.planning.speculation import AUTO, DRAFT, Speculation, SpeculationError
from gui.cluster.planning.speculation_memory import remember_decision, remembered_decision

log = logging.getLogger(__name__)


class SpeculationActions(QObject):
    """The window's speculation (see the module docstring).

    Attributes:
        bridge, settings, workspace, session: the asyncio bridge, the stored settings, the
            Qt-free state and the cluster session (its discovery, for the trial's workers).
        editor: the :class:`~gui.widgets.split_editor.SplitEditor` (its ``speculation_choice``).
        status_bar: the window's status bar (what the trial is doing).
        offer: the :class:`~gui.cluster.planning.speculation_offer.SpeculationOffer` for the open
            model, or None while it is being read.
        offer_call, trial_call: the bridge calls of the newest offer read and trial, or None.

    Signals:
        progress(str): what the trial is doing, in words (emitted on the loop's thread; the
            status bar shows it, queued to the GUI thread).
    """

    progress = Signal(str)

    def __init__(self, parent: QObject, *, bridge, settings, workspace, session, editor, status_bar) -> None:
        super().__init__(parent)
        self.bridge, self.settings, self.workspace, self.session = bridge, settings, workspace, session
        self.editor, self.status_bar = editor, status_bar
        self.offer = None
        self.offer_call = self.trial_call = None
        self._local_models: list | None = None  # the local scan's newest result (paths)
        editor.speculation_choice.choiceChanged.connect(self.choose)
        self.progress.connect(lambda words: self.trial_call is not None and status_bar.showMessage(words))

    def choice(self) -> str:
        """The stored choice (``auto`` unless the user chose otherwise)."""
        return self.settings.get("server/draft") or AUTO

    # ------------------------------------------------------------ the offer

    def model_opened(self, _info=None) -> None:
        """Another model is open: its old speculation no longer applies; judge the drafts anew."""
        self.offer = None
        self.editor.speculation_choice.set_offer(None, self.choice())
        self._use(Speculation())
        self._read_offer()

    def local_models_found(self, models: list) -> None:
        """The local scan's result (:class:`~gui.cluster.models.local.LocalModel` list)."""
        self._local_models = [m.path for m in models]
        self._read_offer()

    def _read_offer(self):
        """Judge the models on this PC as drafts for the open model, off the GUI thread (each
        vocabulary is read); the newest read wins. Returns the bridge call, or None while the
        model or the scan is not known yet, or once the window closes."""
        from gui.cluster.planning.speculation_offer import offer_for

        model, models = self.workspace.model, self._local_models
        # (a model read can end while the window closes: the bridge then takes no more work)
        if model is None or models is None or self.bridge.closed:
            return None

        async def read():
            return await asyncio.to_thread(offer_for, model.path, models)

        call = self.offer_call = self.bridge.submit(read(), "find draft models")
        call.finished.connect(lambda offer: call is self.offer_call and self.workspace.model is model
                              and self._show_offer(offer))
        return call

    def _show_offer(self, offer) -> None:
        self.offer = offer
        self._show_choice()
        self.apply()

    def _auto(self) -> Speculation:
        """What *Auto* means for the open model: the offer's pick, unless *Fastest* measured that
        pick on this model and dropped it (or kept it, with its gain)."""
        pick = self.offer.auto
        if not pick.active:
            return pick
        measured = remembered_decision(self.settings.get("speculation/measured"), self.offer.target, pick)
        return measured if measured is not None else pick

    def _show_choice(self) -> None:
        """The choice offered for the open model, the stored one shown, *Auto* saying what it picks."""
        auto = self._auto()
        auto = auto.label() if auto.active else self.tr("off")
        self.editor.speculation_choice.set_offer(self.offer, self.choice(), auto)

    # ------------------------------------------------------------ the choice

    def choose(self, choice: str) -> None:
        """The user chose ``choice`` (stored form): remember it and plan with it."""
        self.settings.set("server/draft", choice)
        self.apply()

    def use_saved(self, speculation: Speculation) -> None:
        """An imported profile's speculation becomes the choice (a draft by its path)."""
        choice = str(speculation.draft_path) if speculation.kind == DRAFT else speculation.kind
        self.settings.set("server/draft", choice)
        if self.offer is not None:
            self._show_choice()
        self._use(speculation)

    def apply(self) -> None:
        """Resolve the stored choice for the open model; what cannot be had is said under the
        choice and none is planned."""
        if self.offer is None:
            return
        try:
            speculation = self.offer.resolve(self.choice())
        except SpeculationError as exc:
            self.editor.speculation_choice.set_line(self.tr("Speculation is off: %1").replace("%1", str(exc)))
            speculation = Speculation()
        self._use(self._auto() if self.choice() == AUTO else speculation)

    def _use(self, speculation: Speculation) -> None:
        self.workspace.set_speculation(speculation)
        self.editor.set_speculation(speculation)

    # ------------------------------------------------------------ Fastest's trial

    @property
    def measuring(self) -> bool:
        """A trial is running (Fastest waits for it)."""
        return self.trial_call is not None

    def measure(self, engine, plan):
        """Measure the workspace's speculation against none on ``plan`` and keep it only when it is
        faster, the reason said under the split; returns the bridge call (None when there is
        nothing to measure). Runs only while no cluster serves: the trial starts the plan itself."""
        from gui.cluster.launching.speculation_trial_run import measure_on_cluster, trying_text

        speculation, model = self.workspace.speculation, self.workspace.model
        if not speculation.active or model is None or plan is None or self.session.cluster_launch.is_running:
            return None
        session, ctx = self.session, self.workspace.options.ctx

        async def trial():
            nodes = list(session.discovery.nodes.values()) if session.discovery is not None else []
            client = session.discovery.client if session.discovery is not None else None
            return await measure_on_cluster(engine.llama_server, plan, model, nodes, client, speculation, ctx=ctx,
                                            progress=self.progress.emit)

        self.status_bar.showMessage(trying_text(speculation))
        call = self.trial_call = self.bridge.submit(trial(), "speculation trial")
        # (a decision for a model that is no longer open is dropped)
        call.finished.connect(lambda decision: self.workspace.model is model and self._measured(decision, speculation))
        call.failed.connect(lambda exc: self.workspace.model is model and self._measured(Speculation(reason=str(exc))))
        call.done.connect(lambda: setattr(self, "trial_call", None))
        return call

    def _measured(self, decision: Speculation, tried: Speculation | None = None) -> None:
        """The trial's decision: planned, and its reason under the split; under *Auto*, kept for
        the next opening of the model (the choice the user made by name stays theirs)."""
        self._use(decision)
        if tried is not None and self.choice() == AUTO and self.offer is not None:
            self.settings.set("speculation/measured", remember_decision(
                self.settings.get("speculation/measured"), self.offer.target, tried, decision))
            self._show_choice()  # (Auto's label says what it now means)
        self.status_bar.clearMessage()
        note = self.editor.note.text() if self.editor.note.isVisible() else ""
        words = decision.describe()
        self.editor.set_note(" ".join(t for t in (note, words[:1].upper() + words[1:] + ".") if t))
