"""``herd plan --draft``, ``herd export --draft`` and ``herd up`` with a saved speculation, through
the real ``herd`` program (#35): the choice shown with its reason, on the command line it prints,
in the JSON and the profile; a draft that cannot work refused in words before anything starts."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
from cluster.model_matrix import real_gemma3
from e2e.herd_cli import herd

from gui.cluster.launching.profile import load_profile
from gui.cluster.llama.random_model import DemoShape, vocab_tokenizer, write_demo_model


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    e["HERD_CONFIG_DIR"] = str(tmp_path / "master-config")
    e["HOME"] = str(tmp_path / "home")  # the models "on this PC" are the test's own
    e["XDG_DATA_HOME"] = str(tmp_path / "home" / ".local" / "share")
    e.pop("LLAMA_CACHE", None)
    e.pop("HF_HOME", None)
    e.pop("HF_HUB_CACHE", None)
    return e


@pytest.fixture
def models(tmp_path):
    """A target in one folder, a draft with its vocabulary in llama.cpp's download cache."""
    target = write_demo_model(tmp_path / "models" / "target.gguf", DemoShape(layers=8, embd=256, vocab=4096))
    draft = write_demo_model(tmp_path / "home" / ".cache" / "llama.cpp" / "small-draft.gguf",
                             DemoShape(layers=2, embd=64), tokenizer=vocab_tokenizer(target), seed=1)
    return target, draft


def test_plan_draft_auto_finds_the_draft_on_this_pc_and_shows_the_choice(models, env, tmp_path):
    target, draft = models
    r = herd(["plan", "--model", target, "--draft", "auto", "--ctx", "1024", "--no-mdns"], env)
    assert r.returncode == 0, r.stderr
    assert "speculation: draft model small-draft.gguf, 3 tokens per pass" in r.stdout, r.stdout
    assert "the smallest model on this PC with the target's vocabulary" in r.stdout
    assert "(of which the draft model" in r.stdout  # its memory, planned on the host
    master = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("master: "))
    argv = shlex.split(master.split("master: ", 1)[1])
    assert argv[argv.index("-md") + 1] == str(draft) and argv[argv.index("--spec-type") + 1] == "draft-simple"

    r = herd(["plan", "--model", target, "--draft", "auto", "--no-mdns", "--json"], env)
    data = json.loads(r.stdout)
    assert data["speculation"]["kind"] == "draft" and data["speculation"]["draft"] == str(draft)

    r = herd(["plan", "--model", target, "--no-mdns"], env)  # without --draft: none
    assert "speculation: none" in r.stdout and "-md" not in r.stdout

    r = herd(["export", "--model", target, "--draft", "ngram", "--no-mdns", "-o", tmp_path / "p.json"], env)
    assert r.returncode == 0, r.stderr
    assert load_profile(tmp_path / "p.json").speculation.kind == "ngram"


def test_a_draft_with_another_vocabulary_is_refused_with_the_reason(models, env, smollm2, tmp_path):
    target, _ = models
    gemma = real_gemma3(tmp_path / "gemma")
    r = herd(["plan", "--model", gemma, "--draft", smollm2, "--no-mdns"], env)
    assert r.returncode == 2
    assert (f"--draft {smollm2}: {smollm2.name} cannot draft for {gemma.name}: different tokenizer: gpt2 vs llama"
            in r.stderr), r.stderr
    r = herd(["plan", "--model", target, "--draft", "mtp", "--no-mdns"], env)
    assert r.returncode == 2 and "carries no multi-token-prediction heads" in r.stderr, r.stderr
    r = herd(["plan", "--model", gemma, "--draft", "auto", "--no-mdns"], env)
    assert r.returncode == 0 and "speculation: none (no model on this PC has the target's vocabulary" in r.stdout


