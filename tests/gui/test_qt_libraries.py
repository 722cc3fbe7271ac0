"""First run on a plain Linux desktop: Qt's X11 plugin cannot load for want of libraries. herd
says which ones are missing and what to install, instead of Qt's abort that names another one.

The plugin here is a stand-in built for the test (a shared library that links against two xcb
libraries at versions no distribution ships, so they are missing on any machine): the real
plugin's libraries may or may not be installed where the tests run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gui.qt_libraries import debian_packages, describe_missing, missing_libraries, uses_xcb

ROOT = Path(__file__).resolve().parents[2]
MISSING = ["libxcb-icccm.so.99", "libxcb-keysyms.so.99"]


@pytest.fixture(scope="module")
def plugin_missing_two(tmp_path_factory) -> Path:
    """A shared library whose two xcb dependencies the loader cannot find (built with the C
    compiler that building llama.cpp from source needs anyway)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler is needed to build the stand-in plugin"
    d = tmp_path_factory.mktemp("qt-plugin")
    (d / "stub.c").write_text("int stub(void) { return 0; }\n")
    stubs = d / "stubs"
    stubs.mkdir()
    for lib in MISSING:
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(stubs / lib), f"-Wl,-soname,{lib}", str(d / "stub.c")],
                       check=True)
    plugin = d / "libqxcb.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(plugin), str(d / "stub.c"), "-Wl,--no-as-needed",
                    f"-L{stubs}", *(f"-l:{lib}" for lib in MISSING)], check=True)
    return plugin


def test_the_missing_libraries_and_their_packages_are_named(plugin_missing_two):
    assert missing_libraries(plugin_missing_two) == MISSING
    assert debian_packages(MISSING) == ["libxcb-icccm4", "libxcb-keysyms1"]
    words = describe_missing(MISSING)
    assert "libxcb-icccm.so.99 libxcb-keysyms.so.99" in words
    assert "sudo apt install libxcb-icccm4 libxcb-keysyms1" in words
    # a library without a known package is still named, with how to find its package
    words = describe_missing(["libxcb-icccm.so.4", "libweird.so.3"])
    assert "sudo apt install libxcb-icccm4\n" in words and "apt-file search libweird.so.3" in words


def test_herd_says_what_to_install_instead_of_crashing(plugin_missing_two, tmp_path):
    # `herd` as the person ran it, with Qt's X11 plugin swapped for the stand-in above
    code = ("import sys, pathlib, gui.qt_libraries as q; "
            f"q.xcb_plugin = lambda: pathlib.Path({str(plugin_missing_two)!r}); "
            "from gui.main import main; sys.exit(main([]))")
    env = dict(os.environ, QT_QPA_PLATFORM="xcb", DISPLAY=":0", PYTHONPATH=str(ROOT),
               HERD_CONFIG_DIR=str(tmp_path / "config"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "herd cannot open its window" in r.stderr and "sudo apt install libxcb-icccm4 libxcb-keysyms1" in r.stderr
    assert "qt.qpa" not in r.stderr  # Qt was never asked


@pytest.mark.parametrize(("env", "xcb"), [
    ({}, True),
    ({"QT_QPA_PLATFORM": "xcb"}, True),
    ({"QT_QPA_PLATFORM": "offscreen"}, False),
    ({"QT_QPA_PLATFORM": "wayland;xcb"}, False),
    ({"XDG_SESSION_TYPE": "wayland", "WAYLAND_DISPLAY": "wayland-0"}, False),
    ({"XDG_SESSION_TYPE": "x11"}, True),
])
def test_only_when_qt_will_use_x11(env, xcb):
    assert uses_xcb(env) is (xcb and sys.platform.startswith("linux"))
