"""Profiles: round trip, field-named errors, differences from the live cluster, start scripts
(the shell ones run for real: workers and llama-server started from them place the layers as
the profile's plan says)."""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
from conftest import free_port

from agent.engine_lookup import PINNED_BUILD
from gui.cluster.launching.placement import check_placement
from gui.cluster.launching.profile import (
    Profile,
    ProfileError,
    applied_message,
    blocking,
    describe_split,
    diff_profile,
    export_profile,
    load_profile,
    make_profile,
    profile_from_json,
    rebind_plan,
    refusal,
    save_profile,
    settings_differences,
    split_differences,
    start_scripts,
    write_start_scripts,
)
from gui.cluster.llama.model import file_sha256, inspect_model
from gui.cluster.llama.placement_log import parse_placement
from gui.cluster.llama.server_command import ServerOptions, ServerSpec, layout_args
from gui.cluster.nodes.records import Node
from gui.cluster.planning.plan import Device, Plan

GiB = 1 << 30


def nodes_and_plan(ports=(50052, 50053)):
    nodes = [Node(id="id-a", name="alpha", host="127.0.0.1", api_port=7001, rpc_port=ports[0],
                  engine=str(PINNED_BUILD), fingerprint="fp-a", paired=True),
             Node(id="id-b", name="beta", host="127.0.0.1", api_port=7002, rpc_port=ports[1],
                  engine=str(PINNED_BUILD), fingerprint="fp-b", paired=True)]
    a = Device("id-a", "alpha", f"127.0.0.1:{ports[0]}", 0, "CPU", GiB, 2 * GiB)
    b = Device("id-b", "beta", f"127.0.0.1:{ports[1]}", 0, "CPU", GiB, 2 * GiB)
    return nodes, Plan(8, 1, [(a, 3), (b, 5)])


class FakeEngine:
    """What make_profile reads from an agent.engine_lookup.Engine."""
    build = PINNED_BUILD
    rpc_proto = "7.0.0"


@pytest.fixture
def profile(demo_model) -> Profile:
    nodes, plan = nodes_and_plan()
    return make_profile(plan, inspect_model(demo_model), nodes, engine=FakeEngine(), ctx=2048,
                        port=8181, extra_args=["--temp", "0"], sha256=file_sha256(demo_model))


def test_save_and_load_round_trip(profile, tmp_path):
    path = save_profile(tmp_path / "sub" / "cluster.json", profile)
    assert load_profile(path) == profile
    assert sorted(os.listdir(path.parent)) == ["cluster.json"]  # no temp file left behind
    doc = json.loads(path.read_text())
    assert doc["version"] == 1 and doc["format"] == "llama-herd-profile"
    assert doc["nodes"]["id-a"] == {"name": "alpha", "address": "127.0.0.1", "api_port": 7001,
                                    "fingerprint": "fp-a", "hardware": "CPU 2048 MiB"}
    assert doc["engine"] == {"build": PINNED_BUILD, "rpc_proto": "7.0.0"}
    # where the endpoint listens is not the profile's to say (#32)
    assert doc["server"] == {"ctx": 2048, "port": 8181, "extra_args": ["--temp", "0"]}


@pytest.mark.parametrize("extra, named", [
    (["--rpc", "127.0.0.1:9", "-ngl", "99"], "--rpc"),
    (["--host", "0.0.0.0"], "--host"),
    (["--host=0.0.0.0"], "--host"),
    (["--log-file", "/home/me/notes.txt"], "--log-file"),
    (["--slot-save-path=/tmp/slots"], "--slot-save-path"),
    (["--temp", "--rpc=127.0.0.1:9"], "--rpc"),
])
def test_a_profile_with_arguments_herd_owns_or_does_not_list_is_refused(profile, tmp_path, extra, named):
    """A profile is data, not a command line (#32): its extra arguments are tuning options or it
    is not read at all, and the error names the argument."""
    doc = profile.to_json()
    doc["server"]["extra_args"] = extra
    path = tmp_path / "sent.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ProfileError, match=r"^profile\.server\.extra_args: .*" + named):
        load_profile(path)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::"])
