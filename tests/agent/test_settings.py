"""Settings and state files: defaults, overrides, atomic owner-only writes, corrupt files set aside."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from agent import protocol as P
from agent.main import build_parser, effective_settings
from agent.settings import (STATE_NAME, Settings, SettingsError, dump_settings, load_settings,
                            load_state, save_settings, settings_from_dict)


def test_missing_config_gives_defaults(tmp_path):
    s = load_settings(tmp_path / "nope.toml")
    assert s == Settings(name=s.name)
    assert s.exposure == "relay" and s.cache is True


def test_config_round_trips_through_the_serializer(tmp_path):
    s = Settings(name='kitchen "pc" \\ é', bind="10.0.0.5", api_port=1, rpc_port=2, echo_port=3,
                 threads=4, devices=["CPU", "CUDA0"], cache=False, exposure="open",
                 mdns_interfaces=["10.0.0.5", "fe80::1"], engine_dir="C:\\engine")
    path = save_settings(s, tmp_path / "sub" / "agent.toml")
    assert load_settings(path) == s
    assert not list(path.parent.glob("*.tmp"))


@pytest.mark.parametrize("text, key", [
    ('api_port = "80"', "api_port"),
    ("api_port = 70000", "api_port"),
    ("cache = 1", "cache"),
    ('bind = "my-host"', "bind"),
    ('exposure = "wide"', "exposure"),
    ("colour = 3", "colour"),
    ("devices = [1, 2]", "devices"),
])
def test_bad_values_name_the_key(tmp_path, text, key):
    path = tmp_path / "agent.toml"
    path.write_text(text + "\n")
    with pytest.raises(SettingsError, match=key):
        load_settings(path)
    assert path.exists()  # a wrong value is left for the user to fix


def test_corrupt_config_is_set_aside(tmp_path):
    path = tmp_path / "agent.toml"
    path.write_text("name = [unclosed\n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings(path)
    assert not path.exists()
    aside = list(tmp_path.glob("agent.toml.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text() == "name = [unclosed\n"


def test_flags_override_the_config(tmp_path):
    cfg = tmp_path / "agent.toml"
    save_settings(Settings(name="from-file", api_port=1111, rpc_port=2222), cfg)
    args = build_parser().parse_args(["--config", str(cfg), "run", "--name", "from-flag", "--api-port", "3333"])
    s = effective_settings(args)
    assert (s.name, s.api_port, s.rpc_port) == ("from-flag", 3333, 2222)
    # a flag before the sub-command is not overwritten by the sub-parser's default
    args = build_parser().parse_args(["--config", str(cfg), "--name", "early", "run"])
    assert effective_settings(args).name == "early"


def test_bad_flag_value_is_named(tmp_path):
    args = build_parser().parse_args(["--config", str(tmp_path / "x.toml"), "--bind", "nowhere"])
    with pytest.raises(SettingsError, match="--bind"):
        effective_settings(args)


def test_state_is_created_once_owner_only_and_stable(tmp_path):
    st = load_state(tmp_path)
    path = tmp_path / STATE_NAME
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = load_state(tmp_path)
    assert again.node_id == st.node_id
    assert "pin" not in path.read_text()  # the PIN lives only in the short-lived PIN file


def test_pairing_pins_the_masters_certificate(tmp_path):
    from agent.identity import load_or_create
    st = load_state(tmp_path)
    m = load_or_create(tmp_path / "m", "master", "m")
    st.add_master("master-1", m.cert_pem.decode(), m.fingerprint)
    again = load_state(tmp_path)
    assert again.master_for_fingerprint(m.fingerprint).name == "master-1"
    assert again.master_for_fingerprint("0" * 64) is None
    assert again.master_for_fingerprint(None) is None
    assert [x.name for x in again.remove_masters(m.fingerprint[:12])] == ["master-1"]
    assert not load_state(tmp_path).paired


def test_a_version_1_state_with_bearer_tokens_loads_and_asks_for_re_pairing(tmp_path):
    """Old pairings were bearer tokens, which proved nothing about the master: they are dropped,
    counted for the start-up warning, and the node keeps its id."""
    import json
    path = tmp_path / STATE_NAME
    nid = "6f1c1b1e-8a5e-4a39-9a43-0d1f5b7e2c11"
    path.write_text(json.dumps({"node_id": nid, "pairing_key": "ab" * 32, "pin": "123456",
                                "masters": [{"name": "old", "token_sha256": "cd" * 32,
                                             "addresses": ["10.0.0.2"], "paired_at": 1.0}]}))
    st = load_state(tmp_path)
    assert st.node_id == nid and not st.paired and st.dropped_legacy == 1
    saved = json.loads(path.read_text())
    assert saved["version"] == 2 and saved["masters"] == [] and "pin" not in saved
    assert load_state(tmp_path).dropped_legacy == 0  # reported once


def test_corrupt_state_is_set_aside_not_replaced(tmp_path):
    path = tmp_path / STATE_NAME
    path.write_text('{"node_id": "not-a-uuid"')
    with pytest.raises(SettingsError, match="unreadable"):
        load_state(tmp_path)
    assert not path.exists()
    assert len(list(tmp_path.glob(f"{STATE_NAME}.corrupt-*"))) == 1
    fresh = load_state(tmp_path)  # the next start begins a new identity
    assert fresh.node_id and path.exists()


def test_pin_file_accepts_a_pin_only_for_a_few_minutes_and_only_once(tmp_path):
    from agent.pairing import GUESSES_PER_PIN, KEEP_PIN_BELOW, PIN_TTL, PinFile
    now = [1000.0]
    pins = PinFile(tmp_path, clock=lambda: now[0])
    assert pins.current() is None  # nothing shown yet
    pin = pins.show()
    assert pins.current() == pin
    now[0] += PIN_TTL - 1
    assert pins.show() == pin  # shown again while valid: the same PIN, its time renewed
    now[0] += PIN_TTL - 1
    assert pins.current() == pin
    now[0] += 2
    assert pins.current() is None  # expired
    pin = pins.show()
    pins.count_guess(KEEP_PIN_BELOW - 1)
    assert pins.show() == pin  # shown again: its next window cannot reach the cap, kept
    pins.count_guess(1)
    assert pins.current() == pin and pins.show() != pin  # it could: a fresh PIN instead
    pins.count_guess(GUESSES_PER_PIN)
    assert pins.current() is None  # used up by guesses
    pins.show()
    pins.consume()
    assert pins.current() is None
    if os.name == "posix":
        assert stat.S_IMODE(pins.path.stat().st_mode) == 0o600


def test_back_off_is_per_address_and_grows():
    from agent.pairing import PeerBackoff
    now = [0.0]
    b = PeerBackoff(clock=lambda: now[0])
    waits = []
    for _ in range(5):
        b.failed("10.0.0.66")
        waits.append(b.wait("10.0.0.66"))
    assert waits == [1, 2, 4, 8, 16]
    assert b.wait("10.0.0.7") == 0  # another host is not held back
    b.succeeded("10.0.0.66")
    assert b.wait("10.0.0.66") == 0


def test_dump_is_valid_toml_for_every_field():
    from agent.settings import tomllib
    s = Settings(name="x")
    assert settings_from_dict(tomllib.loads(dump_settings(s)), "dump") == s


def test_cli_reports_a_corrupt_config_and_exits_2(tmp_path):
    cfg = tmp_path / "agent.toml"
    cfg.write_text("= broken")
    out = subprocess.run([sys.executable, "-m", "agent.main", "--config", str(cfg), "--state-dir",
                          str(tmp_path), "--no-mdns", "run"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "not valid TOML" in out.stderr and "corrupt-" in out.stderr


def test_cli_pin_shows_the_pin_the_agent_accepts(tmp_path):
    from agent.pairing import PinFile
    out = subprocess.run([sys.executable, "-m", "agent.main", "--state-dir", str(tmp_path), "pin"],
                         capture_output=True, text=True, timeout=60, check=True)
    shown = out.stdout.strip()
    assert len(shown) == P.PIN_DIGITS + 1 and shown[5] == " "  # in two groups, as people read it
    assert shown.replace(" ", "") == PinFile(tmp_path).current()
    assert "5 minutes" in out.stderr


def test_cli_config_writes_what_it_shows(tmp_path):
    cfg = tmp_path / "agent.toml"
    base = [sys.executable, "-m", "agent.main", "--config", str(cfg), "config"]
    shown = subprocess.run(base + ["--name", "den", "--rpc-port", "50100"], capture_output=True, text=True,
                           timeout=60, check=True).stdout
    assert 'name = "den"' in shown and "rpc_port = 50100" in shown
    subprocess.run(base + ["--name", "den", "--rpc-port", "50100", "--write"], capture_output=True,
                   timeout=60, check=True)
    s = load_settings(cfg)
    assert (s.name, s.rpc_port) == ("den", 50100)