@pytest.mark.engine
@pytest.mark.slow
def test_plan_fastest_tries_the_draft_on_the_cluster_and_keeps_it_only_if_measured_faster(models, env, procs,
                                                                                          tmp_path, engine):
    from cluster.agents import start_agent

    target, draft = models
    env["HERD_ENGINE_DIR"] = str(Path(engine.llama_server).parent)  # (HOME is the test's own)
    agent = start_agent(procs.popen, tmp_path, "alpha", mdns=False)
    assert herd(["pair", agent.api_url, "--pin", agent.pin()], env).returncode == 0
    r = herd(["plan", "--model", target, "--fastest", "--draft", "auto", "--ctx", "512", "--no-mdns",
              "--threads", "1"], env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Fastest: trying speculation by draft model small-draft.gguf" in r.stdout, r.stdout
    # how far the trial is, on stderr: every measurement counted, the side named
    steps = [ln for ln in r.stderr.splitlines() if ln.startswith("Fastest: measuring ")]
    assert [int(ln.split(": ")[2].split(" of ")[0]) for ln in steps] == list(range(1, len(steps) + 1)), r.stderr
    assert len(steps) >= 6 and all(f" of {len(steps)} measurements done" in ln for ln in steps), steps
    assert steps[0].startswith("Fastest: measuring without speculation: ")
    assert steps[-1].startswith("Fastest: measuring draft model small-draft.gguf"), steps
    line = next(ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith("speculation: "))
    assert "measured" in line and "predicted" in line and "Without speculation a token costs" in line, line
    on = "faster, so it is on" in line
    assert on == line.startswith("speculation: draft model small-draft.gguf"), line
    assert on == ("-md" in r.stdout.split("master: ", 1)[1]), r.stdout
    assert on == ("(of which the draft model" in r.stdout), r.stdout  # the memory of what is planned
    r = herd(["plan", "--model", target, "--fastest", "--draft", "ngram", "--ctx", "512", "--no-mdns", "--json"],
             env, timeout=600)
    data = json.loads(r.stdout)  # only JSON on stdout
    assert "measured" in data["speculation"]["reason"] and data["speculation"]["kind"] in ("ngram", "none")


@pytest.mark.engine
@pytest.mark.slow
def test_up_serves_with_the_draft_and_its_profile_keeps_it(models, env, procs, engine, tmp_path):
    import signal
    import subprocess

    import httpx
    from conftest import free_port
    from e2e.herd_cli import HERD, HerdUp

    target, draft = models
    env["HERD_ENGINE_DIR"] = str(Path(engine.llama_server).parent)
    up = HerdUp(procs.popen(HERD + ["up", target, "--draft", str(draft), "--no-mdns", "--ctx", "512",
                                    "--port", str(free_port()), "--server-args", "-np 1"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    up.wait_for("Serving", 120)
    assert any(ln.startswith("Speculation: draft model small-draft.gguf") for ln in up.lines), up.lines
    started = next(ln for ln in up.lines if ln.startswith("Starting "))
    assert f"-md {draft} -ngld 0 -devd none" in started
    r = httpx.post(up.endpoint() + "/completion", json={"prompt": "one two", "n_predict": 16, "temperature": 0},
                   timeout=60)
    assert r.json()["timings"]["draft_n"] > 0
    # the running cluster's profile (what `herd export` saves) keeps the draft
    out = tmp_path / "running.json"
    assert herd(["export", "-o", out], env).returncode == 0
    assert load_profile(out).speculation.draft_path == draft
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=30) == 0, "\n".join(up.lines)

    # a plan saved by `herd plan --json` keeps its speculation for `herd up`
    port = str(free_port())
    r = herd(["plan", "--model", target, "--draft", "ngram", "--no-mdns", "--ctx", "512", "--port", port, "--json"], env)
    saved = tmp_path / "plan.json"
    saved.write_text(r.stdout)
    up = HerdUp(procs.popen(HERD + ["up", saved, "--no-mdns"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True))
    up.wait_for("Serving", 120)
    assert "--spec-type ngram-simple" in next(ln for ln in up.lines if ln.startswith("Starting "))
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=30) == 0, "\n".join(up.lines)
