"""The chat pane continues a reply cut by llama-server's death once it serves again (#34 item 5),
with a real llama-server and the real SmolLM2 weights. The test kills llama-server mid-reply (as
it dies when a worker is lost) and starts it again on the same loopback port, as the failover's
relaunch does; a real failover needs RPC workers and a relaunch plan, which this pane does not
see (it is told only that the cluster serves again, by the launch flow)."""

from __future__ import annotations

import re
import subprocess

import httpx
import pytest
from conftest import free_port

from gui.session import ClusterSession
from gui.widgets.chat_pane import ChatPane

pytestmark = pytest.mark.engine


def start_llama_server(qtbot, argv: list[str], url: str, log) -> subprocess.Popen:
    """Start llama-server and wait until its /health says it serves."""
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def serves() -> bool:
        assert proc.poll() is None, "llama-server exited"
        try:
            return httpx.get(url + "/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    qtbot.waitUntil(serves, timeout=60000)
    return proc


@pytest.fixture
def session(bridge):
    s = ClusterSession(bridge)
    yield s
    s.close()


def test_a_cut_reply_goes_on_where_it_stopped_after_the_relaunch(qtbot, session, engine, smollm2, tmp_path):
    from gui.cluster.llama.server_command import ServerOptions, ServerSpec
    from gui.cluster.llama.server_start import machine_args

    spec = ServerSpec(model=smollm2, options=ServerOptions(ctx=2048, port=free_port(), extra_args=("--threads", "1")))
    argv = spec.with_extra("--no-webui", *machine_args(engine.llama_server)).argv(engine.llama_server)
    log = open(tmp_path / "server.log", "wb")
    server = start_llama_server(qtbot, argv, spec.url, log)
    try:
        pane = ChatPane(session.chat_sender(spec.url))
        qtbot.addWidget(pane)
        pane.resize(600, 500)
        pane.show()
        pane.temperature.setValue(0)
        pane.max_tokens.setValue(60)
        assert pane.send_text("Count from 1 to 50, separated by commas.")
        qtbot.waitUntil(lambda: pane.reply_stats is not None and pane.reply_stats.pieces >= 8, timeout=30000)
        with qtbot.waitSignal(pane.replyFinished, timeout=30000):
            server.kill()  # llama-server aborts when a worker is lost
        server.wait()
        cut = pane.conversation.messages[-1]
        partial = cut.content
        assert cut.interrupted and partial
        # Only a reply that a lost worker cut goes on by itself (a stopped one stays stopped):
        # the session says so (replyInterrupted → interrupt_reply) when the failover sees the loss.
        assert not pane.resume_reply()
        pane.interrupt_reply("the computer b was lost")
        with qtbot.waitSignal(pane.replyFinished, timeout=30000):
            assert pane.resume_reply()  # before the relaunch: it fails, and the reply stays as it was
        assert pane.conversation.messages[-1].interrupted and pane.conversation.messages[-1].content == partial

        server = start_llama_server(qtbot, argv, spec.url, log)  # the relaunch
        with qtbot.waitSignal(pane.replyFinished, timeout=60000) as done:
            assert pane.resume_reply()
        assert done.args[0].pieces > 0 and not pane.stats[-1]["error"]
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()

    # One reply, the same message: marked resumed on the model, complete.
    assert [m.role for m in pane.conversation.messages] == ["user", "assistant"]
    reply = pane.conversation.messages[-1]
    assert reply is cut and reply.resumed and reply.state == "complete"
    # The text goes on from the cut, without the prefix llama-server sends back first.
    assert reply.content.startswith(partial) and len(reply.content) > len(partial)
    added = reply.content[len(partial):]
    assert not added.lstrip().startswith(partial.strip()[:6])
    # The person sees that it goes on, and the new text under it.
    shown = pane.transcript.toPlainText()
    assert "The reply goes on where it was cut:" in shown
    # Rendered as Markdown: "3. 3" is a list item showing "3" (its number is a list marker, not
    # text); the last line, cut by max_tokens ("13."), may be an empty item. The rest is there.
    under = shown.rsplit("The reply goes on where it was cut:", 1)[1]
    assert all(word in under for word in re.findall(r"\w+", added.strip().rsplit("\n", 1)[0]))
