"""Speculation is kept (#35): a profile round-trips it and checks it like its other fields, its
start script carries it, and the failover relaunch request keeps the draft and plans its memory."""

from __future__ import annotations

import json

import pytest
from cluster.launching.test_profile import FakeEngine, nodes_and_plan

from gui.cluster.failover.policy import replan
from gui.cluster.launching.profile import ProfileError, load_profile, make_profile, save_profile, start_scripts
from gui.cluster.launching.request import LaunchRequest
from gui.cluster.llama.model import CacheShape, inspect_model
from gui.cluster.llama.random_model import DemoShape, vocab_tokenizer, write_demo_model
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.planning import plan as P
from gui.cluster.planning.speculation import DRAFT, NGRAM, Speculation
from gui.cluster.workspace import Workspace


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    target = write_demo_model(folder / "target.gguf", DemoShape(layers=8, embd=256, vocab=4096))
    draft = write_demo_model(folder / "draft.gguf", DemoShape(layers=2, embd=64), tokenizer=vocab_tokenizer(target))
    return target, draft


def test_a_profile_keeps_its_speculation(pair, tmp_path):
    target, draft = pair
    nodes, plan = nodes_and_plan()
    speculation = Speculation(DRAFT, draft_path=draft, draft_max=5).with_prediction(1.2, "slow links")
    profile = make_profile(plan, inspect_model(target), nodes, engine=FakeEngine(), speculation=speculation)
    path = save_profile(tmp_path / "p.json", profile)
    loaded = load_profile(path)
    assert loaded == profile and loaded.speculation == speculation
    args = loaded.llama_server_args()
    assert args[args.index("-md") + 1] == str(draft) and args[args.index("--spec-draft-n-max") + 1] == "5"
    assert f"-md {draft}" in start_scripts(loaded)["start-master.sh"]
    # none is not written at all: a profile without speculation reads as it always did
    plain = make_profile(plan, inspect_model(target), nodes, engine=FakeEngine())
    assert "speculation" not in plain.to_json() and plain.speculation == Speculation()


@pytest.mark.parametrize("section, words", [
    ({"kind": "draft"}, "profile.speculation: a draft model's file goes with"),
    ({"kind": "ngram", "draft_max": 100}, "profile.speculation: tokens drafted per pass must be a whole number"),
    ({"kind": "draft", "draft": ["/bin/sh"]}, "profile.speculation.draft must be the path of a model file"),
    ({"kind": "mtp", "args": "--rpc x"}, "profile.speculation: unknown field args"),
    ("draft", "profile.speculation must be an object"),
])
def test_a_profiles_speculation_is_checked_like_its_other_fields(pair, tmp_path, section, words):
    nodes, plan = nodes_and_plan()
    doc = make_profile(plan, inspect_model(pair[0]), nodes, engine=FakeEngine(),
                       speculation=Speculation(NGRAM)).to_json()
    doc["speculation"] = section
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    assert words in str(err.value)


def test_the_failover_relaunch_keeps_the_draft_and_its_memory(pair):
    target, draft = pair
    model = inspect_model(target)
    plan = P.plan_by_memory(model, [], 1024)
    speculation = Speculation(DRAFT, draft_path=draft)
    request = LaunchRequest(plan, model, ServerOptions(ctx=1024), speculation=speculation)
    shape = CacheShape(ctx=1024)
    host = P.estimate(plan, model, shape, draft=request.draft_model())[-1]
    # a host that holds the target and the draft fits; one that holds the target alone does not
    enough = host.need_bytes + host.headroom_bytes
    assert replan(request, [], shape, lambda: enough).misfits == []
    short = replan(request, [], shape, lambda: enough - host.draft_bytes // 2)
    (line,) = short.misfits
    assert line.startswith("host CPU") and "(of which the draft model" in line and "short by" in line
    relaunch = request.with_plan(short.plan)
    assert relaunch.speculation == speculation
    args = relaunch.spec().args()
    assert args[args.index("-md") + 1] == str(draft)


def test_the_apps_launch_request_carries_the_chosen_speculation(pair):
    target, draft = pair
    model = inspect_model(target)
    workspace = Workspace()
    workspace.open_model(model)
    events = []
    workspace.subscribe(events.append)
    plan = P.plan_by_memory(model, [], 1024)
    assert workspace.launch_request(plan).speculation == Speculation()
    workspace.set_speculation(Speculation(DRAFT, draft_path=draft))
    assert events == ["options"]
    assert workspace.launch_request(plan).speculation.draft_path == draft
