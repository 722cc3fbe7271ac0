"""The front door's keys (#34): made once, stored only as hashes in an owner-only file, matched
in any process that reads the same file, revoked at once."""

from __future__ import annotations

import json
import os
import stat

import pytest

from gui.cluster.serving.api_keys import KEY_PREFIX, ApiKeyError, ApiKeyStore, hash_key


def test_a_key_is_stored_as_its_hash_in_an_owner_only_file(tmp_path):
    store = ApiKeyStore(tmp_path / "cfg" / "api-keys.json")
    key = store.add("phone")
    assert key.startswith(KEY_PREFIX) and len(key) > 40
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    text = store.path.read_text()
    assert key not in text and key[len(KEY_PREFIX):] not in text
    assert json.loads(text)["keys"]["phone"]["sha256"] == hash_key(key)
    assert store.match(key) == "phone"
    assert store.match(key + "x") is None and store.match("") is None


def test_keys_are_listed_by_name_and_each_is_new(tmp_path):
    store = ApiKeyStore(tmp_path / "api-keys.json")
    a, b = store.add("phone"), store.add("open-webui")
    assert a != b
    assert [k.name for k in store.list()] == ["open-webui", "phone"]
    assert (store.match(a), store.match(b)) == ("phone", "open-webui")


def test_another_process_adding_or_revoking_is_seen_at_once(tmp_path):
    path = tmp_path / "api-keys.json"
    serving = ApiKeyStore(path)   # what the running front door holds
    cli = ApiKeyStore(path)       # what `herd keys` uses, in another process
    old = cli.add("phone")
    assert serving.match(old) == "phone"
    new = cli.add("laptop")
    assert cli.revoke("phone") is True
    assert serving.match(old) is None
    assert serving.match(new) == "laptop"
    assert cli.revoke("phone") is False


@pytest.mark.parametrize("name", ["", "has space", "-dash-first", "x" * 41, "naïve", "a/b"])
def test_a_bad_name_is_refused_in_words(tmp_path, name):
    with pytest.raises(ApiKeyError, match="cannot name a key: use 1 to 40 letters"):
        ApiKeyStore(tmp_path / "api-keys.json").add(name)


def test_a_name_in_use_is_refused(tmp_path):
    store = ApiKeyStore(tmp_path / "api-keys.json")
    store.add("phone")
    with pytest.raises(ApiKeyError, match="a key called phone exists already; revoke it first"):
        store.add("phone")


def test_an_unreadable_key_file_matches_nothing_and_says_so(tmp_path):
    path = tmp_path / "api-keys.json"
    path.write_text("{not json")
    with pytest.raises(ApiKeyError, match="is not a llama-herd key file"):
        ApiKeyStore(path).match("herd-anything")
    assert path.read_text() == "{not json"  # never replaced behind the user's back
