"""Network failures in words a person can act on, instead of the network library's own.

httpx and the socket layer say "All connection attempts failed (ConnectError)", "[Errno -2]
Name or service not known" or "peer closed connection without sending complete message body
(incomplete chunked read)". :func:`explain` turns such an exception (or an
:class:`agent.client.AgentError` caused by one) into a sentence that says what happened and
what to check, in the user's language (:mod:`agent.i18n`). Anything it does not recognise is
returned as it was: a message the agent or llama-server wrote on purpose stays as written.
"""

from __future__ import annotations

import errno
import socket

import httpx

from agent.i18n import translate


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def explain(exc: BaseException) -> str:
    """What went wrong with a connection, as a sentence with what to do; ``str(exc)`` when
    the failure is not a network one this knows."""
    chain = list(_chain(exc))
    text = " ".join(str(e) for e in chain).lower()
    if any(isinstance(e, socket.gaierror) for e in chain) or "name or service not known" in text or "nodename nor servname" in text \
            or "getaddrinfo failed" in text or "temporary failure in name resolution" in text \
            or "cannot resolve" in text:
        return translate("NetworkErrors", "No computer of that name was found on the network. Check the name, or type "
                            "its IP address instead (for example 192.168.1.20).")
    if any(isinstance(e, httpx.TimeoutException) for e in chain) or "timed out" in text:
        return translate("NetworkErrors", "No reply in time. The computer may be asleep, switched off, or on another "
                            "network.")
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "refused" in text \
            or "all connection attempts failed" in text:
        return translate("NetworkErrors", "Nothing answers at that address. Check that herd-agent runs on that computer "
                            "and that the port is right (herd-agent uses 50050 unless told otherwise).")
    if any(isinstance(e, OSError) and e.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH) for e in chain):
        return translate("NetworkErrors", "That address cannot be reached from this computer. Is it on another network?")
    if any(isinstance(e, (httpx.RemoteProtocolError, httpx.ReadError)) for e in chain) \
            or "peer closed connection" in text or "incomplete chunked read" in text:
        return translate("NetworkErrors", "The connection was cut off in the middle of the reply (the server or one of "
                            "its workers stopped).")
    if any(isinstance(e, httpx.ConnectError) for e in chain):
        return translate("NetworkErrors", "Could not connect. Check the address and that the computer is on this "
                            "network.")
    return str(exc) or type(exc).__name__
