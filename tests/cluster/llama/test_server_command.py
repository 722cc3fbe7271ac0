"""llama-server's command line, the one place it is built: the whole-number split, what the
placement check needs from the log, the user's options, and a spec that never changes after it
is made."""

from __future__ import annotations

import dataclasses

import pytest

from gui.cluster.llama.server_command import ServerOptions, ServerSpec
from gui.cluster.planning.plan import Device, Plan

GiB = 1 << 30


def test_spec_args_use_whole_number_split_and_what_placement_needs(tmp_path):
    spec = ServerSpec(model=tmp_path / "m.gguf", rpc=["10.0.0.2:50052", "10.0.0.3:50052"], ngl=7, tensor_split=[3, 4], options=ServerOptions(ctx=1024, port=18000, extra_args=["--threads", "2"]))
    a = spec.args()
    assert a[a.index("--rpc") + 1] == "10.0.0.2:50052,10.0.0.3:50052"
    assert a[a.index("--fit") + 1] == "off"
    assert a[a.index("-ngl") + 1] == "7" and a[a.index("-ts") + 1] == "3,4"
    # -lv 4: device order, offload summary and weights per device, without -lv 5's per-token lines.
    assert "--metrics" in a and a[a.index("-lv") + 1] == "4"
    assert a[-2:] == ["--threads", "2"]


def test_verify_layers_asks_for_the_per_layer_lines(tmp_path):
    devs = [Device(f"n{i}", f"n{i}", f"127.0.0.1:{5000 + i}", 0, "CPU", GiB, GiB) for i in range(2)]
    plan = Plan(8, 1, [(devs[0], 3), (devs[1], 5)])
    assert ServerSpec.for_plan(plan, tmp_path / "m.gguf", ServerOptions(ctx=512)).verbosity == 4
    spec = ServerSpec.for_plan(plan, tmp_path / "m.gguf", ServerOptions(ctx=512), verify_layers=True)
    assert spec.args()[spec.args().index("-lv") + 1] == "5"


def test_a_spec_is_never_changed_only_made_anew(tmp_path):
    spec = ServerSpec(model=tmp_path / "m.gguf", rpc=["10.0.0.2:50052"], ngl=5, tensor_split=[5],
                      options=ServerOptions(ctx=512, extra_args=("-np", "1")))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.rpc = ("127.0.0.1:1",)
    routed = spec.with_rpc(["127.0.0.1:40001"])
    safer = spec.with_extra("--no-repack", "-np")
    assert spec.rpc == ("10.0.0.2:50052",) and spec.options.extra_args == ("-np", "1")
    assert routed.rpc == ("127.0.0.1:40001",) and routed.args()[routed.args().index("--rpc") + 1] == "127.0.0.1:40001"
    assert safer.options.extra_args == ("-np", "1", "--no-repack")  # each once
    assert safer.args()[-3:] == ["-np", "1", "--no-repack"]


def test_the_endpoint_url_is_where_a_client_reaches_it(tmp_path):
    anywhere = ServerSpec(model=tmp_path / "m.gguf", options=ServerOptions(host="0.0.0.0", port=18080))
    assert anywhere.url == "http://127.0.0.1:18080"
    assert ServerSpec(model=tmp_path / "m.gguf", options=ServerOptions(host="192.168.1.5", port=9000)).url == \
        "http://192.168.1.5:9000"


@pytest.mark.parametrize("args, sequences, unified, ubatch, swa_full", [
    ((), 4, True, 512, False),                        # -np auto: 4 sequences, one unified cache
    (("-np", "1"), 1, False, 512, False),
    (("--parallel=2",), 2, False, 512, False),        # an explicit -np: a stream per sequence
    (("-np", "2", "-kvu"), 2, True, 512, False),
    (("-kvu", "-no-kvu"), 4, False, 512, False),      # the last one given wins
    (("-ub", "256"), 4, True, 256, False),
    (("-ub", "1024", "-b", "128"), 4, True, 128, False),  # the micro-batch is at most the batch
    (("--swa-full", "--threads", "2"), 4, True, 512, True),
])
def test_the_server_arguments_that_size_the_cache(args, sequences, unified, ubatch, swa_full):
    shape = ServerOptions(ctx=8192, extra_args=args).cache_shape()
    assert (shape.ctx, shape.sequences, shape.unified, shape.ubatch, shape.swa_full) == \
        (8192, sequences, unified, ubatch, swa_full)


def test_a_cache_argument_that_is_not_a_number_says_so():
    with pytest.raises(ValueError, match="not a number"):
        ServerOptions(extra_args=("-np", "many")).cache_shape()
