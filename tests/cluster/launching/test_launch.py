"""The one launch pipeline's pure parts: the typed command line, the request, which nodes a plan
uses, and the checks before a launch (no network; the launches themselves are tested against
real agents and llama-server in test_cli.py, test_worker_death.py and tests/gui)."""

from __future__ import annotations

import dataclasses

import pytest

from gui.cluster.llama.server_process import LaunchError
from gui.cluster.launching.request import LaunchRequest, check_request, nodes_for_plan
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.server_command import ServerOptions, ServerSpec, layout_args, model_alias
from gui.cluster.nodes.records import Node
from gui.cluster.planning.plan import Device, Plan

GiB = 1 << 30


def _nodes(**kw) -> list[Node]:
    return [Node(id="id-a", name="alpha", host="127.0.0.1", api_port=7001, rpc_port=50052, paired=True, **kw),
            Node(id="id-b", name="beta", host="127.0.0.1", api_port=7002, rpc_port=50053, paired=True, **kw)]


def _plan(order=("b", "a"), counts=(4, 5), host=0, free=GiB) -> Plan:
    devs = {"a": Device("id-a", "alpha", "127.0.0.1:50052", 0, "CPU", free, 2 * GiB),
            "b": Device("id-b", "beta", "127.0.0.1:50053", 0, "CPU", free, 2 * GiB)}
    return Plan(8, host, [(devs[k], c) for k, c in zip(order, counts)])


class _Engine:
    complete = True


def test_the_plans_layout_goes_in_typed_and_comes_out_once():
    plan = _plan(counts=(3, 5), host=1)
    assert plan.layout() == (["127.0.0.1:50053", "127.0.0.1:50052"], 8, [3, 5])
    assert layout_args(*plan.layout()) == layout_args(*plan.layout()) == \
        ["--rpc", "127.0.0.1:50053,127.0.0.1:50052", "--fit", "off", "-ngl", "8", "-ts", "3,5"]
    spec = ServerSpec.for_plan(plan, "/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf",
                               ServerOptions(ctx=2048, port=9000, extra_args=("-np", "1")))
    rpc, ngl, ts = plan.layout()
    assert (spec.rpc, spec.ngl, spec.tensor_split) == (tuple(rpc), ngl, tuple(ts))
    a = spec.args()
    assert a[:2] == ["-m", "/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf"]
    assert a[2:2 + len(layout_args(*plan.layout()))] == layout_args(*plan.layout())
    assert a[a.index("--alias") + 1] == "Qwen2.5-7B-Instruct-Q4_K_M"
    assert a[-2:] == ["-np", "1"]
    assert spec.options == ServerOptions(ctx=2048, port=9000, alias="Qwen2.5-7B-Instruct-Q4_K_M",
                                         extra_args=("-np", "1"))


@pytest.mark.parametrize("path, alias", [
    ("/m/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "Qwen2.5-7B-Instruct-Q4_K_M"),
    ("C:/models/Llama-3.3-70B-Q4_K_M-00001-of-00003.gguf", "Llama-3.3-70B-Q4_K_M"),
    ("/m/plain", "plain"),
])
def test_the_endpoint_names_the_model_not_its_path(path, alias):
    assert model_alias(path) == alias


@pytest.mark.parametrize("change, words", [
    (dict(ctx=0), "context size must be positive"),
    (dict(port=70000), "port must be 1…65535"),
])
def test_bad_server_options_are_refused_by_name(change, words):
    with pytest.raises(ValueError, match=words):
        ServerOptions(**change)


def test_a_relaunch_keeps_everything_but_the_plan(demo_model):
    req = LaunchRequest(_plan(), inspect_model(demo_model), ServerOptions(ctx=512, port=9001), threads=2,
                        verify_layers=True)
    other = req.with_plan(_plan(order=("a",), counts=(9,)))
    assert (other.options, other.threads, other.verify_layers, other.model) == \
        (req.options, 2, True, req.model)
    assert other.spec().rpc == ("127.0.0.1:50052",) and other.spec().verbosity == 5
    assert req.with_options(req.options.with_extra("--no-repack")).spec().args()[-1] == "--no-repack"
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.plan = other.plan  # a request does not change under a launch that uses it


def test_nodes_for_plan_follow_the_rpc_order_and_name_a_stranger():
    nodes = _nodes()
    assert [n.name for n in nodes_for_plan(_plan(), nodes)] == ["beta", "alpha"]
    assert [n.name for n in nodes_for_plan(_plan(order=("a",), counts=(9,)), nodes)] == ["alpha"]
    with pytest.raises(LaunchError, match="127.0.0.1:50053") as err:
        nodes_for_plan(_plan(), nodes[:1])
    assert err.value.code == "unknown-endpoint"


def test_check_request_names_each_thing_in_the_way(demo_model):
    info = inspect_model(demo_model)
    ok = LaunchRequest(_plan(), info, ServerOptions(ctx=512))
    assert check_request(ok, _nodes(), _Engine(), host_free_bytes=GiB) == []

    nodes = _nodes()
    nodes[0] = dataclasses.replace(nodes[0], reachable=False)
    nodes[1] = dataclasses.replace(nodes[1], paired=False)
    found = {(f.subject, f.code) for f in check_request(ok, nodes, _Engine(), host_free_bytes=GiB)}
    assert found == {("alpha", "unreachable"), ("beta", "not-paired")}

    # a context whose KV cache cannot fit in the memory the devices report
    huge = LaunchRequest(_plan(free=1 << 20), info, ServerOptions(ctx=info.context_length or 4096))
    codes = [f.code for f in check_request(huge, _nodes(), _Engine(), host_free_bytes=1 << 20)]
    assert "does-not-fit" in codes

    class Missing:
        complete = False
    assert [f.code for f in check_request(ok, _nodes(), Missing(), host_free_bytes=GiB)] == ["engine-missing"]
    assert [f.code for f in check_request(ok, _nodes()[:1], _Engine(), host_free_bytes=GiB)] == ["unknown-endpoint"]
