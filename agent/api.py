"""The control API (aiohttp): routes, the bearer-token check, and strict request validation.

Every handler answers JSON. Client mistakes are 4xx with ``{"error": "...", "field": "..."}``
naming what was wrong; only a bug in the agent can produce a 5xx (the fuzz test hunts for those).
Endpoints other than ``info``, ``ping``, ``pair``, ``prove`` and ``/openapi.json`` need
``Authorization: Bearer <token>``; without a valid one the answer is 401 and nothing changes.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import TYPE_CHECKING

from aiohttp import web

from agent import protocol as P
from agent.openapi import openapi_document
from agent.pairing import PROOF_NONCE_MAX, PROOF_NONCE_MIN, TOKEN_ID_HEX, PairingLocked, WrongPin
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
        keep = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "retry-after", "www-authenticate")}
        return web.json_response({"error": exc.text or exc.reason or "error"}, status=exc.status, headers=keep)


@web.middleware
async def _require_token(request: web.Request, handler):
    """401 unless a paired master's token is presented (public paths excepted)."""
    if request.match_info.http_exception is not None or request.path in P.PUBLIC_PATHS:
        return await handler(request)
    agent: Agent = request.app[AGENT_KEY]
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    master = agent.state.master_for_token(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
    if master is None:
        raise _json_error(web.HTTPUnauthorized, "not paired / wrong token",
                          headers={"WWW-Authenticate": 'Bearer realm="herd-agent"'})
    agent.note_master_address(master, _remote(request))
    return await handler(request)


def _remote(request: web.Request) -> str:
    return normalise_ip(request.remote or "")


async def _json_object(request: web.Request, allowed: set[str]) -> dict:
    """The request body as a JSON object with only ``allowed`` keys (empty body = ``{}``)."""
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
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


async def pair(request: web.Request) -> web.Response:
    agent: Agent = request.app[AGENT_KEY]
    body = await _json_object(request, {"pin", "name"})
    pin = body.get("pin")
    if not isinstance(pin, str) or not (pin.isascii() and pin.isdigit() and len(pin) == P.PIN_DIGITS):
        raise BadRequest(f"pin must be a string of {P.PIN_DIGITS} digits", "pin")
    name = body.get("name", "")
    if not isinstance(name, str) or len(name) > 100:
        raise BadRequest("name must be a string of at most 100 characters", "name")
    try:
        token = agent.pair(pin, _remote(request), name)
    except PairingLocked as exc:
        raise _json_error(web.HTTPTooManyRequests, str(exc),
                          headers={"Retry-After": str(int(exc.retry_after) + 1)}) from None
    except WrongPin as exc:
        raise _json_error(web.HTTPForbidden, str(exc)) from None
    return web.json_response({"token": token, "id": agent.state.node_id, "fp": agent.state.fingerprint})


async def prove(request: web.Request) -> web.Response:
    """Prove this agent holds a pairing (see :mod:`agent.pairing`) without the token being sent."""
    agent: Agent = request.app[AGENT_KEY]
    body = await _json_object(request, {"token_id", "nonce"})
    tid = body.get("token_id")
    if not isinstance(tid, str) or not re.fullmatch(f"[0-9a-f]{{{TOKEN_ID_HEX}}}", tid):
        raise BadRequest(f"token_id must be {TOKEN_ID_HEX} lowercase hex digits", "token_id")
    nonce = body.get("nonce")
    if not isinstance(nonce, str) or not re.fullmatch(
            f"(?:[0-9a-f]{{2}}){{{PROOF_NONCE_MIN},{PROOF_NONCE_MAX}}}", nonce):
        raise BadRequest(f"nonce must be {PROOF_NONCE_MIN} to {PROOF_NONCE_MAX} bytes as lowercase hex",
                         "nonce")
    sock = request.transport.get_extra_info("sockname") if request.transport else None
    address = normalise_ip(str(sock[0])) if sock else ""
    wait = agent.proof_limiter.take()
    if wait > 0:
        raise _json_error(web.HTTPTooManyRequests, f"too many proofs asked; retry in {wait:.0f} s",
                          headers={"Retry-After": str(int(wait) + 1)})
    mac = agent.prove(tid, bytes.fromhex(nonce), address)
    if mac is None:
        raise _json_error(web.HTTPNotFound, "no pairing with this token_id (pair again)")
    return web.json_response({"mac": mac, "address": address, "id": agent.state.node_id})


async def status(request: web.Request) -> web.Response:
    return web.json_response(await request.app[AGENT_KEY].status())


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
    try:
        await agent.start_rpc(port=port, threads=threads, devices=devices, cache=cache)
    except agent.Refused as exc:
        raise _json_error(web.HTTPConflict, str(exc)) from None
    return web.json_response(agent.rpc_status())


async def rpc_stop(request: web.Request) -> web.Response:
    agent: Agent = request.app[AGENT_KEY]
    await _json_object(request, set())
    await agent.stop_rpc()
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
    app = web.Application(middlewares=[_errors_as_json, _require_token], client_max_size=64 * 1024)
    app[AGENT_KEY] = agent
    app.router.add_get(P.PATH_INFO, info)
    app.router.add_get(P.PATH_PING, ping)
    app.router.add_post(P.PATH_PAIR, pair)
    app.router.add_post(P.PATH_PROVE, prove)
    app.router.add_get(P.PATH_STATUS, status)
    app.router.add_post(P.PATH_RPC_START, rpc_start)
    app.router.add_post(P.PATH_RPC_STOP, rpc_stop)
    app.router.add_get(P.PATH_RPC_LOG, rpc_log)
    app.router.add_get(P.PATH_BANDWIDTH, bandwidth)
    app.router.add_get(P.PATH_OPENAPI, openapi)
    return app
