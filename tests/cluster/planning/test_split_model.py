"""The split being edited, without a window (gui.cluster.planning.split_model): each gesture one undo
step, left-out devices, worker order, and which split survives a change of nodes."""

from __future__ import annotations

import json
import os

import pytest

from gui.cluster.llama.model import inspect_model
from gui.cluster.planning.plan import Device, Plan, plan_by_memory
from gui.cluster.planning.split_model import SplitModel

GiB = 1 << 30


def _devices(*names: str, free: int = GiB) -> list[Device]:
    return [Device(f"id-{n}", n, f"127.0.0.1:{50052 + 2 * i}", 0, "CPU", free, 2 * GiB) for i, n in enumerate(names)]


@pytest.fixture
def info(demo_model):
    return inspect_model(demo_model)


@pytest.fixture
def split(info):
    s = SplitModel(ctx=512)
    s.seen = []
    s.subscribe(s.seen.append)
    s.set_cluster(info, _devices("a", "b"), host_free_bytes=GiB)
    return s


def test_it_starts_by_memory_and_tells_its_views(split, info):
    assert split.plan == plan_by_memory(info, split.included(), 512, GiB)
    assert split.seen[-1] == split.plan and split.fits and not split.problems()
    assert not split.can_undo()


def test_each_gesture_is_one_undo_step(split, info):
    first = split.plan
    n = info.n_slots
    assert split.set_counts(0, [3, n - 3])
    edited = split.plan
    # a drag previews many plans and records one step when the handle is let go
    for k in (4, 5, 6):
        assert split.preview_counts(0, [k, n - k])
    split.commit()
    dragged = split.plan
    assert dragged.counts() == [6, n - 6]
    assert split.undo() and split.plan == edited
    assert split.undo() and split.plan == first
    assert not split.undo()
    assert split.redo() and split.redo() and split.plan == dragged and not split.redo()
    assert not split.set_counts(0, [1])  # the wrong number of counts changes nothing
    assert split.plan == dragged


def test_leaving_a_device_out_splits_again_over_the_rest(split, info):
    split.set_included("id-b/0", False)
    assert split.excluded == {"id-b/0"}
    assert [d.node_name for d, c in split.plan.assignments if c] == ["a"]
    split.undo()
    assert split.excluded == set() and len([c for c in split.plan.counts() if c]) == 2


def test_moving_a_worker_changes_the_rpc_order_and_keeps_the_counts(split, info):
    n = info.n_slots
    split.set_counts(1, [3, n - 4])
    assert split.move_worker(1, 0)
    assert [d.node_name for d, _ in split.plan.assignments] == ["b", "a"]
    assert {d.node_name: c for d, c in split.plan.assignments} == {"a": 3, "b": n - 4}
    assert not split.move_worker(0, 0)  # the same worker: nothing to move


