"""The control API (aiohttp over TLS 1.3): routes, the client-certificate check, and strict
request validation.

Every handler answers JSON. Client mistakes are 4xx with ``{"error": "...", "field": "..."}``
naming what was wrong; only a bug in the agent can produce a 5xx (the fuzz test hunts for those).
Endpoints other than ``info``, ``ping``, the two pairing steps and ``/openapi.json`` need the
TLS client certificate of a paired master (pinned at pairing, see :mod:`agent.identity`);
without one the answer is 401 and nothing changes.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import TYPE_CHECKING

from aiohttp import web

from agent import protocol as P
from agent.json_limits import MAX_JSON_DEPTH, JsonTooDeep
from agent.json_limits import loads as json_loads
from agent.openapi import openapi_document
from agent.identity import IdentityError, der_of_pem, fingerprint_of_der, peer_fingerprint
from agent.pairing import BadExchange, NoPin, PairingLocked, WrongPin
from agent.relay import normalise_ip

if TYPE_CHECKING:
    from agent.daemon import Agent

log = logging.getLogger("herd.agent.api")

AGENT_KEY = web.AppKey("agent", object)
_DEVICE_NAME = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")
_BANDWIDTH_CHUNK = bytes(256 * 1024)


class BadRequest(web.HTTPBadRequest):
    """400 with a JSON body naming the offending field."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(text=json.dumps({"error": message, "field": field}), content_type="application/json")


def _json_error(exc_cls, message: str, **kw) -> web.HTTPException:
    return exc_cls(text=json.dumps({"error": message}), content_type="application/json", **kw)


@web.middleware
async def _errors_as_json(request: web.Request, handler):
    """Turn aiohttp's plain-text 404/405/413 into JSON like every other answer."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.content_type == "application/json" or exc.status < 400:
            raise
        keep = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "retry-after")}
        return web.json_response({"error": exc.text or exc.reason or "error"}, status=exc.status, headers=keep)


MASTER_KEY = web.RequestKey("master", object)


@web.middleware
async def _require_master(request: web.Request, handler):
    """401 unless the TLS client certificate is a paired master's (public paths excepted)."""
    if request.match_info.http_exception is not None or request.path in P.PUBLIC_PATHS:
        return await handler(request)
    agent: Agent = request.app[AGENT_KEY]
    ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
    agent.state.refresh()  # an unpairing by `herd-agent unpair` counts from the next request
    master = agent.state.master_for_fingerprint(peer_fingerprint(ssl_object))
    if master is None:
        raise _json_error(web.HTTPUnauthorized, "not paired: no client certificate, or not a paired "
                                                "master's (pair with the PIN this node shows)")
    request[MASTER_KEY] = master
    agent.leases.touch(master.fingerprint)  # the holder's calls keep its lease fresh
    return await handler(request)


def _take_lease(request: web.Request) -> None:
    """409 unless the calling master holds the worker's lease, or takes it now."""
    agent: Agent = request.app[AGENT_KEY]
    master = request[MASTER_KEY]
    other = agent.leases.take(master.fingerprint, master.name)
    if other is not None:
        raise _json_error(web.HTTPConflict, f"the RPC worker is leased to master {other.name!r} "
                                            f"(idle {agent.leases.idle_for():.0f} s; a lease ends after "
                                            f"{agent.leases.idle:.0f} s unused)")


def _remote(request: web.Request) -> str:
    return normalise_ip(request.remote or "")


async def _json_object(request: web.Request, allowed: set[str]) -> dict:
    """The request body as a JSON object with only ``allowed`` keys (empty body = ``{}``)."""
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = json_loads(raw)
    except JsonTooDeep:
        # Python's parser would recurse into a RecursionError: a 500 and a traceback (#32)
        log.warning("refused a request to %s from %s: its JSON body nests deeper than %d levels",
                    request.path, _remote(request), MAX_JSON_DEPTH)
        raise BadRequest(f"body is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})", unknown[0])
    return body


