"""The split being edited, Qt-free: a plan over the cluster's devices, with undo.

:class:`SplitModel` holds what the split editor shows and changes — the model and the devices
it is planned over, the devices the user left out, the order of the workers, the plan and its
memory fit, and the undo history — so the editor widget only draws it and forwards the user's
gestures. One gesture is one undoable step; a drag of the bar previews without recording until
the handle is let go (:meth:`preview_counts`, then :meth:`set_counts`).

A plan the user made (an edit, *Fastest*, an imported profile) is kept when the nodes change
and still fits the model; a plan computed by memory is computed again for the new devices. What
the user made is remembered by device: a node that drops out for a moment (Wi-Fi, a reboot) gives
its slots to the host while it is gone and gets them back when it returns. It is also remembered
by model (:func:`model_key`): opening another model and coming back to this one, with the same
devices there, shows the split the user made for it again (:meth:`SplitModel.remembered` and
:meth:`SplitModel.load_remembered` carry that memory across restarts).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import replace

from gui.cluster.planning.plan.assignment import Assignment, Plan
from gui.cluster.planning.plan.by_memory import plan_by_memory
from gui.cluster.planning.plan.device import Device, is_gpu, model_order
from gui.cluster.planning.plan.fit import DeviceFit, estimate
from gui.cluster.planning.plan.layer_map import PlanError
from gui.cluster.planning.plan.split_syntax import cpu_sibling
from gui.cluster.llama.model import ModelError
from gui.cluster.llama.server_command import DEFAULT_CTX, ServerOptions

log = logging.getLogger(__name__)

#: how many models' hand-made splits are remembered (the most recently left first)
REMEMBERED_MODELS = 20


def model_key(model) -> str:
    """Who a model file is, for remembering its split: its full path, size and modification
    time (a file replaced at the same path is another model). ``model`` is a
    :class:`~gui.cluster.llama.model.ModelInfo`."""
    path = os.path.abspath(os.fspath(model.path))
    try:
        st = os.stat(path)
    except OSError:  # gone since it was opened: its path and size still tell it apart
        return f"{path}|{model.file_bytes}"
    return f"{path}|{st.st_size}|{st.st_mtime_ns}"


class SplitModel:
    """The split being edited (see the module docstring).

    Attributes:
        model: the :class:`~gui.cluster.llama.model.ModelInfo` planned for, or None.
        devices: every device the plan may use (left-out ones included).
        excluded: keys of the devices the user left out.
        experts_in_ram: keys of the GPUs whose blocks keep their experts in their PC's RAM (the
            worker's CPU device), for a mixture-of-experts model (:meth:`set_experts_in_ram`).
        ctx: the context size the fit is estimated for.
        server_args: llama-server's further arguments (``-np``, ``-ub``, ``--swa-full`` change
            what it allocates; see :meth:`ServerOptions.cache_shape`).
        host_free_bytes: RAM free on this computer (None: unknown).
        plan: the plan shown, or None without a model.
        fits: its memory fit per device, then the host (empty without a plan).
        error: why the fit could not be estimated, or "".

    ``subscribe(callback)`` registers ``callback(plan)``, called after every change.
    """

    def __init__(self, ctx: int = DEFAULT_CTX) -> None:
        self.model = None
        self.devices: list[Device] = []
        self.excluded: set[str] = set()
        self.experts_in_ram: set[str] = set()
        self.ctx = ctx
        self.server_args: tuple[str, ...] = ()
        self.people: int | None = None
        self.host_free_bytes: int | None = None
        self.plan: Plan | None = None
        self.fits: list[DeviceFit] = []
        self.error = ""
        self._endpoint_order: list[str] = []
        self._history: list[Plan] = []
        self._pos = -1
        self._custom = False  # the plan shown was made by the user (kept when nodes change)
        #: the slot counts of the last plan the user made, by device key (devices that are gone
        #: included), and the host's: what a change of nodes re-applies
        self._intent: dict[str, int] = {}
        #: {model_key: split the user made for that model} (see :meth:`remembered`)
        self._by_model: dict[str, dict] = {}
        self._subs: list[Callable[[Plan | None], None]] = []

    # -- events ------------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[Plan | None], None]) -> Callable[[], None]:
        """Call ``callback(plan)`` after every change; returns the unsubscribe function."""
        self._subs.append(callback)
        return lambda: self._subs.remove(callback) if callback in self._subs else None

    def _changed(self) -> None:
        self._estimate()
        for cb in list(self._subs):
            try:
                cb(self.plan)
            except Exception:  # one broken view must not stop the others
                log.exception("split model subscriber failed")

    def _estimate(self) -> None:
        self.fits, self.error = [], ""
        if self.plan is not None and self.model is not None:
            try:
                self.fits = estimate(self.plan, self.model, self.cache_shape(), self.host_free_bytes,
                                     draft=self.draft)
            except PlanError as exc:
                self.error = str(exc)

    # -- inputs ------------------------------------------------------------------------------

    def set_cluster(self, model, devices: list[Device], host_free_bytes: int | None = None,
                    keep_split: bool = True) -> None:
        """Plan ``model`` over ``devices``; keeps the user's split when it still applies. The
        undo history starts again."""
        old = self.plan
        old_key = model_key(self.model) if self.model is not None else None
        new_key = model_key(model) if model is not None else None
        if old_key != new_key:
            self._remember()  # the split made for the model being left, for when it comes back
        self.model = model
        self.host_free_bytes = host_free_bytes
        self.devices = list(devices)
        known = {d.key for d in devices}
        saved = self._by_model.get(new_key) if new_key is not None else None
        # The split made for this model comes back when the model is opened again, or when its
        # devices are all here again (after a restart they report one by one), unless the
        # user made another one since.
        if saved is not None and set(saved["devices"]) == known and (old_key != new_key or not self._custom):
            self.excluded = set(saved["excluded"]) & known
            self.experts_in_ram = set(saved.get("experts", ())) & known
            self._endpoint_order = list(saved["order"])
            self._intent = dict(saved["counts"])
            plan = self._with_counts(0, self._intent)
            if plan is not None:
                self._history, self._pos = [], -1
                self._set(plan, record=True, intent=False)
                return
        self.excluded &= known
        plan = None
        # Only a split the user made (an edit, Fastest, an import) is kept: a split computed by
        # memory before the nodes were known (all slots on the host) is computed again, or
        # `herd demo` opened with every handle stacked at the end of the bar (#17).
        if keep_split and self._custom and old is not None and model is not None and old.n_layer == model.n_layer:
            counts = dict(self._intent)
            # A node that returns takes back its slots from the host only as far as the host has
            # them (the user may have split the rest again while it was gone).
            shown = {d.key for d, _ in old.assignments}
            spare = old.host_layers
            for d in self.included():
                if d.key not in shown and counts.get(d.key, 0):
                    counts[d.key] = min(counts[d.key], spare)
                    spare -= counts[d.key]
            plan = self._with_counts(old.host_layers, counts)
        custom = plan is not None
        if plan is None and model is not None:
            plan = self._by_memory()
            self._intent = {}
        self._history, self._pos = [], -1
        self._set(plan, record=True, intent=False)
        self._custom = custom

    def cache_shape(self):
        """How llama-server will size its caches for this context and these server arguments
        (arguments it cannot read: its defaults; Start says what is wrong with them)."""
        try:
            return ServerOptions(ctx=self.ctx, extra_args=self.server_args, people=self.people).cache_shape()
        except ValueError:
            return self.ctx

    def set_server_args(self, args) -> None:
        """llama-server's further arguments changed: the fit is estimated again."""
        args = tuple(str(a) for a in args)
        if args != self.server_args:
            self.server_args = args
            self._changed()

    def set_people(self, people: int | None) -> None:
        """People at once changed (#34: each holds a whole context): the fit is estimated again."""
        if people != self.people:
            self.people = people
            self._changed()

    #: the speculation's draft model (#35), whose memory the fit plans on the host; None: none
    draft = None

    def set_speculation(self, speculation) -> None:
        """The plan's :class:`~gui.cluster.planning.speculation.Speculation` (None: none): the fit
        is estimated again with its draft model's memory on the host (#35). A draft whose file
        cannot be read is left out of the fit (the launch's check says what is wrong with it)."""
        try:
            self.draft = speculation.draft_model() if speculation is not None else None
        except ModelError:
            self.draft = None
        self._changed()

    def set_ctx(self, ctx: int) -> None:
        """The context size changed: the fit is estimated again (the split stays)."""
        if ctx != self.ctx:
            self.ctx = ctx
            self._changed()

    # -- gestures (each one undoable step) ----------------------------------------------------

    def apply_plan(self, plan: Plan) -> bool:
        """Show ``plan`` (from *Fastest*, an imported profile …); False if it is for another model."""
        if self.model is None or plan.n_layer != self.model.n_layer:
            return False
        keys = {d.key for d in plan.devices()}
        self.excluded = {d.key for d in self.devices if d.key not in keys}
        self.experts_in_ram = {h.layers for h in plan.expert_homes}
        self._endpoint_order = [d.endpoint for d in plan.devices() if d.endpoint]
        self._set(plan, record=True)
        return True

    def reset_by_memory(self) -> None:
        """llama.cpp's default: in proportion to free memory."""
        if self.model is not None:
            self._set(self._by_memory(), record=True, intent=False)
            self._custom = False
            self._intent = {}
            self._by_model.pop(model_key(self.model), None)  # the user chose the default for it

    def set_counts(self, host: int, counts: list[int]) -> bool:
        """Slot counts: the host's, then each included device's in :meth:`included` order."""
        plan = self._from_counts(host, counts)
        if plan is None:
            return False
        self._set(plan, record=True)
        return True

    def preview_counts(self, host: int, counts: list[int]) -> bool:
        """Like :meth:`set_counts` while a handle is dragged: shown, not yet an undo step."""
        plan = self._from_counts(host, counts)
        if plan is None:
            return False
        self._set(plan, record=False)
        return True

    def set_included(self, key: str, included: bool) -> None:
        """Leave a device out of the plan, or take it back: the slots are split by memory again
        over the devices left."""
        (self.excluded.discard if included else self.excluded.add)(key)
        if self.model is not None:
            self._set(self._by_memory(), record=True)

    def can_keep_experts_in_ram(self, key: str) -> bool:
        """Whether device ``key`` may keep its blocks' experts in its PC's RAM: the model has
        experts, the device is a worker's GPU, and that worker offers its CPU as a device too."""
        if self.model is None or not self.model.is_moe or self.plan is None:
            return False
        dev = next((d for d in self.plan.devices() if d.key == key), None)
        return dev is not None and is_gpu(dev) and cpu_sibling(self.plan, key) is not None

    def set_experts_in_ram(self, key: str, on: bool) -> bool:
        """Keep the experts of GPU ``key``'s blocks in its PC's RAM (or back on the GPU): its
        attention and shared tensors stay on the GPU, its experts go to the same worker's CPU
        device. One undoable step; False when the device cannot (:meth:`can_keep_experts_in_ram`)."""
        if on and not self.can_keep_experts_in_ram(key):
            return False
        (self.experts_in_ram.add if on else self.experts_in_ram.discard)(key)
        if self.plan is None:
            return False
        self._set(self._with_experts(self.plan), record=True)
        return True

    def move_worker(self, src: int, dst: int) -> bool:
        """Move the worker of included device ``src`` to where the worker of device ``dst`` is
        (llama.cpp numbers a worker's devices together, and local GPUs always come last)."""
        devs = self.included()
        if self.plan is None or not (0 <= src < len(devs) and 0 <= dst < len(devs)):
            return False
        eps = list(dict.fromkeys(d.endpoint for d in devs if d.endpoint))
        a, b = devs[src].endpoint, devs[dst].endpoint
        if a is None or b is None or a == b:
            return False
        eps.insert(eps.index(b), eps.pop(eps.index(a)))
        counts = {d.key: c for d, c in self.plan.assignments}
        self._endpoint_order = eps
        plan = self._with_counts(self.plan.host_layers, counts)
        if plan is None:
            return False
        self._set(plan, record=True)
        return True

    def undo(self) -> bool:
        """Go back one step; False when there is none."""
        if self._pos <= 0:
            return False
        self._pos -= 1
        self._restore(self._history[self._pos])
        return True

    def redo(self) -> bool:
        """Go forward one step; False when there is none."""
        if self._pos + 1 >= len(self._history):
            return False
        self._pos += 1
        self._restore(self._history[self._pos])
        return True

    def can_undo(self) -> bool:
        return self._pos > 0

    def can_redo(self) -> bool:
        return self._pos + 1 < len(self._history)

    def commit(self) -> None:
        """Record the plan shown as a step (the end of a drag previewed with :meth:`preview_counts`)."""
        self._record()

    # -- reading -----------------------------------------------------------------------------

    def included(self) -> list[Device]:
        """The devices the plan is made over, in model order. A device left out of a worker
        whose other devices stay is kept with no free memory: llama.cpp numbers a worker's
        devices together (its ``-d`` list), so the split by memory gives it no slot."""
        kept = {d.endpoint for d in self.devices if d.key not in self.excluded and d.endpoint}
        devs = [d if d.key not in self.excluded else replace(d, free_bytes=0)
                for d in self.devices if d.key not in self.excluded or d.endpoint in kept]
        return model_order(devs, self._endpoint_order)

    def remembered(self) -> list[dict]:
        """The splits made by hand, per model, as JSON-ready entries (the most recent first, at
        most :data:`REMEMBERED_MODELS`), the one shown now included: ``{"model": model_key,
        "counts": {device key: slots}, "excluded": [device key…], "order": [endpoint…],
        "devices": [device key…]}``. The window keeps them in its settings."""
        self._remember()
        return [{"model": k, **v} for k, v in list(self._by_model.items())[:REMEMBERED_MODELS]]

    def load_remembered(self, entries: Iterable) -> None:
        """Take back what :meth:`remembered` returned (from the settings); entries that are not
        of that shape are skipped."""
        for e in entries:
            try:
                key = str(e["model"])
                entry = {"counts": {str(k): int(c) for k, c in dict(e["counts"]).items()},
                         "excluded": [str(x) for x in e["excluded"]], "order": [str(x) for x in e["order"]],
                         "devices": [str(x) for x in e["devices"]],
                         "experts": [str(x) for x in e.get("experts", ())]}
            except (KeyError, TypeError, ValueError, AttributeError):
                log.warning("skipping a remembered split that is not one: %r", e)
                continue
            self._by_model.setdefault(key, entry)

    def problems(self) -> list[DeviceFit]:
        """The fits that do not fit (empty: the plan can launch)."""
        return [f for f in self.fits if not f.fits]

    # -- internals ---------------------------------------------------------------------------

    def _remember(self) -> None:
        """Remember the split shown for its model when the user made it (first in the memory)."""
        if self.model is None or self.plan is None or not self._custom:
            return
        key = model_key(self.model)
        self._by_model.pop(key, None)
        self._by_model = {key: {"counts": {d.key: c for d, c in self.plan.assignments},
                                "excluded": sorted(self.excluded), "order": list(self._endpoint_order),
                                "devices": sorted(d.key for d in self.devices),
                                "experts": sorted(self.experts_in_ram)}, **self._by_model}

    def _by_memory(self) -> Plan:
        return self._with_experts(plan_by_memory(self.model, self.included(), self.cache_shape(),
                                                 self.host_free_bytes))

    def _with_experts(self, plan: Plan) -> Plan:
        """``plan`` with the experts of the GPUs in :attr:`experts_in_ram` in their PC's RAM
        (the others' with their blocks)."""
        homes = []
        for dev in plan.devices():
            home = cpu_sibling(plan, dev.key) if dev.key in self.experts_in_ram else None
            if home is not None and is_gpu(dev) and self.model is not None and self.model.is_moe:
                homes.append((dev.key, home.key))
        return replace(plan, expert_homes=tuple(homes))

    def _with_counts(self, host: int, counts: dict[str, int]) -> Plan | None:
        devs = self.included()
        try:
            cs = [counts.get(d.key, 0) for d in devs]
            host = self.model.n_layer + 1 - sum(cs)
            return self._with_experts(Plan(self.model.n_layer, host, tuple(Assignment(d, c) for d, c in zip(devs, cs))))
        except PlanError:
            return None

    def _from_counts(self, host: int, counts: list[int]) -> Plan | None:
        devs = self.included()
        if self.model is None or len(counts) != len(devs):
            return None
        try:
            return self._with_experts(Plan(self.model.n_layer, host, tuple(Assignment(d, c) for d, c in zip(devs, counts))))
        except PlanError:
            return None

    def _record(self) -> None:
        self._custom = True
        if self.plan is not None and (self._pos < 0 or self._history[self._pos] != self.plan):
            del self._history[self._pos + 1:]
            self._history.append(self.plan)
            self._pos = len(self._history) - 1

    def _restore(self, plan: Plan) -> None:
        keys = {d.key for d in plan.devices()}
        self.excluded = {d.key for d in self.devices if d.key not in keys}
        self.experts_in_ram = {h.layers for h in plan.expert_homes}
        self._endpoint_order = [d.endpoint for d in plan.devices() if d.endpoint]
        self._set(plan, record=False, intent=True)

    def _set(self, plan: Plan | None, *, record: bool, intent: bool = True) -> None:
        """Show ``plan``; ``record``: as an undo step; ``intent``: as what the user made (its
        counts are re-applied when the nodes change; devices not in it keep theirs, at 0 if
        they are in the cluster now)."""
        self.plan = plan
        if intent and plan is not None:
            present = {d.key for d in self.devices}
            self._intent = {k: c for k, c in self._intent.items() if k not in present}
            self._intent.update({d.key: c for d, c in plan.assignments})
        if record:
            self._record()
        self._changed()
