"""Speculation in the plan (#35): the choice, its command line, draft discovery on real files,
the draft's memory in the fit, and a real llama-server that drafts with a candidate herd found."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import gguf
import httpx
import numpy as np
import pytest
from cluster.model_matrix import real_gemma3
from cluster.rpc_workers import start_rpc_workers
from conftest import free_port

from gui.cluster.chat.client import chat
from gui.cluster.launching.placement import check_placement
from gui.cluster.launching.request import LaunchRequest, check_request
from gui.cluster.llama.gguf_header import SkippedValue, read_header
from gui.cluster.llama.model import CacheShape, inspect_model
from gui.cluster.llama.random_model import DemoShape, Tokenizer, vocab_tokenizer, write_demo_model
from gui.cluster.llama.server_args import ServerArgsError, check_extra_args
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.llama.server_start import serving
from gui.cluster.llama.vocabulary import TOKENS_KEY, mtp_layers, read_vocabulary
from gui.cluster.nodes.telemetry import Telemetry
from gui.cluster.planning import plan as P
from gui.cluster.planning.speculation import (
    DRAFT, MTP, NGRAM, ReplyDrafts, Speculation, SpeculationError, choose_speculation, draft_candidates,
)

GiB = 1 << 30


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    """A target and a four-times narrower draft that share the target's vocabulary: the draft
    takes the target file's tokenizer keys (``vocab_tokenizer``), as ``herd demo-model --vocab``."""
    folder = tmp_path_factory.mktemp("pair")
    target = write_demo_model(folder / "target.gguf", DemoShape(layers=8, embd=256, vocab=4096))
    draft = write_demo_model(folder / "draft.gguf", DemoShape(layers=2, embd=64),
                             tokenizer=vocab_tokenizer(target), seed=1)
    return target, draft


@pytest.fixture(scope="module")
def gemma3(tmp_path_factory) -> Path:
    return real_gemma3(tmp_path_factory.mktemp("gemma3"))


# --- the choice and its command line ---------------------------------------------------------

def test_each_kind_adds_its_own_arguments_and_none_adds_nothing(pair):
    target, draft = pair
    assert Speculation().server_args() == []
    assert Speculation(NGRAM).server_args() == ["--spec-type", "ngram-simple"]
    assert Speculation(MTP, draft_max=5).server_args() == ["--spec-type", "draft-mtp", "--spec-draft-n-max", "5"]
    # the draft stays on the master's CPU, never on the workers across the LAN
    assert Speculation(DRAFT, draft_path=draft, draft_max=4).server_args() == [
        "--spec-type", "draft-simple", "-md", str(draft), "-ngld", "0", "-devd", "none", "--spec-draft-n-max", "4"]


def test_the_launch_request_puts_the_speculation_on_llama_servers_command_line(pair):
    target, draft = pair
    model = inspect_model(target)
    plan = P.plan_by_memory(model, [], 512)
    plain = LaunchRequest(plan, model, ServerOptions(ctx=512)).spec().args()
    spec = Speculation(DRAFT, draft_path=draft)
    drafted = LaunchRequest(plan, model, ServerOptions(ctx=512), speculation=spec).spec().args()
    assert "-md" not in plain and "--spec-type" not in plain
    assert drafted[drafted.index("-md") + 1] == str(draft)
    assert drafted[drafted.index("--spec-type") + 1] == "draft-simple"


@pytest.mark.parametrize("args", [["--spec-type", "ngram-simple"], ["-md", "/tmp/x.gguf"],
                                  ["--model-draft=/tmp/x.gguf"], ["-ngld", "99"], ["-devd", "RPC0"]])
def test_speculation_options_typed_by_a_user_are_refused_with_the_way_to_choose_it(args):
    with pytest.raises(ServerArgsError) as err:
        check_extra_args(args)
    assert "herd plans speculation itself" in str(err.value) and "--draft" in str(err.value)


@pytest.mark.parametrize("doc, words", [
    ({"kind": "fast"}, "speculation must be one of none, draft, ngram, mtp, not fast"),
    ({"kind": "draft"}, "a draft model's file goes with speculation by a draft model"),
    ({"kind": "ngram", "draft": "/tmp/x.gguf"}, "a draft model's file goes with"),
    ({"kind": "draft", "draft": 7}, "speculation.draft must be the path of a model file"),
    ({"kind": "mtp", "draft_max": 0}, "tokens drafted per pass must be a whole number from 1 to 32, not 0"),
    ({"kind": "mtp", "draft_max": "3"}, "tokens drafted per pass must be a whole number"),
    ({"kind": "none", "predicted_gain": -1}, "speculation.predicted_gain must be a positive number"),
    ({"kind": "none", "command": "rm"}, "speculation: unknown field command"),
    (["draft"], "speculation must be an object"),
])
def test_a_speculation_from_outside_is_checked_field_by_field(doc, words):
    with pytest.raises(SpeculationError) as err:
        Speculation.from_json(doc)
    assert words in str(err.value)