def test_a_profile_does_not_choose_where_the_endpoint_listens(profile, tmp_path, host):
    doc = profile.to_json()
    doc["server"]["host"] = host
    path = tmp_path / "sent.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ProfileError, match=r"^profile\.server\.host: .*this computer's own setting"):
        load_profile(path)
    doc["server"]["host"] = "127.0.0.1"  # as older herds wrote it: read, and the default kept
    path.write_text(json.dumps(doc))
    assert load_profile(path).server.host == "127.0.0.1"


def test_a_deeply_nested_profile_is_refused_in_words(profile, tmp_path):
    doc = json.dumps(profile.to_json())
    path = tmp_path / "deep.json"
    path.write_text(doc[:-1] + ', "x": ' + "[" * 50_000 + "]" * 50_000 + "}")
    with pytest.raises(ProfileError, match="nested deeper than 32 levels"):
        load_profile(path)


def test_failed_save_leaves_the_old_file_and_no_temp(profile, tmp_path):
    target = tmp_path / "cluster.json"
    target.mkdir()  # a folder in the way: os.replace fails for real
    with pytest.raises(OSError):
        save_profile(target, profile)
    assert sorted(os.listdir(tmp_path)) == ["cluster.json"] and target.is_dir()


def test_exported_profile_runs_the_launchers_own_command_line(demo_model, tmp_path):
    """The profile keeps the launch's typed server options, and its command line is the one the
    launcher builds (with --metrics, -lv and the model id), not a second builder's."""
    nodes, plan = nodes_and_plan()
    options = ServerOptions(ctx=1024, port=9000, alias="demo", extra_args=("--temp", "0.7"))
    path = export_profile(tmp_path / "p.json", plan=plan, model=inspect_model(demo_model), nodes=nodes,
                          engine=FakeEngine(), server=options)
    prof = load_profile(path)
    assert prof.server == options
    assert prof.model.sha256 == file_sha256(demo_model) and prof.model.size == demo_model.stat().st_size
    launched = ServerSpec.for_plan(plan, demo_model.resolve(), options).args()
    assert prof.llama_server_args() == launched
    assert launched == ["-m", str(demo_model.resolve()), *layout_args(*plan.layout()), "-c", "1024", "--host", "127.0.0.1",
                        "--port", "9000", "--alias", "demo", "--metrics", "-lv", "4", "--temp", "0.7"]
    # without an alias the endpoint shows the file's name, never its path on this disk
    assert make_profile(plan, inspect_model(demo_model), nodes).llama_server_args()[-5:-3] == \
        ["--alias", demo_model.stem]


def _broken(profile: Profile, change) -> dict:
    doc = copy.deepcopy(profile.to_json())
    change(doc)
    return doc


@pytest.mark.parametrize("change, message", [
    (lambda d: d["plan"]["assignments"][1].__setitem__("count", "x"),
     r"^profile\.plan\.assignments\[1\]\.count: expected integer, got 'x'$"),
    (lambda d: d["plan"]["assignments"][0].__setitem__("count", True),
     r"^profile\.plan\.assignments\[0\]\.count: expected integer, got true$"),
    (lambda d: d["plan"]["assignments"][0].__setitem__("count", -1),
     r"^profile\.plan\.assignments\[0\]\.count: must not be negative"),
    (lambda d: d["model"].pop("path"), r"^profile\.model\.path: missing$"),
    (lambda d: d["model"].__setitem__("size", "big"), r"^profile\.model\.size: expected integer"),
    (lambda d: d.__setitem__("version", 2), r"^profile\.version: unknown profile version 2 .*newer herd"),
    (lambda d: d.__setitem__("version", "1"), r"^profile\.version: expected integer, got '1'$"),
    (lambda d: d.pop("version"), r"^profile\.version: missing$"),
    (lambda d: d.__setitem__("format", "something"), r"not a llama-herd profile"),
    (lambda d: d["nodes"].__setitem__("id-a", "alpha"), r'^profile\.nodes\["id-a"\]: expected object'),
    (lambda d: d["nodes"].pop("id-b"), r"^profile\.plan\.assignments\[1\]\.device\.node_id: 'id-b' is not in"),
    (lambda d: d["plan"]["assignments"][0]["device"].__setitem__("endpoint", "nowhere"),
     r"^profile\.plan\.assignments\[0\]\.device: .*endpoint must be 'host:port'"),
    (lambda d: d["plan"].__setitem__("host_layers", 3), r"^profile\.plan: host 3 \+ device counts"),
    (lambda d: d["server"].__setitem__("port", 70000), r"^profile\.server\.port: must be 1…65535"),
    (lambda d: d["server"]["extra_args"].append(5), r"^profile\.server\.extra_args\[2\]: expected string"),
    (lambda d: d["model"].__setitem__("n_layer", 9), r"^profile\.plan\.n_layer: 8 does not match"),
])
def test_bad_fields_are_named(profile, change, message):
    with pytest.raises(ProfileError, match=message):
        profile_from_json(_broken(profile, change))


