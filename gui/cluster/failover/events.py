"""What the failover supervisor tells its watchers, as data.

A :class:`FailoverEvent` says what happened (its :class:`EventKind`) and the facts of it — which
node, why, which nodes a new plan uses, how long is left — but no sentence: the words are made
at the edge, by :func:`gui.cluster.failover.text.describe_event`, for the app's banner, the log
and ``herd up`` alike. The state machine that makes these
events is :class:`gui.cluster.failover.supervisor.ClusterSupervisor`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum


class EventKind(str, Enum):
    """What a :class:`FailoverEvent` reports."""

    LOST = "lost"                      # a node was lost (``node``, ``host``, ``loss``)
    SERVER_EXITED = "server-exited"    # llama-server stopped and no node was to blame (``error``)
    REPLANNED = "replanned"            # a new plan (``nodes``, ``lines``; ``back``: why)
    NO_FIT = "no-fit"                  # the model does not fit the survivors (``misfits``, ``lost``)
    COUNTDOWN_TICK = "countdown"       # ``seconds`` left before the relaunch on ``nodes``
    CANCELLED = "cancelled"            # the countdown was cancelled
    RELAUNCHING = "relaunching"        # llama-server is starting again at ``url`` (``forced``)
    RECOVERED = "recovered"            # serving again (``url``, ``nodes``, ``seconds``, ``problems``)
    RECOVERY_FAILED = "recovery-failed"  # a relaunch failed (``error``; ``relaunched``: how far it got)
    WAITING = "waiting"                # waiting for a node or a choice (``wait``, ``options``)
    RETURNED = "returned"              # a lost node answers again (``back``, ``options``: rejoin)

    def __str__(self) -> str:
        return self.value


class WaitReason(str, Enum):
    """Why the supervisor waits (the ``wait`` of a :attr:`EventKind.WAITING` event)."""

    FOR_NODES = "for-nodes"            # for the ``lost`` nodes to come back (or any node, if none)
    FOR_CHOICE = "for-choice"          # auto-recover is off: relaunch on ``nodes`` when the user says
    CANCELLED = "cancelled"            # the countdown was cancelled: relaunch on ``nodes`` when the user says
    QUICK_FAILURES = "quick-failures"  # llama-server died ``count`` times right after a relaunch (``error``)

    def __str__(self) -> str:
        return self.value


# Options offered with NO_FIT / WAITING / RETURNED.
OPT_WAIT = "wait"            # keep waiting for the lost node(s)
OPT_HOST = "host"            # run anyway, more layers on this computer
OPT_RECOVER = "recover"      # relaunch on the survivors now
OPT_REJOIN = "rejoin"        # re-plan with the node that came back


@dataclass(frozen=True)
class FailoverEvent:
    """Something the user should see, as facts (its sentence: :func:`~gui.cluster.failover.text.describe_event`).

    Attributes:
        kind: what happened (:class:`EventKind`).
        node, host: the node's name and address, for node events (``lost``, ``returned``).
        loss: why the node counts as lost (:class:`gui.cluster.nodes.health.Loss`; ``lost``).
        error: llama-server's or the relaunch's own words (``server-exited``,
            ``recovery-failed``, a ``waiting`` after quick failures).
        seconds: countdown left (``countdown``) or time since the loss (``recovered``).
        options: choices the user has now (``wait``, ``host``, ``recover``, ``rejoin``).
        lines: details (a new plan's lines).
        nodes: the names of the nodes the plan this event is about uses (``replanned``,
            ``countdown``, ``recovered``, a ``waiting`` for the user's choice); it may include a
            lost node that answers again (its agent restarted its worker). Empty: this
            computer alone.
        lost: the names of the nodes still lost (``no-fit``, a ``waiting`` for nodes).
        back: the names of the nodes that came back (``returned``; a ``replanned`` because of them).
        misfits: what does not fit where (``no-fit``).
        wait: why the supervisor waits (``waiting``).
        count: how many quick failures (a ``waiting`` after them).
        url: the endpoint (``relaunching``, ``recovered``).
        forced: the relaunch puts more layers on this computer than fit well (``relaunching``).
        relaunched: a ``recovery-failed`` after llama-server was started again (the relaunch
            itself failed), not before (the re-plan failed).
        problems: how the placement differs from the plan (``recovered``).
        at: ``time.monotonic()`` when it happened.
    """

    kind: EventKind
    node: str | None = None
    host: str | None = None
    loss: object | None = None
    error: str | None = None
    seconds: float | None = None
    options: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    lost: tuple[str, ...] = ()
    back: tuple[str, ...] = ()
    misfits: tuple[str, ...] = ()
    wait: WaitReason | None = None
    count: int = 0
    url: str | None = None
    forced: bool = False
    relaunched: bool = False
    problems: tuple[str, ...] = ()
    at: float = field(default_factory=time.monotonic)