def _int_field(body: dict, name: str, lo: int, hi: int) -> int | None:
    v = body.get(name)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool):
        raise BadRequest(f"{name} must be an integer", name)
    if not lo <= v <= hi:
        raise BadRequest(f"{name} must be between {lo} and {hi}, got {v}", name)
    return v


def _int_query(request: web.Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"\d{1,12}", raw.strip()):
        raise BadRequest(f"{name} must be a whole number", name)
    v = int(raw)
    if not lo <= v <= hi:
        raise BadRequest(f"{name} must be between {lo} and {hi}, got {v}", name)
    return v


# --- handlers ---------------------------------------------------------------------------------

async def info(request: web.Request) -> web.Response:
    return web.json_response(request.app[AGENT_KEY].info())


async def ping(request: web.Request) -> web.Response:
    agent: Agent = request.app[AGENT_KEY]
    return web.json_response({"ok": True, "id": agent.state.node_id, "time": time.time()})


def _hex_field(body: dict, name: str, max_bytes: int) -> bytes:
    v = body.get(name)
    if not isinstance(v, str) or not re.fullmatch(r"(?:[0-9a-f]{2})+", v) or len(v) > 2 * max_bytes:
        raise BadRequest(f"{name} must be lowercase hex of at most {max_bytes} bytes", name)
    return bytes.fromhex(v)


async def pair_start(request: web.Request) -> web.Response:
    """PAKE step 1 (see :mod:`agent.pairing`)."""
    agent: Agent = request.app[AGENT_KEY]
    body = await _json_object(request, {"msg", "name"})
    msg = _hex_field(body, "msg", 256)
    name = body.get("name", "")
    if not isinstance(name, str) or len(name) > 100:
        raise BadRequest("name must be a string of at most 100 characters", "name")
    try:
        sid, reply = await agent.pairing.start(_remote(request), msg)
    except PairingLocked as exc:
        raise _json_error(web.HTTPTooManyRequests, str(exc),
                          headers={"Retry-After": str(int(exc.retry_after) + 1)}) from None
    except NoPin as exc:
        raise _json_error(web.HTTPForbidden, str(exc)) from None
    except BadExchange as exc:
        raise BadRequest(str(exc), "msg") from None
    agent.pending_names[sid] = name
    return web.json_response({"session": sid, "msg": reply.hex()})


async def pair_finish(request: web.Request) -> web.Response:
    """PAKE step 2: on a right MAC the master's certificate is pinned."""
    agent: Agent = request.app[AGENT_KEY]
    body = await _json_object(request, {"session", "cert", "mac"})
    sid = body.get("session")
    if not isinstance(sid, str) or not re.fullmatch(r"[0-9a-f]{32}", sid):
        raise BadRequest("session must be 32 lowercase hex digits", "session")
    mac = _hex_field(body, "mac", 32)
    cert = body.get("cert")
    if not isinstance(cert, str) or len(cert) > 8192:
        raise BadRequest("cert must be a PEM certificate", "cert")
    try:
        der = der_of_pem(cert)
    except IdentityError as exc:
        raise BadRequest(f"cert: {exc}", "cert") from None
    name = agent.pending_names.pop(sid, "")
    try:
        agent_mac = agent.pairing.finish(_remote(request), sid, der, mac)
    except WrongPin as exc:
        agent.log_limited("pair", logging.WARNING, "pairing from %s failed: %s", _remote(request), exc)
        raise _json_error(web.HTTPForbidden, str(exc)) from None
    except BadExchange as exc:
        raise BadRequest(str(exc), "session") from None
    agent.paired_master(name, cert, fingerprint_of_der(der), _remote(request))
    return web.json_response({"cert": agent.identity.cert_pem.decode("ascii"), "mac": agent_mac.hex(),
                              "id": agent.state.node_id})


async def retired(request: web.Request) -> web.Response:
    """Old masters' endpoints: say what changed instead of a bare 404."""
    what = ("pairing is by PAKE now (pair/start, pair/finish)" if request.path == P.PATH_PAIR
            else "identity is by pinned TLS keys now")
    raise _json_error(web.HTTPGone, f"{what}: update llama-herd on the master and pair again")


