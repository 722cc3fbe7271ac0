"""The failover supervisor's events are facts, and their words are made in one place
(gui/cluster/failover/text.py): every kind of event and every reason to wait has its own
sentence built from the event's facts."""

from __future__ import annotations

from gui.cluster.failover import events as E
from gui.cluster.failover import supervisor as F
from gui.cluster.failover.events import EventKind, FailoverEvent, WaitReason
from gui.cluster.failover.text import describe_event, interruption_note
from gui.cluster.nodes.health import Loss, LossCause
from gui.cluster.nodes.records import Node

B = Node(id="n-b", name="b", host="10.0.0.3", api_port=50051)

#: one event of every kind, with the facts the supervisor gives it, and what its sentence says
EXAMPLES = [
    (FailoverEvent(EventKind.LOST, node="b", host="10.0.0.3", loss=Loss(B, LossCause.WORKER_CRASHED, "exit 134")),
     "b (10.0.0.3) was lost: its RPC worker is crashed (exit 134)"),
    (FailoverEvent(EventKind.SERVER_EXITED, error="killed by signal SIGKILL"),
     "llama-server stopped: killed by signal SIGKILL"),
    (FailoverEvent(EventKind.SERVER_EXITED), "llama-server stopped: it exited"),
    (FailoverEvent(EventKind.REPLANNED, nodes=("a", "c")), "new plan on a, c"),
    (FailoverEvent(EventKind.REPLANNED, nodes=("a", "b"), back=("b",)), "new plan on a, b (b is back)"),
    (FailoverEvent(EventKind.REPLANNED), "new plan on this computer alone"),
    (FailoverEvent(EventKind.NO_FIT, misfits=("a: needs 5 GiB, has 3 GiB",), lost=("b",)),
     "the model does not fit on what is left (a: needs 5 GiB, has 3 GiB). Options: wait for b to come "
     "back, or run with more layers on this computer (slow, may swap)"),
    (FailoverEvent(EventKind.COUNTDOWN_TICK, nodes=("a",), seconds=4.2), "relaunching on a in 5 s"),
    (FailoverEvent(EventKind.CANCELLED), "automatic relaunch cancelled"),
    (FailoverEvent(EventKind.RELAUNCHING, url="http://127.0.0.1:8080"),
     "relaunching llama-server on http://127.0.0.1:8080"),
    (FailoverEvent(EventKind.RELAUNCHING, url="http://127.0.0.1:8080", forced=True),
     "relaunching llama-server on http://127.0.0.1:8080 with more layers on this computer"),
    (FailoverEvent(EventKind.RECOVERED, url="http://127.0.0.1:8080", nodes=("a",), seconds=6.27,
                   problems=("blk.3 on CPU, planned on a",)),
     "serving again at http://127.0.0.1:8080 on a, 6.3 s after the loss (placement differs from the plan: "
     "blk.3 on CPU, planned on a)"),
    (FailoverEvent(EventKind.RECOVERED, url="http://127.0.0.1:8080"),
     "serving again at http://127.0.0.1:8080 on this computer alone"),
    (FailoverEvent(EventKind.RECOVERY_FAILED, error="worker-busy"), "could not relaunch: worker-busy"),
    (FailoverEvent(EventKind.RECOVERY_FAILED, error="port in use", relaunched=True), "relaunch failed: port in use"),
    (FailoverEvent(EventKind.WAITING, wait=WaitReason.FOR_NODES, lost=("b", "c")), "waiting for b, c to come back"),
    (FailoverEvent(EventKind.WAITING, wait=WaitReason.FOR_NODES), "waiting for a node to come back"),
    (FailoverEvent(EventKind.WAITING, wait=WaitReason.FOR_CHOICE, nodes=("a",)),
     "auto-recover is off: relaunch on a when you choose"),
    (FailoverEvent(EventKind.WAITING, wait=WaitReason.CANCELLED, nodes=("a",)),
     "waiting: relaunch on a when you choose"),
    (FailoverEvent(EventKind.WAITING, wait=WaitReason.QUICK_FAILURES, count=3, seconds=F.QUICK_FAILURE_S,
                   error="exit 1"),
     "llama-server stopped 3 times within 30 s of a relaunch (exit 1); not relaunching again"),
    (FailoverEvent(EventKind.RETURNED, node="b", back=("b",)), "b is back; re-planning with it"),
    (FailoverEvent(EventKind.RETURNED, node="b", back=("b",), options=(E.OPT_REJOIN,)),
     "b is back; re-plan with it to use it again"),
]


def test_every_event_is_said_from_its_facts():
    for ev, said in EXAMPLES:
        assert describe_event(ev) == said
        assert describe_event(ev) == said  # what the banner, the log and herd up read


def test_every_kind_and_every_wait_has_an_example():
    assert {ev.kind for ev, _ in EXAMPLES} == set(EventKind)
    assert {ev.wait for ev, _ in EXAMPLES if ev.wait} == set(WaitReason)


def test_an_interrupted_reply_names_the_lost_nodes_or_the_exit():
    assert interruption_note([Loss(B, LossCause.AGENT_SILENT)], None) == "b was lost"
    assert interruption_note([], "exit 2") == "llama-server stopped (exit 2)"
    assert interruption_note([], None) == "llama-server stopped (it exited)"