def test_a_users_split_survives_new_nodes_and_a_computed_one_does_not(split, info):
    n = info.n_slots
    split.set_counts(0, [2, n - 2])
    split.set_cluster(info, _devices("a", "b", free=GiB // 2), host_free_bytes=GiB)  # memory moved
    assert split.plan.counts() == [2, n - 2]  # the user's split stays
    split.reset_by_memory()
    split.set_cluster(info, _devices("a", "b", "c"), host_free_bytes=GiB)
    assert len(split.plan.assignments) == 3  # computed again over the new devices


def test_a_node_that_drops_out_for_a_moment_gets_its_slots_back(split, info):
    n = info.n_slots
    split.set_counts(0, [3, n - 3])
    split.set_cluster(info, _devices("a"), host_free_bytes=GiB)  # b's Wi-Fi drops
    assert split.plan.counts() == [3] and split.plan.host_layers == n - 3  # its slots on the host
    split.set_cluster(info, _devices("a", "b"), host_free_bytes=GiB)  # and b is back
    assert split.plan.counts() == [3, n - 3] and split.plan.host_layers == 0
    # while it is gone the user moves slots about; on its return it gets what the host has
    split.set_cluster(info, _devices("a"), host_free_bytes=GiB)
    assert split.set_counts(n - 5, [5])
    split.set_cluster(info, _devices("a", "b"), host_free_bytes=GiB)
    assert split.plan.counts() == [5, n - 5] and split.plan.host_layers == 0  # (b had n - 3; the host n - 5)
    # a split computed by memory is computed again, nothing remembered
    split.reset_by_memory()
    split.set_cluster(info, _devices("a"), host_free_bytes=GiB)
    split.set_cluster(info, _devices("a", "b"), host_free_bytes=GiB)
    assert split.plan == plan_by_memory(info, split.included(), 512, GiB)


def test_a_plan_for_another_model_is_not_applied(split, info):
    other = Plan(info.n_layer + 4, info.n_layer + 5)
    assert not split.apply_plan(other)
    fastest = Plan(info.n_layer, 0, [(d, c) for d, c in zip(split.included(), (info.n_slots, 0))])
    assert split.apply_plan(fastest) and split.plan == fastest and split.can_undo()


def test_a_larger_context_changes_the_fit_not_the_split(split, info):
    before = split.plan
    need = split.fits[0].need_bytes
    split.set_ctx(4 * 512)
    assert split.plan == before and split.fits[0].need_bytes > need


# -- the split made for a model comes back with the model -----------------------------------------

@pytest.fixture
def other(tmp_path):
    from gui.cluster.llama.random_model import DemoShape, write_demo_model

    return inspect_model(write_demo_model(tmp_path / "other-4L.gguf", DemoShape(layers=4)))


def test_a_hand_made_split_comes_back_with_its_model(split, info, other):
    n = info.n_slots
    assert split.set_counts(2, [3, n - 5])
    made = split.plan.counts()
    devices = list(split.devices)
    split.set_cluster(other, devices, GiB)  # another model: split by memory for it
    assert split.plan.n_layer == other.n_layer
    split.set_cluster(inspect_model(info.path), devices, GiB)  # back, as from Recent models
    assert split.plan.counts() == made and split.plan.host_layers == 2
    assert not split.can_undo()  # a fresh start of the history, like any change of model
    # an edit after it is what is remembered next
    assert split.set_counts(1, [4, n - 5])
    split.set_cluster(other, devices, GiB)
    split.set_cluster(info, devices, GiB)
    assert split.plan.counts() == [4, n - 5]


def test_it_comes_back_only_over_the_same_devices(split, info, other):
    n = info.n_slots
    assert split.set_counts(2, [3, n - 5])
    split.set_cluster(other, _devices("a", "b"), GiB)
    three = _devices("a", "b", "c")
    split.set_cluster(info, three, GiB)
    assert split.plan == plan_by_memory(info, split.included(), 512, GiB)


def test_by_memory_forgets_the_split_made_for_the_model(split, info, other):
    n = info.n_slots
    assert split.set_counts(2, [3, n - 5])
    split.reset_by_memory()
    devices = list(split.devices)
    split.set_cluster(other, devices, GiB)
    split.set_cluster(info, devices, GiB)
    assert split.plan == plan_by_memory(info, split.included(), 512, GiB)


def test_the_memory_survives_a_restart_when_the_devices_report_late(split, info, other):
    n = info.n_slots
    split.set_included("id-a/0", False)
    assert split.set_counts(2, [n - 2])  # (b alone: a is left out)
    made = split.plan
    stored = split.remembered()
    assert [e["model"] for e in stored] == [stored[0]["model"]] and stored[0]["excluded"] == ["id-a/0"]
    again = SplitModel(ctx=512)
    again.load_remembered(json.loads(json.dumps(stored)) + [{"model": "x"}, "junk"])  # junk is skipped
    again.set_cluster(info, [], GiB)  # at start the model opens before the nodes report
    assert again.plan.host_layers == info.n_slots
    again.set_cluster(info, _devices("a"), GiB)  # one of two: not the devices it was made over
    assert again.plan != made
    again.set_cluster(info, _devices("a", "b"), GiB)
    assert again.plan == made and again.excluded == {"id-a/0"}


def test_a_file_replaced_at_the_same_path_is_another_model(tmp_path, other):
    from gui.cluster.llama.random_model import DemoShape, write_demo_model

    path = write_demo_model(tmp_path / "m.gguf", DemoShape(layers=8))
    s = SplitModel(ctx=512)
    devices = _devices("a", "b")
    s.set_cluster(inspect_model(path), devices, GiB)
    n = s.model.n_slots
    assert s.set_counts(2, [3, n - 5])
    s.set_cluster(other, devices, GiB)
    write_demo_model(path, DemoShape(layers=8))  # written again: another file at the same path
    os.utime(path, ns=(1, 1))  # (its time set apart, should the clock not have moved)
    s.set_cluster(inspect_model(path), devices, GiB)
    assert s.plan == plan_by_memory(s.model, s.included(), 512, GiB)
