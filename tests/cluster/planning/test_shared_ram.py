"""Devices on one computer share its RAM: the fit check counts that RAM once (the demo's two
agents run on the master itself, so they and the host CPU are one PC)."""

from __future__ import annotations

import pytest

from gui.cluster.llama.model import inspect_model
from gui.cluster.nodes.records import Node
from gui.cluster.planning.devices import node_devices
from gui.cluster.planning.plan import MASTER_MACHINE, Plan, endpoint_machine, estimate, misfits, ram_machine

GiB = 1 << 30


@pytest.fixture(scope="module")
def demo_info(demo_model):
    return inspect_model(demo_model)


def _status(free: int) -> dict:
    return {"engine": {"backend": "cpu", "devices": [{"name": "CPU", "kind": "cpu", "free_bytes": free}]},
            "rpc": {"state": "stopped"}, "hardware": {"ram_total_bytes": 2 * free},
            "load": {"ram_free_bytes": free}}


def _devices(host_a: str, host_b: str, free: int):
    a = Node(id="id-a", name="demo-a", host=host_a, api_port=50050, rpc_port=50052)
    b = Node(id="id-b", name="demo-b", host=host_b, api_port=50060, rpc_port=50062)
    return node_devices(a, _status(free)) + node_devices(b, _status(free))


def _even_plan(info, devices) -> Plan:
    """The slots spread over the host and both devices, about a third each."""
    n = info.n_layer + 1
    return Plan.from_layout(info.n_layer, devices, [-1] * (n - 2 * (n // 3)) + [0] * (n // 3) + [1] * (n // 3))


def test_loopback_workers_are_the_master_and_others_are_their_host():
    assert endpoint_machine("127.0.0.1:50052") == MASTER_MACHINE == endpoint_machine("[::1]:50052")
    assert endpoint_machine("localhost:1") == MASTER_MACHINE
    assert endpoint_machine("10.0.0.2:50052") == "10.0.0.2" == endpoint_machine("10.0.0.2:50062")
    assert ram_machine(None) == MASTER_MACHINE


def test_three_devices_of_one_pc_do_not_fit_what_only_each_alone_would(demo_info):
    # What the demo showed: the host and two loopback workers each report the PC's free RAM.
    # Free RAM just above what the busiest one needs alone, well below what all three need.
    local = _devices("127.0.0.1", "127.0.0.1", free=1)
    ctx = 4096
    alone = max(f.need_bytes for f in estimate(_even_plan(demo_info, local), demo_info, ctx))
    local = _devices("127.0.0.1", "127.0.0.1", free=alone + 1)
    fits = estimate(_even_plan(demo_info, local), demo_info, ctx, host_free_bytes=alone + 1)
    total = sum(f.need_bytes for f in fits)
    assert total > alone + 1
    assert all(f.need_bytes <= f.free_bytes for f in fits)  # each alone would fit…
    assert all(not f.fits for f in fits)  # …but they are one PC's RAM
    assert [f.short_by_bytes for f in fits] == [total - alone - 1] * 3
    lines = misfits(fits)
    assert len(lines) == 3 and all("other devices on the same computer" in line for line in lines), lines


def test_two_pcs_each_have_their_own_ram(demo_info):
    far = _devices("10.0.0.2", "10.0.0.3", free=1)
    ctx = 4096
    alone = max(f.need_bytes for f in estimate(_even_plan(demo_info, far), demo_info, ctx))
    far = _devices("10.0.0.2", "10.0.0.3", free=alone + 1)
    fits = estimate(_even_plan(demo_info, far), demo_info, ctx, host_free_bytes=alone + 1)
    assert misfits(fits) == [] and all(f.shared_bytes == 0 for f in fits)
    # two workers on the same remote PC share it, and not the master's
    same = _devices("10.0.0.2", "10.0.0.2", free=alone + 1)
    fits = estimate(_even_plan(demo_info, same), demo_info, ctx, host_free_bytes=alone + 1)
    assert [f.fits for f in fits] == [False, False, True]
    assert fits[0].shared_bytes == fits[1].need_bytes and fits[2].shared_bytes == 0


def test_an_unused_device_shares_nothing_and_is_not_blamed(demo_info):
    local = _devices("127.0.0.1", "127.0.0.1", free=64 * GiB)
    n = demo_info.n_layer + 1
    plan = Plan.from_layout(demo_info.n_layer, local, [-1] * (n - 3) + [0] * 3)  # demo-b holds none
    fits = estimate(plan, demo_info, 512, host_free_bytes=64 * GiB)
    assert fits[1].need_bytes == 0 and fits[1].shared_bytes == 0
    assert fits[0].shared_bytes == fits[2].need_bytes and fits[2].shared_bytes == fits[0].need_bytes
