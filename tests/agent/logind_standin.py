"""A stand-in for logind's sleep inhibitors, on a private D-Bus bus the test started.

CI has no logind (no systemd as PID 1 in a container), and a test must not inhibit the sleep of
the machine it runs on, so this small service takes logind's name on a private bus and answers
``org.freedesktop.login1.Manager.Inhibit(ssss) → h`` the way logind does: with one end of a pipe
(logind's is a FIFO), the inhibitor lasting until every copy of that end is closed. It prints one JSON line per event
on stdout: ``{"event": "ready"}``, ``{"event": "inhibit", "id": N, "args": [what, who, why,
mode]}`` (before the answer goes out) and ``{"event": "released", "id": N}`` when the caller's
descriptor was closed.

Usage: ``python logind_standin.py BUS_ADDRESS``.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading

from jeepney import HeaderFields, MessageType, new_error, new_method_return
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

NAME = "org.freedesktop.login1"
PATH = "/org/freedesktop/login1"
INTERFACE = "org.freedesktop.login1.Manager"

_print_lock = threading.Lock()


def say(**event) -> None:
    with _print_lock:
        print(json.dumps(event), flush=True)


def watch(inhibitor_id: int, read_end: int) -> None:
    """Report when the caller's end is closed (logind ends the inhibitor then)."""
    # The caller holds the write end: a read here returns b"" once no copy of it is left open.
    while os.read(read_end, 1):
        pass
    os.close(read_end)
    say(event="released", id=inhibitor_id)


def main(address: str) -> None:
    bus = open_dbus_connection(bus=address, enable_fds=True)
    bus.send_and_get_reply(message_bus.RequestName(NAME))
    say(event="ready")
    ids = itertools.count(1)
    while True:
        msg = bus.receive()
        fields = msg.header.fields
        if msg.header.message_type != MessageType.method_call:
            continue
        if (fields.get(HeaderFields.path), fields.get(HeaderFields.member)) != (PATH, "Inhibit"):
            bus.send(new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod", "s", ("stand-in: Inhibit only",)))
            continue
        if fields.get(HeaderFields.signature) != "ssss":
            bus.send(new_error(msg, "org.freedesktop.DBus.Error.InvalidArgs", "s", ("expected ssss",)))
            continue
        inhibitor_id = next(ids)
        read_end, write_end = os.pipe()
        say(event="inhibit", id=inhibitor_id, args=list(msg.body))
        bus.send(new_method_return(msg, "h", (write_end,)))
        os.close(write_end)  # the caller's copy is now the only one
        threading.Thread(target=watch, args=(inhibitor_id, read_end), daemon=True).start()


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except (OSError, EOFError, KeyboardInterrupt):  # the bus went away: the test is over
        pass