async def unpair(request: web.Request) -> web.Response:
    """The calling master forgets this node: its pairing here goes too."""
    agent: Agent = request.app[AGENT_KEY]
    await _json_object(request, set())
    master = request[MASTER_KEY]
    agent.unpair(master.fingerprint)
    return web.json_response({"unpaired": master.name})


async def status(request: web.Request) -> web.Response:
    # the address the master reached this node at names the interface to wake it by (#36)
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    local = normalise_ip(sockname[0]) if sockname else None
    return web.json_response(await request.app[AGENT_KEY].status(local_address=local))


async def rpc_start(request: web.Request) -> web.Response:
    agent: Agent = request.app[AGENT_KEY]
    body = await _json_object(request, {"port", "threads", "devices", "cache"})
    port = _int_field(body, "port", 1, 65535)
    threads = _int_field(body, "threads", 1, 1024)
    devices = body.get("devices")
    if devices is not None:
        if not isinstance(devices, list) or len(devices) > 16:
            raise BadRequest("devices must be a list of at most 16 device names", "devices")
        for d in devices:
            if not isinstance(d, str) or not _DEVICE_NAME.match(d):
                raise BadRequest(f"devices: {str(d)[:40]!r} is not a device name (letters, digits, _.:-)",
                                 "devices")
    cache = body.get("cache", True)
    if not isinstance(cache, bool):
        raise BadRequest("cache must be true or false", "cache")
    _take_lease(request)
    try:
        await agent.start_rpc(port=port, threads=threads, devices=devices, cache=cache,
                              master=request[MASTER_KEY].fingerprint)
    except agent.Refused as exc:
        raise _json_error(web.HTTPConflict, str(exc)) from None
    return web.json_response(agent.rpc_status())


async def rpc_stop(request: web.Request) -> web.Response:
    agent: Agent = request.app[AGENT_KEY]
    await _json_object(request, set())
    _take_lease(request)
    await agent.stop_rpc()
    agent.leases.release(request[MASTER_KEY].fingerprint)  # the worker is free for any master
    return web.json_response(agent.rpc_status())


async def rpc_log(request: web.Request) -> web.Response:
    agent: Agent = request.app[AGENT_KEY]
    tail = _int_query(request, "tail", 100, 0, P.LOG_TAIL_MAX)
    lines = list(agent.supervisor.lines)
    return web.json_response({"lines": lines[len(lines) - tail:] if tail else []})


async def bandwidth(request: web.Request) -> web.StreamResponse:
    nbytes = _int_query(request, "bytes", 8 * 1024 * 1024, 1, P.BANDWIDTH_MAX_BYTES)
    resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream",
                                       "Cache-Control": "no-store"})
    resp.content_length = nbytes
    await resp.prepare(request)
    left = nbytes
    while left > 0:
        chunk = _BANDWIDTH_CHUNK if left >= len(_BANDWIDTH_CHUNK) else _BANDWIDTH_CHUNK[:left]
        await resp.write(chunk)
        left -= len(chunk)
    await resp.write_eof()
    return resp


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


def build_app(agent: "Agent") -> web.Application:
    """The aiohttp application serving ``agent``."""
    app = web.Application(middlewares=[_errors_as_json, _require_master], client_max_size=64 * 1024)
    app[AGENT_KEY] = agent
    app.router.add_get(P.PATH_INFO, info)
    app.router.add_get(P.PATH_PING, ping)
    app.router.add_post(P.PATH_PAIR_START, pair_start)
    app.router.add_post(P.PATH_PAIR_FINISH, pair_finish)
    app.router.add_post(P.PATH_PAIR, retired)
    app.router.add_post(P.PATH_PROVE, retired)
    app.router.add_post(P.PATH_UNPAIR, unpair)
    app.router.add_get(P.PATH_STATUS, status)
    app.router.add_post(P.PATH_RPC_START, rpc_start)
    app.router.add_post(P.PATH_RPC_STOP, rpc_stop)
    app.router.add_get(P.PATH_RPC_LOG, rpc_log)
    app.router.add_get(P.PATH_BANDWIDTH, bandwidth)
    app.router.add_get(P.PATH_OPENAPI, openapi)
    return app
