"""Node health during a launch, against real agents and their real RPC workers on loopback:
a worker that is stopped, killed and restarted, or an agent that stops answering, is a loss with
its cause; a node as llama-server left it is not."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from cluster.agents import one_paired_node, start_worker

from gui.cluster.nodes.health import LossCause, NodeHealth

pytestmark = pytest.mark.engine


async def test_a_node_as_llama_server_left_it_is_not_lost(procs, tmp_path):
    async with one_paired_node(procs, tmp_path) as (_agent, node, disc):
        health = NodeHealth(lambda n: disc.client(n, timeout=2.0), misses=2, timeout=2.0)
        try:
            await start_worker(health.client(node))
            await health.remember([node])
            assert await health.check(node) is None
            assert await health.check_all([node]) == []
            assert [n.name for n, _ in await health.answering([node])] == ["a"]
        finally:
            await health.close()


async def test_a_killed_worker_is_a_replaced_worker(procs, tmp_path):
    async with one_paired_node(procs, tmp_path) as (_agent, node, disc):
        health = NodeHealth(lambda n: disc.client(n, timeout=2.0))
        try:
            await start_worker(health.client(node))
            await health.remember([node])
            os.kill((await health.status(node)).rpc.pid, signal.SIGKILL)  # the agent restarts it
            loss = None
            for _ in range(100):
                loss = await health.check(node)
                if loss is not None:
                    break
                await asyncio.sleep(0.1)  # the agent notices its worker's death on its own time
            assert loss is not None and loss.node is node
            assert loss.cause in (LossCause.WORKER_REPLACED, LossCause.WORKER_CRASHED), loss
        finally:
            await health.close()


async def test_a_stopped_worker_is_lost_as_stopped(procs, tmp_path):
    async with one_paired_node(procs, tmp_path) as (_agent, node, disc):
        health = NodeHealth(lambda n: disc.client(n, timeout=2.0))
        try:
            await start_worker(health.client(node))  # no launch remembered: the worker's own state counts
            await health.client(node).rpc_stop()
            loss = await health.check(node)
            assert loss is not None and loss.cause == LossCause.WORKER_STOPPED
        finally:
            await health.close()


async def test_an_agent_that_stops_answering_is_lost_after_the_misses_allowed(procs, tmp_path):
    async with one_paired_node(procs, tmp_path) as (agent, node, disc):
        health = NodeHealth(lambda n: disc.client(n, timeout=1.0), misses=2, timeout=1.0)
        try:
            await start_worker(health.client(node))
            await health.remember([node])
            agent.proc.send_signal(signal.SIGSTOP)  # alive but silent, as a PC gone to sleep
            try:
                assert await health.check(node) is None  # one missed poll is not a loss yet
                loss = await health.check(node)
                assert loss is not None and loss.cause == LossCause.AGENT_SILENT and loss.detail
                assert await health.answering([node]) == []
            finally:
                agent.proc.send_signal(signal.SIGCONT)
            health.forget(node)
            health.reset_clients()
            assert await health.check(node) is None  # back: its missed polls no longer count
        finally:
            await health.close()