def test_a_speculation_round_trips_through_its_json(pair):
    spec = Speculation(DRAFT, draft_path=pair[1], draft_max=6).with_prediction(1.23, "links are slow")
    assert Speculation.from_json(spec.to_json()) == spec
    assert "predicted 1.23× the speed without" in spec.describe()
    assert "draft.gguf, 6 tokens per pass" in spec.describe()


# --- draft discovery --------------------------------------------------------------------------

def test_the_token_list_is_hashed_where_it_lies_without_being_built(gemma3):
    header = read_header(gemma3, (TOKENS_KEY,))
    tokens = header.fields[TOKENS_KEY]
    assert isinstance(tokens, SkippedValue) and tokens.count == 262144  # not 262k Python strings
    # the digest is of the value's bytes in the file: find them by walking the same header
    raw = gemma3.read_bytes()[:header.data_offset]
    name = TOKENS_KEY.encode()
    start = raw.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
    pos = start + 4 + 4 + 8
    for _ in range(tokens.count):
        pos += 8 + struct.unpack_from("<Q", raw, pos)[0]
    assert header.digests[TOKENS_KEY] == hashlib.sha256(raw[start:pos]).hexdigest()


def test_real_smollm2_and_gemma3_are_refused_as_each_others_draft_with_the_reason(smollm2, gemma3):
    assert read_vocabulary(smollm2).n_tokens == 49152 and read_vocabulary(gemma3).n_tokens == 262144
    (for_gemma,) = draft_candidates(gemma3, [smollm2, gemma3])
    assert not for_gemma.usable and for_gemma.reason == "different tokenizer: gpt2 vs llama"
    with pytest.raises(SpeculationError) as err:
        choose_speculation(str(gemma3), smollm2)
    assert str(err.value) == (f"{gemma3.name} cannot draft for {smollm2.name}: different tokenizer: llama vs gpt2")
    auto = choose_speculation("auto", gemma3, [smollm2])
    assert not auto.active and "no model on this PC has the target's vocabulary" in auto.reason
    assert "different tokenizer: gpt2 vs llama" in auto.reason
    assert mtp_layers(read_header(gemma3)) == 0
    with pytest.raises(SpeculationError, match="carries no multi-token-prediction heads"):
        choose_speculation("mtp", gemma3)


def test_generated_models_that_share_a_vocabulary_are_found_and_others_refused(pair, tmp_path, smollm2):
    target, draft = pair
    other = write_demo_model(tmp_path / "other-vocab.gguf", DemoShape(layers=2, embd=64, vocab=2048))
    T = gguf.GGUFValueType  # 4,096 tokens of the test tokenizer, but other ones
    renamed = Tokenizer((("tokenizer.ggml.model", "test", T.STRING, None),
                         ("tokenizer.ggml.tokens", [f"x{i}" for i in range(4096)], T.ARRAY, T.STRING)), 4096, "x")
    same_count = write_demo_model(tmp_path / "same-count.gguf", DemoShape(layers=2, embd=64), tokenizer=renamed)
    found = draft_candidates(target, [draft, other, same_count, smollm2, target])
    by_name = {c.path.name: c for c in found}
    assert found[0].path == draft and found[0].usable
    assert by_name["other-vocab.gguf"].reason == "different vocabulary: 2,048 tokens vs 4,096"
    assert by_name["same-count.gguf"].reason.startswith("different vocabulary: the same number of tokens (4,096)")
    assert by_name["SmolLM2-135M-Instruct.Q4_1.gguf"].reason == "different tokenizer: gpt2 vs test"
    assert target.name not in by_name  # the target is no draft of itself
    auto = choose_speculation("auto", target, [smollm2, other, draft])
    assert auto.kind == DRAFT and auto.draft_path == draft and auto.reason
    # a draft as large as the target would draft too slowly to pay
    assert "too large to draft" in draft_candidates(draft, [target])[0].reason


