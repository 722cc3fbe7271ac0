"""Settings and state files: defaults, overrides, atomic owner-only writes, corrupt files set aside."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from agent.main import build_parser, effective_settings
from agent.pairing import PairingLocked, PinGuard, WrongPin, note_address, pair_master
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
    assert (again.node_id, again.pin, again.fingerprint) == (st.node_id, st.pin, st.fingerprint)
    assert len(st.pin) == 6 and st.pin.isdigit()


def test_pairing_stores_only_a_hash_and_rotates_the_pin(tmp_path):
    st = load_state(tmp_path)
    old_pin = st.pin
    token = pair_master(st, "10.0.0.9", "master-1")
    raw = (tmp_path / STATE_NAME).read_text()
    assert token not in raw
    again = load_state(tmp_path)
    assert again.master_for_token(token) is not None
    assert again.master_for_token(token + "x") is None
    assert again.allowed_addresses() == {"10.0.0.9"}
    assert again.pin == st.pin != old_pin  # rotated with the pairing, and saved
    m = again.master_for_token(token)
    assert note_address(again, m, "10.0.0.10") is True
    assert note_address(again, m, "10.0.0.10") is False
    assert load_state(tmp_path).allowed_addresses() == {"10.0.0.9", "10.0.0.10"}


def test_corrupt_state_is_set_aside_not_replaced(tmp_path):
    path = tmp_path / STATE_NAME
    path.write_text('{"node_id": "not-a-uuid"')
    with pytest.raises(SettingsError, match="unreadable"):
        load_state(tmp_path)
    assert not path.exists()
    assert len(list(tmp_path.glob(f"{STATE_NAME}.corrupt-*"))) == 1
    fresh = load_state(tmp_path)  # the next start begins a new identity
    assert fresh.node_id and path.exists()


def test_pin_guard_locks_out_after_five_wrong_pins():
    now = [1000.0]
    guard = PinGuard(max_failures=5, lockout=60.0, clock=lambda: now[0])
    for left in (4, 3, 2, 1):
        with pytest.raises(WrongPin) as info:
            guard.check("000000", "123456")
        assert info.value.tries_left == left
    with pytest.raises(PairingLocked):
        guard.check("000000", "123456")
    with pytest.raises(PairingLocked):  # even the right PIN while locked
        guard.check("123456", "123456")
    now[0] += 61
    guard.check("123456", "123456")


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


def test_cli_pin_prints_the_state_files_pin(tmp_path):
    out = subprocess.run([sys.executable, "-m", "agent.main", "--state-dir", str(tmp_path), "pin"],
                         capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == load_state(tmp_path).pin


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