def test_unreadable_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "llama-herd-profile",\n "version": }')
    with pytest.raises(ProfileError, match=r"bad.json: not valid JSON \(line 2, column 13"):
        load_profile(bad)
    with pytest.raises(ProfileError, match="cannot read the profile"):
        load_profile(tmp_path / "missing.json")
    lst = tmp_path / "list.json"
    lst.write_text("[1, 2]")
    with pytest.raises(ProfileError, match="list.json: expected a JSON object"):
        load_profile(lst)


# -- differences from the live cluster -----------------------------------------------------------

def test_same_cluster_has_no_findings(profile, demo_model):
    nodes, _ = nodes_and_plan()
    assert diff_profile(profile, nodes, PINNED_BUILD, inspect_model(demo_model),
                        model_sha256=file_sha256(demo_model)) == []


def test_missing_node_different_build_and_other_model(profile, demo_model, tmp_path):
    from gui.cluster.llama.random_model import DemoShape, write_demo_model

    nodes, _ = nodes_and_plan()
    live = [nodes[0].with_(engine="9999")]  # beta is gone, alpha runs another build
    other = inspect_model(write_demo_model(tmp_path / "other.gguf", DemoShape(layers=4)))
    found = [str(f) for f in diff_profile(profile, live, 9999, other)]
    assert "error: beta: node is missing (id id-b, last at 127.0.0.1)" in found
    assert "error: alpha: runs llama.cpp build 9999, the profile needs 11434" in found
    assert "error: engine: this master runs llama.cpp build 9999, the profile was made with 11434" in found
    assert any(f.startswith("error: model: other model:") and "bytes" in f for f in found)
    assert "error: model: other model: 4 layers, the plan is for 8" in found
    assert [str(f) for f in diff_profile(profile, nodes, PINNED_BUILD, None)] == [
        f"error: model: {profile.model.path} is missing"]


def test_same_size_other_hash_unreachable_and_moved_nodes(profile, demo_model):
    nodes, _ = nodes_and_plan()
    live = [nodes[0].with_(reachable=False), nodes[1].with_(host="127.0.0.9", fingerprint="fp-new")]
    found = [str(f) for f in diff_profile(profile, live, PINNED_BUILD, inspect_model(demo_model),
                                          model_sha256="0" * 64)]
    assert "error: alpha: node does not answer at 127.0.0.1" in found
    assert "warning: beta: address changed from 127.0.0.1 to 127.0.0.9" in found
    assert "warning: beta: pairing key changed (the agent was reinstalled?)" in found
    assert "error: model: other model: its SHA-256 differs from the profile's" in found


