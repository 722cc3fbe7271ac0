"""``herd keys add|list|revoke`` (#34), run as the user runs them: the key is printed once, only
its hash is on disk in an owner-only file, revoking stops it, bad names are refused in words."""

from __future__ import annotations

import json
import os
import stat

from e2e.herd_cli import herd

from gui.cluster.serving.api_keys import ApiKeyStore


def test_keys_add_list_revoke(tmp_path):
    env = {**os.environ, "HERD_CONFIG_DIR": str(tmp_path / "cfg")}
    r = herd(["keys", "list"], env)
    assert r.returncode == 0 and "No keys yet" in r.stdout

    r = herd(["keys", "add", "phone", "--json"], env)
    assert r.returncode == 0, r.stderr
    made = json.loads(r.stdout)
    assert made["name"] == "phone" and made["key"].startswith("herd-")
    r = herd(["keys", "add", "open-webui"], env)
    assert r.returncode == 0 and "shown only now" in r.stdout
    webui_key = r.stdout.strip().splitlines()[-1]

    path = tmp_path / "cfg" / "api-keys.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert made["key"] not in path.read_text() and webui_key not in path.read_text()
    store = ApiKeyStore(path)
    assert (store.match(made["key"]), store.match(webui_key)) == ("phone", "open-webui")

    r = herd(["keys", "list"], env)
    assert [ln.split()[0] for ln in r.stdout.splitlines()[1:]] == ["open-webui", "phone"]
    assert made["key"] not in r.stdout
    r = herd(["keys", "list", "--json"], env)
    assert [k["name"] for k in json.loads(r.stdout)] == ["open-webui", "phone"]

    r = herd(["keys", "add", "phone"], env)
    assert r.returncode == 2 and "a key called phone exists already" in r.stderr
    r = herd(["keys", "revoke", "phone"], env)
    assert r.returncode == 0 and r.stdout.strip() == "revoked phone"
    assert store.match(made["key"]) is None and store.match(webui_key) == "open-webui"
    r = herd(["keys", "revoke", "phone"], env)
    assert r.returncode == 2 and "no key is called phone" in r.stderr


def test_a_bad_name_is_refused_without_a_traceback(tmp_path):
    env = {**os.environ, "HERD_CONFIG_DIR": str(tmp_path / "cfg")}
    r = herd(["keys", "add", "my phone"], env)
    assert r.returncode == 2
    assert r.stderr.strip() == ('herd keys: "my phone" cannot name a key: use 1 to 40 letters, digits, dots, '
                                'dashes or underscores, starting with a letter or digit (e.g. phone, open-webui)')
    assert not (tmp_path / "cfg" / "api-keys.json").exists()


def test_an_unreadable_key_file_is_named(tmp_path):
    env = {**os.environ, "HERD_CONFIG_DIR": str(tmp_path / "cfg")}
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "api-keys.json").write_text("[]")
    r = herd(["keys", "list"], env)
    assert r.returncode == 1 and "api-keys.json is not a llama-herd key file" in r.stderr
    assert "Traceback" not in r.stderr
