"""Where a launch is: one state, kept by :class:`~gui.cluster.cluster_launch.ClusterLaunch`.

The app's launch panel, its tray and ``herd up`` all read this one value (#33: it used to live
in a string in the launch panel, in ``supervisor is None`` checks and in the workspace). Its
values are llama-server's own words, so a state compares equal to the string the server
process reports (``LaunchState.READY == "ready"``)::

    stopped → starting → loading → ready → stopping → stopped
                 ↘ failed ↙           ↓ (a worker lost, llama-server gone)
    ready → failed / relaunching → starting → loading → ready   (the failover supervisor)
"""

from __future__ import annotations

from enum import Enum


class LaunchState(str, Enum):
    """The state of the cluster launched from this process."""

    STOPPED = "stopped"          # nothing runs (the start: Start is on)
    STARTING = "starting"        # workers and llama-server are being started
    LOADING = "loading"          # llama-server loads the model onto the devices
    READY = "ready"              # serving, placement checked
    RELAUNCHING = "relaunching"  # the failover supervisor stopped llama-server to start it again
    STOPPING = "stopping"        # the user's Stop: llama-server and the workers are being stopped
    FAILED = "failed"            # the start failed, or llama-server stopped on its own

    def __str__(self) -> str:
        return self.value


STOPPED, STARTING, LOADING, READY, RELAUNCHING, STOPPING, FAILED = LaunchState

#: The moves a launch may make; any other is refused (a bug, logged by ``ClusterLaunch``).
#: FAILED is followed by the failover supervisor's relaunch while it still holds the cluster.
MOVES: dict[LaunchState, frozenset[LaunchState]] = {
    STOPPED: frozenset({STARTING}),
    STARTING: frozenset({LOADING, READY, FAILED, STOPPING, STOPPED}),
    LOADING: frozenset({READY, FAILED, STOPPING, STOPPED}),
    READY: frozenset({FAILED, RELAUNCHING, STOPPING, STOPPED}),
    RELAUNCHING: frozenset({STARTING, LOADING, READY, FAILED, STOPPING, STOPPED}),
    FAILED: frozenset({FAILED, STARTING, LOADING, READY, RELAUNCHING, STOPPING, STOPPED}),
    STOPPING: frozenset({STOPPED}),
}

#: States in which a start is under way: the progress bar and the log follow it.
STARTING_UP = frozenset({STARTING, LOADING})