def test_a_node_found_but_not_paired_is_an_error_that_pairing_fixes(profile, demo_model):
    nodes, _ = nodes_and_plan()
    info = inspect_model(demo_model)
    live = [nodes[0].with_(paired=False), nodes[1]]
    found = diff_profile(profile, live, PINNED_BUILD, info, reporting={"id-b"})
    # the one check the dialog shows and the window applies: alpha blocks, and says how to fix it
    assert [str(f) for f in blocking(found)] == ["error: alpha: node is not paired with this computer"]
    assert found[0].pair_with == "id-a" and "PIN" in found[0].advice
    assert refusal(found).splitlines() == [
        "This profile cannot be used now:", "",
        ("alpha: node is not paired with this computer — Press Pair and type the PIN its herd-agent shows "
         "(herd-agent pin on that computer).")]
    # paired now, but its agent's status (its devices) has not come in yet: still not usable
    found = diff_profile(profile, nodes, PINNED_BUILD, info, reporting={"id-b"})
    assert [str(f) for f in found] == ["error: alpha: node has not reported its devices yet"]
    assert not found[0].pair_with
    assert diff_profile(profile, nodes, PINNED_BUILD, info, reporting={"id-a", "id-b"}) == []
    # a silent node is told as silent, not also as "not reported"
    found = diff_profile(profile, [nodes[0].with_(reachable=False), nodes[1]], PINNED_BUILD, info,
                         reporting={"id-b"})
    assert [str(f) for f in found] == ["error: alpha: node does not answer at 127.0.0.1"]


def test_the_confirmation_names_the_model_and_the_split(profile):
    assert describe_split(profile, profile.plan) == "this computer 1, alpha 3, beta 5"
    text = applied_message(profile, profile.plan)
    assert text.startswith(f"Profile applied: {profile.model.name}, layer slots this computer 1, alpha 3, beta 5.")
    assert "press Start" in text
    # no host share: the host is not named; a node's two devices are named each
    a0, a1 = (Device("id-a", "alpha", "127.0.0.1:50052", i, f"GPU{i}", GiB, 2 * GiB) for i in (0, 1))
    plan = Plan(8, 0, [(a0, 4), (a1, 5)])
    assert describe_split(profile, plan) == "alpha GPU0 4, alpha GPU1 5"


def test_rebind_plan_follows_nodes_to_new_addresses(profile):
    nodes, _ = nodes_and_plan()
    moved = [nodes[0], nodes[1].with_(host="127.0.0.7", rpc_port=50999)]
    plan = rebind_plan(profile, moved)
    assert plan.rpc_endpoints() == ["127.0.0.1:50052", "127.0.0.7:50999"]
    assert plan.counts() == profile.plan.counts() and plan.host_layers == profile.plan.host_layers


# -- start scripts --------------------------------------------------------------------------------

def test_start_scripts_carry_the_plan(profile):
    scripts = start_scripts(profile)
    assert set(scripts) == {"start-workers.sh", "start-workers.bat", "start-master.sh", "start-master.bat"}
    for name in ("start-workers.sh", "start-master.sh"):
        subprocess.run(["sh", "-n"], input=scripts[name], text=True, check=True)  # valid shell syntax
    assert 'exec "$RPC_SERVER" -H 127.0.0.1 -p 50052 -d CPU ;;' in scripts["start-workers.sh"]
    assert "alpha|id-a)" in scripts["start-workers.sh"]
    ts = " ".join(layout_args(*profile.plan.layout()))
    alias = Path(profile.model.path).stem
    assert (f'-m "$MODEL" {ts} -c 2048 --host 127.0.0.1 --port 8181 --alias {alias} '
            '--metrics -lv 4 --temp 0') in scripts["start-master.sh"]
    bat = scripts["start-workers.bat"].split("\r\n")
    assert 'if /I "%~1"=="beta" goto worker1' in bat
    assert '"%RPC_SERVER%" -H 127.0.0.1 -p 50053 -d CPU' in bat
    mbat = scripts["start-master.bat"]
    # cmd.exe splits arguments at commas, so lists are quoted.
    assert ('"%LLAMA_SERVER%" -m "%MODEL%" --rpc "127.0.0.1:50052,127.0.0.1:50053" --fit off -ngl 8 '
            f'-ts "3,5" -c 2048 --host 127.0.0.1 --port 8181 --alias {alias} --metrics -lv 4 --temp 0\r\n') in mbat


