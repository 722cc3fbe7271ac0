"""An RPC worker that dies while llama-server loads the model is named, with the step and its
last lines — against two real agents, their real workers and the real llama-server.

The worker is killed for real (SIGKILL to its ggml-rpc-server) as soon as llama-server reports
the buffers it allocated, i.e. while the weights travel to the workers.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from cluster.agents import pair_all, start_agent
from conftest import free_port

from gui.cluster.launching.launcher import ClusterLauncher
from gui.cluster.llama.server_process import LaunchError
from gui.cluster.launching.request import LaunchRequest
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.random_model import DemoShape, write_demo_model
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.nodes.discovery import Discovery
from gui.cluster.nodes.records import TokenStore
from gui.cluster.planning import plan as P

pytestmark = [pytest.mark.engine, pytest.mark.slow]


async def test_worker_killed_while_the_weights_travel_is_named(engine, procs, tmp_path):
    # Wide enough that sending the weights takes a moment after the buffers are allocated.
    model = write_demo_model(tmp_path / "m.gguf", DemoShape(layers=8, embd=1536, ff=4096, vocab=8192,
                                                           quant="Q8_0"))
    agents = [start_agent(procs.popen, tmp_path, name, mdns=False) for name in ("a", "b")]
    disc = Discovery(browse=False, tokens=TokenStore(tmp_path / "tokens.json"))
    try:
        nodes, devices = await pair_all(disc, agents)
        plan = P.plan_from_split(inspect_model(model), devices, {"a": 4, "b": 5})
        launcher = ClusterLauncher(engine.llama_server,
                                   LaunchRequest(plan, inspect_model(model), ServerOptions(ctx=512, port=free_port())),
                                   nodes, disc.client)
        start = asyncio.ensure_future(launcher.start(120))
        deadline = time.monotonic() + 60
        while not (launcher.server and any("model buffer size" in ln for ln in launcher.server.startup_log)):
            assert time.monotonic() < deadline and not start.done(), "llama-server never allocated its buffers"
            await asyncio.sleep(0.005)
        victim = next(h for h in launcher.workers if h.node.name == "b")
        os.kill((await victim.client.status())["rpc"]["pid"], signal.SIGKILL)
        with pytest.raises(LaunchError) as err:
            await start
        said = str(err.value)
        assert err.value.code == "worker-died", said
        assert said.startswith("b: its RPC worker died while llama-server was ")
        assert "loading the model's weights" in said or "setting up the context" in said, said
        assert "killed by signal 9" in said and "it last printed: " in said
        # Everything the launch started is stopped again (the launcher undoes itself).
        assert launcher.server.returncode is not None and launcher.workers == []
    finally:
        await disc.stop()
