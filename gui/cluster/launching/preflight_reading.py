"""What the checks before a launch found, read once for the app's Start and for ``herd up``.

:func:`read_findings` turns the doctor's :class:`~gui.cluster.launching.doctor.Finding` list
(from :func:`~gui.cluster.launching.request.check_request` or
:func:`~gui.cluster.launching.request.preflight`) into a :class:`PreflightReading`: what blocks
the launch, what is only a warning, and the one :class:`Refusal` that says why it may not go.
Both the window and ``herd up`` used to pick the findings apart each in its own way (#33); the
words they show stay theirs (a status line, a line on stderr), the reading is this one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from gui.cluster.launching import doctor as doc


class Refusal(str, Enum):
    """Why a launch may not go ahead (the first that applies, in this order)."""

    ALREADY_RUNNING = "already-running"    # this process already runs a cluster
    DOES_NOT_FIT = "does-not-fit"          # the plan does not fit the devices' memory
    ENGINE_MISSING = "engine-missing"      # this computer's llama.cpp engine is missing
    NODES_UNANSWERED = "nodes-unanswered"  # a node of the plan is not reachable, not paired or unknown
    BLOCKED = "blocked"                    # anything else the doctor calls an error

    def __str__(self) -> str:
        return self.value


#: finding codes that mean "a node of the plan cannot be used now" (the app offers to start
#: without it, #37)
UNANSWERED_CODES = frozenset({"unreachable", "not-paired", "unknown-endpoint"})


@dataclass(frozen=True)
class PreflightReading:
    """The findings of the checks before a launch, sorted by what they mean for it.

    Attributes:
        findings: every finding, in the order the checks made them.
        blocking: the errors: any one stops the launch.
        warnings: what would work badly (a Wi-Fi link…), in order.
    """

    findings: tuple[doc.Finding, ...]
    blocking: tuple[doc.Finding, ...]
    warnings: tuple[doc.Finding, ...]

    @property
    def may_start(self) -> bool:
        """True when nothing blocks the launch."""
        return not self.blocking

    @property
    def noteworthy(self) -> tuple[doc.Finding, ...]:
        """The errors and warnings, in the order they were found (what ``herd up`` prints)."""
        return tuple(f for f in self.findings if f.severity != doc.OK)

    @property
    def misfits(self) -> tuple[doc.Finding, ...]:
        """The devices the plan does not fit (code ``does-not-fit``)."""
        return tuple(f for f in self.blocking if f.code == "does-not-fit")

    @property
    def unanswered(self) -> tuple[str, ...]:
        """Names of the plan's nodes that cannot be used now (not reachable, not paired, or an
        endpoint no known node serves), each once."""
        return tuple(dict.fromkeys(f.subject for f in self.blocking if f.code in UNANSWERED_CODES))

    @property
    def silent_only(self) -> tuple[str, ...]:
        """The nodes that did not answer, when nothing else blocks the launch (then starting
        without them would work); empty otherwise."""
        if self.blocking and all(f.code == "unreachable" for f in self.blocking):
            return tuple(dict.fromkeys(f.subject for f in self.blocking))
        return ()

    def refusal(self) -> Refusal | None:
        """Why the launch may not go (None: it may)."""
        if not self.blocking:
            return None
        if self.misfits:
            return Refusal.DOES_NOT_FIT
        if any(f.code == "engine-missing" for f in self.blocking):
            return Refusal.ENGINE_MISSING
        if self.unanswered:
            return Refusal.NODES_UNANSWERED
        return Refusal.BLOCKED


def read_findings(findings: Iterable[doc.Finding]) -> PreflightReading:
    """Sort the findings of the checks before a launch by what they mean for it."""
    findings = tuple(findings)
    return PreflightReading(findings=findings,
                            blocking=tuple(f for f in findings if f.severity == doc.ERROR),
                            warnings=tuple(f for f in findings if f.severity == doc.WARNING))