def test_mtp_heads_are_found_by_key_or_by_their_tensors(tmp_path):
    def header_with(keys: dict, tensors: list[str]) -> Path:
        path = tmp_path / f"m{len(list(tmp_path.iterdir()))}.gguf"
        w = gguf.GGUFWriter(path, "glm4moe")
        for k, v in keys.items():
            w.add_uint32(k, v)
        for name in tensors:
            w.add_tensor(name, np.zeros(4, dtype=np.float32))
        w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
        return path

    assert mtp_layers(read_header(header_with({"glm4moe.nextn_predict_layers": 1}, ["blk.0.attn_q.weight"]))) == 1
    assert mtp_layers(read_header(header_with({}, ["blk.46.nextn.eh_proj.weight", "blk.46.nextn.enorm.weight"]))) == 1
    assert mtp_layers(read_header(header_with({}, ["blk.0.attn_q.weight"]))) == 0


# --- the draft's memory in the fit -----------------------------------------------------------

def test_the_drafts_memory_is_planned_on_the_host(pair):
    target, draft = pair
    model, small = inspect_model(target), inspect_model(draft)
    plan = P.plan_by_memory(model, [], 1024)
    shape = CacheShape(ctx=1024)
    without = P.estimate(plan, model, shape)[-1]
    with_draft = P.estimate(plan, model, shape, draft=small)[-1]
    assert with_draft.draft_bytes > small.file_bytes + small.kv_bytes(shape, range(small.n_layer))
    assert with_draft.need_bytes == without.need_bytes + with_draft.draft_bytes
    assert "of which the draft model" in with_draft.describe()
    # a host with room for the target alone does not fit the draft too
    tight = without.need_bytes + (with_draft.draft_bytes // 2)
    assert P.estimate(plan, model, shape, host_free_bytes=tight)[-1].fits
    assert not P.estimate(plan, model, shape, host_free_bytes=tight, draft=small)[-1].fits


def test_a_launch_with_a_draft_that_is_gone_is_refused_before_it_starts(pair, tmp_path):
    target, _ = pair
    model = inspect_model(target)
    plan = P.plan_by_memory(model, [], 512)
    gone = Speculation(DRAFT, draft_path=tmp_path / "deleted.gguf")
    findings = check_request(LaunchRequest(plan, model, speculation=gone), [], object())
    assert [f.code for f in findings] == ["bad-speculation"]
    assert "deleted.gguf" in findings[0].message and "cannot read the model file" in findings[0].message


# --- a real llama-server drafting with the candidate herd found ------------------------------

@pytest.mark.engine
async def test_a_real_cluster_serves_with_the_draft_herd_found_and_reports_drafted_tokens(engine, procs, pair):
    target, draft = pair
    (worker,) = start_rpc_workers(engine, procs, 1)
    model = inspect_model(target)
    plan = P.Plan(model.n_layer, 3, [(P.Device("w0", "worker0", worker, 0, "CPU", GiB, GiB), 6)])
    speculation = choose_speculation("auto", target, [draft])
    request = LaunchRequest(plan, model, ServerOptions(ctx=512, port=free_port(), extra_args=("-np", "1")),
                            speculation=speculation)
    async with serving(engine.llama_server, request.spec(), timeout=120) as server:
        # the draft's own buffers on the host do not confuse the placement read back
        placement = server.placement()
        check = check_placement(plan, placement, model)
        assert check.ok, check.problems
        # and the draft's memory is what the fit planned on the host, within a quarter
        planned = P.estimate(plan, model, request.options.cache_shape(), draft=request.draft_model())[-1].draft_bytes
        reported = sum(placement.draft.values()) * (1 << 20)
        assert 0.75 * reported <= planned <= 1.25 * reported, (planned, placement.draft)
        async with httpx.AsyncClient(timeout=60) as client:
            r = await client.post(server.url + "/completion", json={
                "prompt": "one two three one two three", "n_predict": 24, "temperature": 0})
            done = await chat(client, server.url, [{"role": "user", "content": "one two three"}], max_tokens=16)
        timings = r.json()["timings"]
    assert timings["predicted_n"] == 24
    assert timings["draft_n"] > 0, timings
    # a chat reply's final timings carry the drafts too, and the dashboard's sample keeps them
    sample = Telemetry().record_reply("chat", done.timings)
    drafts = ReplyDrafts.of(sample.values)
    assert drafts is not None and drafts.drafted == done.timings["draft_n"] > 0
    assert 0 <= drafts.accepted <= drafts.drafted and drafts.tokens_per_s > 0
