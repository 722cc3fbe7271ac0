"""`herd --mdns-interfaces … --quit-after …`: the window opens, browses only where it is told,
and closes cleanly on its own (the smoke run the packaged-app test relies on)."""

from __future__ import annotations

import sys

import pytest

from app_smoke import app_env, check_loopback_only, run_window_smoke
from gui.main import build_parser


def test_window_opens_and_closes_with_loopback_discovery(tmp_path):
    code, udp = run_window_smoke([sys.executable, "-m", "gui.main", "--lang", "en",
                                  "--mdns-interfaces", "127.0.0.1", "--quit-after", "3"],
                                 app_env(tmp_path))
    check_loopback_only(udp)


@pytest.mark.parametrize("bad, says", [("eth0", "'eth0' is not an IP address"),
                                       (",", "expected one or more interface addresses")])
def test_bad_interface_is_named(capsys, bad, says):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--mdns-interfaces", bad])
    assert exc.value.code == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["0", "-1", "soon"])
def test_bad_quit_after_is_refused(capsys, bad):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--quit-after", bad])
    assert repr(bad) in capsys.readouterr().err


def test_interfaces_are_parsed():
    args = build_parser().parse_args(["--mdns-interfaces", "127.0.0.1, 192.168.1.5", "--quit-after", "2.5"])
    assert args.mdns_interfaces == ["127.0.0.1", "192.168.1.5"]
    assert args.quit_after == 2.5
