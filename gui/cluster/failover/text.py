"""The failover supervisor's events and losses in the user's words.

This is the one place where failover speaks: the supervisor (:mod:`gui.cluster.failover.supervisor`) and
the health checks (:mod:`gui.cluster.nodes.health`) produce facts — :class:`FailoverEvent`,
:class:`~gui.cluster.nodes.health.Loss` — and the app's banner and status line, the log, the chat's
interrupted-reply note and ``herd up`` all read them through these functions. The sentences are
translated (context ``Failover``), so a zh_CN window shows them in Chinese and the CLI in English.
"""

from __future__ import annotations

import math

from agent.i18n import translate
from gui.cluster.failover.events import OPT_REJOIN, EventKind, FailoverEvent, WaitReason
from gui.cluster.nodes.health import Loss, LossCause


def describe_event(ev: FailoverEvent) -> str:
    """``ev`` in one sentence."""
    kind = ev.kind
    if kind == EventKind.LOST:
        return translate("Failover", "{node} ({host}) was lost: {why}").format(
            node=ev.node, host=ev.host, why=describe_loss(ev.loss) if ev.loss is not None else "?")
    if kind == EventKind.SERVER_EXITED:
        return translate("Failover", "llama-server stopped: {why}").format(why=_exit_reason(ev.error))
    if kind == EventKind.REPLANNED:
        if ev.back:
            why = translate("Failover", "{names} is back").format(names=_names(ev.back))
            return translate("Failover", "new plan on {where} ({why})").format(where=_where(ev.nodes), why=why)
        return translate("Failover", "new plan on {where}").format(where=_where(ev.nodes))
    if kind == EventKind.NO_FIT:
        return translate(
            "Failover", "the model does not fit on what is left ({misfits}). Options: wait for "
            "{names} to come back, or run with more layers on this computer (slow, may swap)").format(
            misfits="; ".join(ev.misfits), names=_names(ev.lost) or translate("Failover", "the lost node"))
    if kind == EventKind.COUNTDOWN_TICK:
        return translate("Failover", "relaunching on {where} in {seconds} s").format(
            where=_where(ev.nodes), seconds=math.ceil(ev.seconds or 0))
    if kind == EventKind.CANCELLED:
        return translate("Failover", "automatic relaunch cancelled")
    if kind == EventKind.RELAUNCHING:
        return (translate("Failover", "relaunching llama-server on {url} with more layers on this computer")
                if ev.forced else translate("Failover", "relaunching llama-server on {url}")).format(url=ev.url)
    if kind == EventKind.RECOVERED:
        names = _names(ev.nodes) or translate("Failover", "this computer alone")
        text = (translate("Failover", "serving again at {url} on {names}, {seconds} s after the loss")
                .format(url=ev.url, names=names, seconds=f"{ev.seconds:.1f}") if ev.seconds is not None
                else translate("Failover", "serving again at {url} on {names}").format(url=ev.url, names=names))
        if ev.problems:
            text += translate("Failover", " (placement differs from the plan: {problems})").format(
                problems="; ".join(ev.problems))
        return text
    if kind == EventKind.RECOVERY_FAILED:
        return (translate("Failover", "relaunch failed: {why}") if ev.relaunched
                else translate("Failover", "could not relaunch: {why}")).format(why=ev.error)
    if kind == EventKind.WAITING:
        return describe_wait(ev)
    if kind == EventKind.RETURNED:
        if OPT_REJOIN in ev.options:
            return translate("Failover", "{names} is back; re-plan with it to use it again").format(
                names=_names(ev.back))
        return translate("Failover", "{names} is back; re-planning with it").format(names=_names(ev.back))
    return str(kind)


def describe_wait(ev: FailoverEvent) -> str:
    """What a ``waiting`` event waits for."""
    if ev.wait == WaitReason.FOR_CHOICE:
        return translate("Failover", "auto-recover is off: relaunch on {where} when you choose").format(
            where=_where(ev.nodes))
    if ev.wait == WaitReason.CANCELLED:
        return translate("Failover", "waiting: relaunch on {where} when you choose").format(where=_where(ev.nodes))
    if ev.wait == WaitReason.QUICK_FAILURES:
        return translate(
            "Failover", "llama-server stopped {count} times within {seconds} s of a relaunch ({why}); "
            "not relaunching again").format(count=ev.count, seconds=f"{ev.seconds or 0:.0f}",
                                            why=_exit_reason(ev.error))
    return (translate("Failover", "waiting for {names} to come back").format(names=_names(ev.lost)) if ev.lost
            else translate("Failover", "waiting for a node to come back"))


def describe_loss(loss: Loss) -> str:
    """Why ``loss.node`` counts as lost."""
    if loss.cause == LossCause.AGENT_SILENT:
        return translate("Failover", "its agent does not answer: {why}").format(
            why=_agent_problem(loss.detail or "", loss.timeout))
    if loss.cause == LossCause.WORKER_REPLACED:
        if loss.detail:
            return translate("Failover", "its RPC worker was lost ({why}); llama-server's connection to "
                                         "it is gone").format(why=loss.detail)
        return translate("Failover", "its RPC worker crashed and its agent restarted it; llama-server's "
                                     "connection to it is gone")
    state = translate("Failover", "stopped") if loss.cause == LossCause.WORKER_STOPPED \
        else translate("Failover", "crashed")
    return (translate("Failover", "its RPC worker is {state} ({why})") if loss.detail
            else translate("Failover", "its RPC worker is {state}")).format(state=state, why=loss.detail)


def interruption_note(losses: list[Loss], server_error: str | None) -> str:
    """Why a reply in flight was cut off, for the conversation's interrupted message."""
    if losses:
        return "; ".join(translate("Failover", "{node} was lost").format(node=loss.node.name) for loss in losses)
    return translate("Failover", "llama-server stopped ({why})").format(why=_exit_reason(server_error))


def _exit_reason(error: str | None) -> str:
    return error or translate("Failover", "it exited")


def _where(names) -> str:
    return ", ".join(names) if names else translate("Failover", "this computer alone")


def _names(names) -> str:
    return ", ".join(names)


def _agent_problem(text: str, timeout: float) -> str:
    """Why an agent did not answer, in words a user can act on."""
    if "Timeout" in text:
        return translate("Failover", "no reply within {seconds} s (is the PC asleep, switched off or off "
                                     "the network?)").format(seconds=f"{timeout:g}")
    if "ConnectError" in text or "refused" in text.lower():
        return translate("Failover", "connection refused (herd-agent is not running there any more)")
    return text if len(text) <= 160 else text[:157] + "…"