def test_batch_quoting_of_paths_with_spaces_and_percent(profile):
    odd = Profile(nodes=profile.nodes, model=profile.model.__class__(path=r"C:\My Models\50% off.gguf", size=1),
                  plan=profile.plan, server=profile.server, engine_build=PINNED_BUILD)
    mbat = start_scripts(odd)["start-master.bat"]
    assert 'set "MODEL=C:\\My Models\\50%% off.gguf"' in mbat
    msh = start_scripts(odd)["start-master.sh"]
    assert 'MODEL="${1:-C:\\My Models\\50% off.gguf}"' in msh


def _wait_listening(port: int, deadline: float) -> None:
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"nothing listens on 127.0.0.1:{port}")
            time.sleep(0.05)


@pytest.mark.engine
def test_scripts_start_a_cluster_that_places_layers_as_planned(engine, demo_model, procs, tmp_path):
    ports = (free_port(), free_port())
    nodes, plan = nodes_and_plan(ports)
    prof = make_profile(plan, inspect_model(demo_model), nodes, engine=engine, ctx=256,
                        port=free_port())
    folder = tmp_path / "scripts"
    write_start_scripts(folder, prof, verify_layers=True)
    env = dict(os.environ, LLAMA_CPP_DIR=str(engine.llama_server.parent))
    for name in ("alpha", "id-b"):  # by name and by id
        procs.popen(["sh", folder / "start-workers.sh", name], env=env,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    for port in ports:
        _wait_listening(port, deadline)
    log_path = tmp_path / "master.log"
    with open(log_path, "wb") as log:
        proc = procs.popen(["sh", folder / "start-master.sh"], env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while parse_placement(log_path.read_text(errors="replace")).n_slots < plan.n_slots:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no placement from llama-server:\n{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)
    check = check_placement(plan, parse_placement(log_path.read_text(errors="replace")))
    assert check.ok and check.per_layer, check.problems
    usage = subprocess.run(["sh", folder / "start-workers.sh", "nobody"], env=env, capture_output=True, text=True)
    assert usage.returncode == 2 and "one of: alpha beta" in usage.stderr


def test_the_review_says_how_the_split_differs_from_the_running_one_and_the_editors(profile):
    """#37 item 14: "✔ Matches the live cluster" was shown while the editor held another split.
    The same split (endpoints moved) is no difference; another count per device is, against the
    split serving now and against the editor's, each said once."""
    plan = profile.plan
    moved = rebind_plan(profile, [{"id": "id-a", "host": "127.0.0.9"}])
    assert split_differences(profile, plan, moved, moved) == []
    (a, ca), (b, cb) = plan.assignments
    other = Plan(plan.n_layer, plan.host_layers, ((a, ca + 1), (b, cb - 1)))
    running_differs = split_differences(profile, plan, other, other)
    assert [f.message for f in running_differs] == [f"differs from the split serving now ({describe_split(profile, other)})"]
    editor_differs = split_differences(profile, plan, None, other)
    assert [f.message for f in editor_differs] == [f"differs from the split in the editor ({describe_split(profile, other)})"]
    both = split_differences(profile, plan, plan, other)
    assert [f.message.split(" (")[0] for f in both] == ["differs from the split in the editor"]
    assert all(f.severity == "warning" for f in running_differs + editor_differs + both)


def test_the_review_says_what_the_profile_changes_in_this_pcs_settings(profile):
    same = ServerOptions(ctx=2048, port=8181, extra_args=("--temp", "0"))
    assert [f.message for f in settings_differences(profile, same)] == ["the profile adds llama-server options: --temp 0"]
    here = ServerOptions(ctx=4096, port=8080, extra_args=("-np", "1"))
    said = [f.message for f in settings_differences(profile, here)]
    assert said == ["the profile adds llama-server options: --temp 0", "replaces this computer's llama-server options -np 1",
                    "context 2048 replaces 4096", "port 8181 replaces 8080"]
