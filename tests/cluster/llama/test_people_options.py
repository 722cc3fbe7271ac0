"""People at once as an option (#34 item 7): what it puts on llama-server's command line and in
the cache shape the fit plans, the words for a bad count, profiles that keep it, and
``herd plan --people`` planning the bigger cache (the real program, on the demo model)."""

from __future__ import annotations

import json
import os

import pytest
from e2e.herd_cli import herd

from gui.cluster.launching.profile import ProfileError, load_profile, make_profile, save_profile
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.server_command import ServerOptions, ServerSpec
from gui.cluster.planning.plan import Plan


def test_people_give_np_and_a_context_for_each():
    options = ServerOptions(ctx=1000, people=3)
    args = ServerSpec(model="m.gguf", options=options).args()
    assert args[args.index("-c") + 1] == "3000" and args[args.index("-np") + 1] == "3"
    shape = options.cache_shape()
    assert (shape.ctx, shape.sequences, shape.unified) == (3000, 3, False)
    # -kvu among the further arguments: one cache shared by the three, the same cells in all
    assert options.with_extra("-kvu").cache_shape().unified
    # not set: as before the setting, llama-server's own default (no -np, 4 sharing the context)
    plain = ServerSpec(model="m.gguf", options=ServerOptions(ctx=1000)).args()
    assert "-np" not in plain and plain[plain.index("-c") + 1] == "1000"
    assert ServerOptions(ctx=1000).cache_shape().sequences == 4


@pytest.mark.parametrize("people", [0, -1, 65, 2.5, "2", True])
def test_a_bad_count_of_people_is_refused_in_words(people):
    with pytest.raises(ValueError) as bad:
        ServerOptions(people=people)
    assert str(bad.value) == f"people at once must be a whole number from 1 to 64, not {people}"


@pytest.mark.parametrize("extra", [("-np", "2"), ("--parallel", "2"), ("--parallel=2",)])
def test_people_and_np_in_the_further_arguments_do_not_go_together(extra):
    with pytest.raises(ValueError, match="remove -np and keep people at once"):
        ServerOptions(people=2, extra_args=extra)


def test_a_profile_keeps_people_at_once(demo_model, tmp_path):
    info = inspect_model(demo_model)
    plan = Plan(info.n_layer, info.n_layer + 1, ())
    profile = make_profile(plan, info, [], server=ServerOptions(ctx=512, people=2))
    path = save_profile(tmp_path / "p.json", profile)
    assert load_profile(path).server.people == 2
    assert "people" not in make_profile(plan, info, [], server=ServerOptions(ctx=512)).server.to_json()
    doc = json.loads(path.read_text())
    doc["server"]["people"] = 0
    path.write_text(json.dumps(doc))
    with pytest.raises(ProfileError, match=r"profile\.server\.people: people at once must be a whole number"):
        load_profile(path)


@pytest.mark.engine
def test_herd_plan_with_people_plans_a_context_for_each(demo_model, tmp_path):
    env = {**os.environ, "HERD_CONFIG_DIR": str(tmp_path / "config")}

    def kv(*more: str) -> int:
        r = herd(["plan", "--model", demo_model, "--ctx", "1024", "--no-mdns", "--json", *more], env)
        assert r.returncode == 0, r.stderr
        return sum(f["kv_bytes"] for f in json.loads(r.stdout)["fits"])

    assert kv("--people", "3") == 3 * kv("--people", "1") > 0
    r = herd(["plan", "--model", demo_model, "--no-mdns", "--people", "0"], env)
    assert r.returncode == 2 and "--people: people at once must be a whole number from 1 to 64, not 0" in r.stderr
    assert "Traceback" not in r.stderr
