"""Smoke tests of the PyInstaller one-folder builds made by packaging/pyinstaller/build.sh.

Freezing takes about a minute per program on two cores, so these are marked ``slow``; CI runs
them. The frozen agent is started with loopback-only options and a temporary state folder, and
must answer ``/api/v1/info`` and stop cleanly on SIGTERM. The frozen app opens its window
offscreen with discovery on loopback only and closes it by itself (``--quit-after``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import free_port
from xvfb import tk_app_shown

from agent.identity import client_context

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "packaging" / "pyinstaller" / "build.sh"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="build.sh is the Linux/macOS build"),
]


# /info is public: any server key will do to see that the agent answers
_ANY_SERVER = client_context()


def freeze(target: str, tmp: Path) -> Path:
    proc = subprocess.run(["bash", str(BUILD), target, "--dist", str(tmp / "dist"),
                           "--work", str(tmp / "work")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    name = "herd-agent" if target == "agent" else "herd"
    exe = tmp / "dist" / name / name
    assert exe.is_file() and os.access(exe, os.X_OK)
    return exe


@pytest.fixture(scope="module")
def frozen_agent(tmp_path_factory) -> Path:
    return freeze("agent", tmp_path_factory.mktemp("freeze-agent"))


def test_frozen_agent_reports_its_version(frozen_agent):
    from agent import __version__

    out = subprocess.run([str(frozen_agent), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"herd-agent {__version__}"


def test_frozen_agent_has_the_service_commands(frozen_agent, tmp_path):
    """Sub-commands are registered by module name: the spec must have frozen those modules."""
    out = subprocess.run([str(frozen_agent), "firewall", "add", "--dry-run", "--rpc-port", "7102",
                          "--config", str(tmp_path / "agent.toml")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "localport=7102" in out.stdout


def test_frozen_agent_opens_the_pin_window(frozen_agent, tmp_path, tk_root, x_display):
    """The MSI's "Show pairing PIN" runs the frozen agent with `--window`: the bundle must carry
    tkinter and Tcl/Tk, or the person gets the terminal fallback instead of the window."""
    from agent.pairing import PinFile

    env = dict(os.environ, DISPLAY=x_display)
    proc = subprocess.Popen([str(frozen_agent), "--state-dir", str(tmp_path), "pin", "--window"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        tk_root.withdraw()
        assert tk_app_shown(tk_root, "herd-agent-pin", ".body.pin", proc), proc.communicate()
        text = tk_root.tk.call("send", "herd-agent-pin", ".body.pin cget -text")
        assert text.replace(" ", "") == PinFile(tmp_path).current()
        tk_root.tk.call("send", "herd-agent-pin", "after idle {.body.buttons.close invoke}")
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and out == "", err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _start_frozen_agent(procs, exe: Path, tmp: Path, env: dict | None = None):
    api, rpc, echo = free_port(), free_port(), free_port()
    proc = procs.popen([exe, "run", "--bind", "127.0.0.1", "--api-port", api, "--rpc-port", rpc,
                        "--echo-port", echo, "--no-mdns", "--state-dir", tmp / "state",
                        "--config", tmp / "agent.toml", "--name", "frozen-smoke"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return proc, (api, rpc, echo)


def _wait_info(proc, api: int) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"frozen agent exited early ({proc.returncode})"
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{api}/api/v1/info", timeout=2,
                                        context=_ANY_SERVER) as resp:
                return json.load(resp)
        except OSError:
            time.sleep(0.2)
    raise AssertionError("no answer from the frozen agent's /api/v1/info within 60 s")


async def test_frozen_agent_runs_the_rpc_worker_bundled_beside_it(frozen_agent, engine, tmp_path, procs):
    """The MSI's layout: ggml-rpc-server beside the frozen herd-agent, no other engine around.
    The agent must find it there, start it for a paired master, and answer through the relay."""
    import shutil

    import psutil

    from agent.client import AgentClient
    from agent.engine_lookup import PINNED_RPC_PROTO, rpc_hello

    bundle = frozen_agent.parent
    copied = []
    for f in sorted(engine.rpc_server.parent.iterdir()):
        if f.name == "ggml-rpc-server" or f.name.startswith("libggml"):
            dest = bundle / f.name
            if f.is_symlink():
                dest.symlink_to(os.readlink(f))
            else:
                shutil.copy2(f, dest)
            copied.append(dest)
    try:
        # no managed engine, no HERD_ENGINE_DIR: only the bundled one can be found
        env = {k: v for k, v in os.environ.items() if k != "HERD_ENGINE_DIR"}
        for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "LLAMA_CACHE"):
            env[var] = str(tmp_path / var.lower())
        proc, (api, rpc, _) = _start_frozen_agent(procs, frozen_agent, tmp_path, env)
        info = _wait_info(proc, api)
        assert info["engine"]["rpc_server"] is True
        from agent.identity import load_or_create
        from agent.pairing import PinFile
        pin = PinFile(tmp_path / "state").show()  # what the frozen `herd-agent pin` does
        me = load_or_create(tmp_path / "master", "master", "frozen-test")
        async with AgentClient(f"https://127.0.0.1:{api}", identity=me) as client:
            await client.pair(pin, "frozen-test")
            await client.rpc_start()
            deadline = time.monotonic() + 30
            while (st := (await client.status())["rpc"])["state"] != "ready":
                assert st["state"] in ("starting", "stopped"), st
                assert time.monotonic() < deadline, f"worker not ready within 30 s: {st}"
                await asyncio.sleep(0.2)
            worker_exe = Path(psutil.Process(st["pid"]).exe())
            assert worker_exe.parent == bundle.resolve()
            # through the master's forwarder: the relay speaks TLS to paired keys only
            from gui.cluster.nodes.tunnel import Forwarder
            fwd = await Forwarder("127.0.0.1", rpc, me, client.pinned).start()
            try:
                host, port = fwd.endpoint.rsplit(":", 1)
                assert await asyncio.to_thread(rpc_hello, host, int(port)) == PINNED_RPC_PROTO
            finally:
                await fwd.close()
            await client.rpc_stop()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert not psutil.pid_exists(st["pid"]) or psutil.Process(st["pid"]).status() == psutil.STATUS_ZOMBIE
    finally:
        for dest in copied:
            dest.unlink()


def test_frozen_agent_serves_info(frozen_agent, tmp_path, procs):
    proc, (api, rpc, echo) = _start_frozen_agent(procs, frozen_agent, tmp_path)
    info = _wait_info(proc, api)
    assert info["name"] == "frozen-smoke"
    assert info["ports"] == {"api": api, "rpc": rpc, "echo": echo}
    # it used the state folder it was given
    node = json.loads((tmp_path / "state" / "agent-state.json").read_text())
    assert info["id"] == node["node_id"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0


@pytest.fixture(scope="module")
def frozen_app(tmp_path_factory) -> Path:
    return freeze("herd", tmp_path_factory.mktemp("freeze-app"))


def _app_env() -> dict:
    return dict(os.environ, QT_QPA_PLATFORM="offscreen")


def test_frozen_app_reports_its_version(frozen_app):
    from agent import __version__

    out = subprocess.run([str(frozen_app), "--version"], capture_output=True, text=True, timeout=60,
                         env=_app_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"llama-herd {__version__}"
    # the app finds its icon and translations relative to its package, as in a source checkout
    internal = frozen_app.parent / "_internal"
    assert (internal / "resources" / "icons" / "herd.svg").is_file()
    assert list((internal / "resources" / "translations").glob("*.ts"))


def test_frozen_app_runs_a_headless_command(frozen_app, tmp_path):
    """`herd demo-model` needs numpy and gguf inside the bundle and a command module registered
    by name; the file it writes must be a GGUF the unfrozen reader accepts."""
    import gguf

    model = tmp_path / "tiny.gguf"
    out = subprocess.run([str(frozen_app), "demo-model", str(model), "--layers", "2"],
                         capture_output=True, text=True, timeout=120, env=_app_env())
    assert out.returncode == 0, out.stderr
    reader = gguf.GGUFReader(str(model))
    assert int(reader.fields["llama.block_count"].parts[-1][0]) == 2


def test_frozen_app_opens_and_closes_its_window(frozen_app, tmp_path):
    """Issue 6: open and close the window. Discovery stays on loopback (--mdns-interfaces)."""
    from app_smoke import app_env, check_loopback_only, run_window_smoke

    _, sockets = run_window_smoke([str(frozen_app), "--lang", "zh_CN", "--mdns-interfaces", "127.0.0.1",
                                   "--quit-after", "5"], app_env(tmp_path), timeout=180)
    check_loopback_only(sockets)
