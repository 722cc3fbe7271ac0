"""People at once (#34 item 7): each person gets the whole context the user chose, so the KV
cache the memory fit plans grows with them exactly as the real llama-server allocates it (its
``llama_kv_cache: CPU KV buffer size`` line), with the real SmolLM2 weights, host only."""

from __future__ import annotations

import pytest
from conftest import free_port

from gui.cluster.llama import server_process as L
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.server_command import ServerOptions, ServerSpec
from gui.cluster.llama.server_start import machine_args
from gui.cluster.planning.plan import Plan, estimate

pytestmark = [pytest.mark.engine]

MiB = 1 << 20
#: llama-server prints MiB with two decimals.
ROUNDING_BYTES = MiB // 200


async def _allocated_kv(engine, model, options: ServerOptions) -> tuple[int, list[str]]:
    """KV bytes the real llama-server reports for ``options``, and its command line."""
    spec = ServerSpec(model=model, ngl=0, options=options).with_extra("--threads", "1",
                                                                      *machine_args(engine.llama_server))
    srv = L.ServerProcess(engine.llama_server, spec)
    await srv.start()
    try:
        await srv.wait_ready(120)
        return srv.placement().memory()["host"]["kv"], spec.args()
    finally:
        await srv.stop()


@pytest.mark.parametrize("people", [1, 3])
async def test_the_fit_plans_the_kv_cache_of_each_person_as_llama_server_allocates_it(engine, smollm2, people):
    info = inspect_model(smollm2)
    options = ServerOptions(ctx=1000, port=free_port(), people=people)  # 1000: padded to 1024 per person
    got, args = await _allocated_kv(engine, smollm2, options)
    assert args[args.index("-np") + 1] == str(people) and args[args.index("-c") + 1] == str(1000 * people)
    planned = estimate(Plan(info.n_layer, info.n_layer + 1, ()), info, options.cache_shape())[-1].kv_bytes
    assert abs(planned - got) <= ROUNDING_BYTES, (people, planned / MiB, got / MiB)
    # each person has the context the user chose: one person's cache, times the people
    one = estimate(Plan(info.n_layer, info.n_layer + 1, ()), info, ServerOptions(ctx=1000, people=1).cache_shape())[-1]
    assert planned == people * one.kv_bytes
