"""Failover with real processes: a worker is hurt while a chat reply streams; the supervisor
must name the node within 5 s, serve again on the survivors within 30 s on the same endpoint,
and keep the transcript (the cut reply marked interrupted). Two of the four faults run here, each
on a fresh cluster; ``bench/faults.py`` runs all four and prints the table."""

from __future__ import annotations

import pytest
from resilience.faults import LINK_DOWN, RPC_KILL, run_fault
from lan import Lan, can_build_lan

OK, WHY = can_build_lan()

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def check(result) -> None:
    report = "\n".join(f"{t:7.2f}s {kind:<16} {msg}" for t, kind, msg in result.events)
    assert result.detect_s is not None and result.detect_s <= 5.0, report
    assert result.recover_s is not None and result.recover_s <= 30.0, report
    assert result.transcript_ok, report


async def test_rpc_worker_killed_mid_reply(engine, demo_model, tmp_path):
    result = await run_fault(RPC_KILL, engine, demo_model, tmp_path)
    check(result)
    assert "b (127.0.0.1) was lost: its RPC worker" in result.lost_message


@pytest.mark.netns
@pytest.mark.skipif(not OK, reason=WHY)
async def test_link_down_mid_reply_then_the_node_returns(engine, demo_model, tmp_path):
    with Lan(["a", "b"]) as lan:
        result = await run_fault(LINK_DOWN, engine, demo_model, tmp_path, lan, rejoin=True)
    check(result)
    assert "its agent does not answer" in result.lost_message
    assert result.returned_s is not None and result.returned_s <= 10.0
