"""Further llama-server arguments: only tuning options pass, whatever door they come in by (#32)."""

from __future__ import annotations

import pytest

from gui.cluster.llama.server_args import ALLOWED_FLAGS, OWNED_FLAGS, ServerArgsError, check_extra_args
from gui.cluster.llama.server_command import ServerOptions, ServerSpec


@pytest.mark.parametrize("args, named", [
    (["--rpc", "127.0.0.1:9", "-ngl", "99"], "--rpc"),
    (["--temp", "0.7", "-ngl", "99"], "-ngl"),
    (["--host", "0.0.0.0"], "--host"),
    (["--host=0.0.0.0"], "--host"),
    (["--rpc=127.0.0.1:9"], "--rpc"),
    (["--port", "80"], "--port"),
    (["-m", "/etc/shadow"], "-m"),
    (["--model=/x.gguf"], "--model"),
    (["-ts", "1,1"], "-ts"),
    (["-ot", "blk=CPU"], "-ot"),
    (["--log-file", "/home/me/notes.txt"], "--log-file"),
    (["--log-file=/home/me/notes.txt"], "--log-file"),
    (["--slot-save-path", "/tmp/x"], "--slot-save-path"),
    (["--slot-save-path=/tmp/x"], "--slot-save-path"),
    (["--ssl-key-file", "k"], "--ssl-key-file"),
    (["--api-key", "s3cret"], "--api-key"),
    (["--path", "/"], "--path"),
    (["-mu", "http://x"], "-mu"),
    (["-hf", "a/b"], "-hf"),
    (["--lora", "x.gguf"], "--lora"),
    (["--control-vector", "x"], "--control-vector"),
    (["-md", "draft.gguf"], "-md"),
    (["--override-kv", "a=int:1"], "--override-kv"),
    (["-dev", "none"], "-dev"),
    (["--chat-template-file", "/etc/passwd"], "--chat-template-file"),
    (["-lv", "5"], "-lv"),
    (["--alias", "x"], "--alias"),
])
def test_owned_and_unlisted_options_are_refused_by_name(args, named):
    with pytest.raises(ServerArgsError) as err:
        check_extra_args(args)
    assert named in str(err.value) and "not accepted" in str(err.value)
    # the same through every door: ServerOptions is what a profile, the CLI and the app make
    with pytest.raises(ValueError, match=named):
        ServerOptions(extra_args=tuple(args))


@pytest.mark.parametrize("args, words", [
    (["--temp", "--rpc", "127.0.0.1:9"], "looks like an option"),  # smuggled as a value
    (["--temp=--rpc"], "looks like an option"),
    (["--threads", "2", "127.0.0.1:9"], "not a llama-server option"),  # a stray word
    (["--temp"], "needs a value"),
    (["--no-webui=1"], "takes no value"),
    (["--chat-template", "x" * 20000], "too long"),
])
def test_values_cannot_carry_options(args, words):
    with pytest.raises(ServerArgsError, match=words):
        check_extra_args(args)


def test_tuning_options_pass_in_every_spelling():
    args = ("-t", "2", "--threads-batch=2", "-np", "1", "-fa", "off", "--temp", "0.7", "--seed", "-1",
            "-ctk", "q8_0", "--cache-type-v=q8_0", "-ub", "256", "-kvu", "--no-repack", "--no-webui",
            "--top-p", "0.9", "--chat-template", "chatml")
    assert check_extra_args(args) == args
    spec = ServerSpec(model="m.gguf", options=ServerOptions(extra_args=args))
    assert spec.args()[-len(args):] == list(args)


def test_no_option_is_both_owned_and_allowed():
    assert not set(OWNED_FLAGS) & set(ALLOWED_FLAGS)


def test_with_extra_meets_the_same_rule():
    options = ServerOptions(extra_args=("-np", "1"))
    with pytest.raises(ServerArgsError, match="--rpc"):
        options.with_extra("--rpc", "127.0.0.1:9")
