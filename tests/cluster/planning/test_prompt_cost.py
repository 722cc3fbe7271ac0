"""The prompt term of the cost model: micro-batches, the hidden states of a whole micro-batch per
remote hop, the pipeline's overlap; Fastest for documents against Fastest for chat; and the
prediction against a real prompt through real RPC workers."""

from __future__ import annotations

import pytest
from cluster.planning.test_optimize import make_model
from cluster.rpc_workers import start_rpc_workers
from conftest import free_port

from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.random_model import DemoShape, write_demo_model
from gui.cluster.llama.server_command import ServerOptions, ServerSpec
from gui.cluster.llama.server_start import serving
from gui.cluster.planning import measure as M
from gui.cluster.planning.cost_model import DeviceSpeed, LinkSpeed, Measurements, prompt_cost, prompt_hop_bytes
from gui.cluster.planning.optimize import fastest
from gui.cluster.planning.plan import Device, Plan, PlanError

GiB = 1 << 30


def _dev(name, port, free=8 * GiB):
    return Device(name, name, f"10.0.0.{port}:50052", 0, "CPU", free, free)


def test_prompt_cost_counts_micro_batches_hops_and_the_pipeline():
    model = make_model(4, embd=1024, vocab=32000)
    a, b = _dev("a", 2), _dev("b", 3)
    bps = 100e6 / 8  # a 100 Mbit/s link
    speed = DeviceSpeed((0.01,) * 5, (0.001,) * 5)
    m = Measurements({"a": speed, "b": speed}, {"a": LinkSpeed(0.004, bps), "b": LinkSpeed(0.004, bps)},
                     host=speed)
    plan = Plan(4, 0, [(a, 2), (b, 3)])
    one = prompt_cost(plan, model, m, n_prompt=512)
    assert one.ubatches == (512,) and not one.host_s
    hop_a = 512 * 1024 * 4 * 2  # the micro-batch's hidden states in and out
    assert prompt_hop_bytes(model, 512, False) == hop_a
    assert prompt_hop_bytes(model, 512, True) == 512 * 1024 * 4 + 32000 * 4
    want_a = 512 * 2 * 0.001 + 0.004 + hop_a / bps
    want_b = 512 * 3 * 0.001 + 0.004 + prompt_hop_bytes(model, 512, True) / bps
    assert one.total_s == pytest.approx(want_a + want_b)
    # 2048 tokens: four micro-batches in one batch; the pipeline overlaps them (every slot on
    # devices, two devices), so the slower device sets the pace after the first
    four = prompt_cost(plan, model, m, n_prompt=2048)
    assert four.pipeline and four.batches == (4,)
    assert four.total_s == pytest.approx(want_a + want_b + 3 * max(want_a, want_b))
    # the host keeping a slot: no pipeline, every micro-batch passes every device in turn
    kept = prompt_cost(Plan(4, 1, [(a, 1), (b, 3)]), model, m, n_prompt=2048)
    assert not kept.pipeline and kept.host_s == pytest.approx(2048 * 0.001)
    # without a prompt measurement there is no prompt figure, and it says so
    with pytest.raises(PlanError, match="prompt"):
        prompt_cost(plan, model, Measurements({"a": DeviceSpeed((0.01,) * 5), "b": speed},
                                              m.links, host=speed))


def test_documents_leave_the_wifi_worker_out_where_chat_uses_it():
    # Two workers: "desk" on a 1 Gbit/s link, decoding 2.5× slower than "laptop" (less memory
    # bandwidth) but within 1.6× at prompts (matrix-matrix work, more cores); the laptop is
    # behind 100 Mbit/s Wi-Fi. A decode step sends a few kB over the link: the laptop's speed
    # wins. A 512-token prompt sends the micro-batch's hidden states, 512 × n_embd × 4 bytes
    # (8 MiB here) in and as much out of a middle device: over Wi-Fi that costs more than the
    # laptop saves.
    model = make_model(8, block=200 << 20, output=300 << 20, embd=4096, vocab=32000)
    desk, laptop = _dev("desk", 2), _dev("laptop", 3)
    slow = DeviceSpeed((0.020,) * 8 + (0.03,), (0.00025,) * 8 + (0.000375,))
    fast = DeviceSpeed((0.008,) * 8 + (0.012,), (0.00016,) * 8 + (0.00024,))
    m = Measurements({"desk": slow, "laptop": fast},
                     {"desk": LinkSpeed(0.0005, 118e6), "laptop": LinkSpeed(0.005, 11e6)})
    chat = fastest(model, [desk, laptop], m, ctx=2048)
    docs = fastest(model, [desk, laptop], m, ctx=2048, objective="documents")
    chat_counts = {d.node_name: c for d, c in chat.plan.assignments}
    docs_counts = {d.node_name: c for d, c in docs.plan.assignments}
    assert chat_counts.get("laptop", 0) == 9, chat.plan.describe()
    assert docs_counts.get("laptop", 0) == 0 and docs_counts["desk"] == 9, docs.plan.describe()
    # both figures for each plan, and each plan is best at what it was chosen for
    assert chat.prompt is not None and docs.prompt is not None
    assert chat.cost.tokens_per_s > docs.cost.tokens_per_s
    assert docs.prompt.total_s < chat.prompt.total_s
    assert chat.objective == "chat" and docs.objective == "documents"
    with pytest.raises(PlanError, match="optimises"):
        fastest(model, [desk, laptop], m, ctx=2048, objective="novels")


@pytest.mark.engine
async def test_the_prompt_term_predicts_a_real_prompt_through_two_workers(engine, procs, tmp_path):
    # Wide enough that a prompt's compute, not the fixed cost of a request, is what is timed.
    model = write_demo_model(tmp_path / "m.gguf", DemoShape(layers=8, embd=768, ff=2048, vocab=8192,
                                                           quant="Q8_0"))
    info = inspect_model(model)
    eps = start_rpc_workers(engine, procs, 2)
    speeds, links = {}, {}
    for ep in eps:
        link = M.probe_rpc_link(ep)
        c = await M.measure_compute(engine, model, ep, link_s=M.link_cost_s(link, model), tokens=8,
                                    runs=1, link=link, prompt_runs=2)
        assert c.prompt_n > 100 and len(c.prompt_slot_s) == info.n_layer + 1
        assert sum(c.prompt_slot_s) * c.prompt_n == pytest.approx(c.prompt_step_s - c.prompt_link_s)
        speeds[ep] = DeviceSpeed(c.slot_s, c.prompt_slot_s)
        links[ep] = LinkSpeed(link.rtt_s, link.throughput_bps)
        n_prompt = c.prompt_n
    devs = [Device(f"w{i}", f"w{i}", ep, 0, "CPU", GiB, GiB) for i, ep in enumerate(eps)]
    plan = Plan(8, 0, [(devs[0], 4), (devs[1], 5)])
    predicted = prompt_cost(plan, info, Measurements(speeds, links), n_prompt=n_prompt).total_s
    spec = ServerSpec.for_plan(plan, model, ServerOptions(ctx=512, port=free_port()))
    async with serving(engine.llama_server, spec, timeout=120) as server:
        runs = await M.prompt_times(server.url, 3)
    assert {t.prompt_n for t in runs} == {n_prompt}
    measured = min(t.prompt_ms for t in runs) / 1000.0
    print(f"prompt of {n_prompt} tokens: predicted {predicted:.3f} s, measured {measured:.3f} s")
    # the best of a few runs on a machine shared with other work: within a third
    assert abs(predicted / measured - 1) < 0.35, (predicted, measured)
