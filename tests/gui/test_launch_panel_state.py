"""The launch panel shows the launch's state and keeps none of its own (#33): what it says
follows the state it is given, and its ``state`` is read from where the app keeps it — the
core's :class:`~gui.cluster.cluster_launch.ClusterLaunch`, as relayed by the session."""

from __future__ import annotations

from gui.cluster.launching.state import LaunchState


def test_the_panel_shows_the_state_it_is_given_and_keeps_none(qtbot):
    from gui.widgets.launch_panel import LaunchPanel

    panel = LaunchPanel()
    qtbot.addWidget(panel)
    kept = LaunchState.STOPPED
    panel.show_states_of(lambda: kept)
    shown = []
    panel.stateChanged.connect(shown.append)

    panel.show_state(LaunchState.READY)
    assert panel.status.text() == "Running." and not panel.start_button.isEnabled()
    assert panel.state == LaunchState.STOPPED  # shown, not kept: the state is read where it lives
    assert "state" not in vars(panel)
    kept = LaunchState.READY
    assert panel.state == LaunchState.READY

    panel.show_state("relaunching")  # (llama-server's words are the enum's values)
    assert panel.status.text() == "Relaunching llama-server…"
    assert not panel.start_button.isEnabled() and panel.stop_button.isEnabled()  # Stop is the way out
    panel.show_state(LaunchState.FAILED, "llama-server was killed by signal SIGKILL")
    assert panel.status.text() == "Failed: llama-server was killed by signal SIGKILL"
    assert panel.start_button.isEnabled() and not panel.stop_button.isEnabled()
    assert shown == ["ready", "relaunching", "failed"]


def test_a_ready_delivered_after_a_stop_shows_nothing_as_running(qtbot, make_window):
    """The launch's states reach the window queued from the loop's thread: a "ready" sent just
    before the user's Stop (a failover relaunch ending as Stop is pressed) arrives once nothing
    runs. It must not show a cluster that is gone (it raised on the missing endpoint)."""
    win = make_window(browse=False)
    assert not win.session.cluster_launch.is_running
    win.launch_flow.on_server_state("ready", "")  # what the session relays for that "ready"
    assert win.launch.status.text() != "Running." and win.launch.endpoint.text() == ""
    assert not win.chat.send_button.isEnabled()
