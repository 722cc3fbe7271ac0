"""The OpenAPI 3 document of the control API, written by hand (served at ``/openapi.json``).

It is the contract the master's client and the fuzz test rely on: request schemas here are as
strict as the handlers in :mod:`agent.api`.
"""

from __future__ import annotations

from agent import __version__
from agent import protocol as P

_HEX = "^([0-9a-f]{2})+$"

_ERROR = {"type": "object", "properties": {"error": {"type": "string"},
                                           "field": {"type": ["string", "null"]}},
          "required": ["error"]}


def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _err(description: str) -> dict:
    return _json({"$ref": "#/components/schemas/Error"}, description)


_RPC = {
    "type": "object",
    "properties": {
        "state": {"type": "string", "enum": list(P.STATES)},
        "error": {"type": ["string", "null"]},
        "conflict": {"type": "boolean"},
        "port": {"type": "integer", "description": "the RPC port masters connect to"},
        "exposure": {"type": "string", "enum": ["relay", "open"]},
        "worker_port": {"type": ["integer", "null"]},
        "pid": {"type": ["integer", "null"]},
        "uptime_s": {"type": ["number", "null"]},
        "restarts": {"type": "integer"},
        "proto": {"type": "string"},
        "devices": {"type": "array", "items": {"type": "object", "properties": {
            "index": {"type": "integer"}, "name": {"type": "string"}, "description": {"type": "string"},
            "total_bytes": {"type": "integer"}, "free_bytes": {"type": "integer"}}}},
        "client": {"type": ["string", "null"], "description": "address of the connected master"},
        "refused": {"type": "integer", "description": "connections the relay refused"},
        "transfer": {"type": ["object", "null"], "description": "what the current (or last) "
                     "llama-server sent through the relay, for start-up progress; null without "
                     "a relay", "properties": {
                         "session": {"type": "integer", "description": "loads seen (a new one "
                                     "begins when a client connects to an idle worker)"},
                         "session_age_s": {"type": ["number", "null"]},
                         "idle_s": {"type": ["number", "null"], "description": "seconds since "
                                    "the last byte arrived"},
                         "bytes_received": {"type": "integer"},
                         "tensor_bytes": {"type": "integer", "description": "SET_TENSOR data bytes"},
                         "cached_bytes": {"type": "integer", "description": "bytes of tensors the "
                                          "worker's -c cache supplied (SET_TENSOR_HASH hits)"},
                         "hash_hits": {"type": "integer"}, "hash_misses": {"type": "integer"},
                         "graph_computes": {"type": "integer"}}},
        "weight_cache": {"type": "object", "description": "the worker's -c cache: the folder of the "
                         "master it serves (each master has its own), what all masters' folders hold "
                         "together and its cap (the setting, and the disk's free space less 2 GiB)",
                         "properties": {"dir": {"type": "string"},
                                        "bytes": {"type": "integer", "description": "all masters together"},
                                        "files": {"type": "integer"},
                                        "master_bytes": {"type": "integer",
                                                         "description": "in the folder of the master it serves"},
                                        "max_bytes": {"type": "integer"},
                                        "limit_bytes": {"type": "integer"}}},
        "last_crash": {"type": ["object", "null"], "description": "the worker's last crash, kept after "
                       "it was restarted", "properties": {
                           "error": {"type": "string"}, "lines": {"type": "array", "items": {"type": "string"}},
                           "uptime_s": {"type": "number"}}},
    },
    "required": ["state", "port", "restarts", "devices"],
}

#: ``/status``'s ``keep_awake``: the sleep inhibitor held while a master uses the worker (#36).
_KEEP_AWAKE = {"type": "object", "properties": {
    "enabled": {"type": "boolean", "description": "the agent's keep_awake setting"},
    "held": {"type": "boolean", "description": "the computer is kept from sleeping now"},
    "how": {"type": ["string", "null"], "enum": ["logind", "windows", "macos", None]},
    "error": {"type": ["string", "null"], "description": "why it could not be kept awake"}}}

#: ``/status``'s ``wake``: how to wake this node by Wake-on-LAN, for the interface the caller
#: reached it on (null when that interface has no MAC) (#36).
_WAKE = {"type": ["object", "null"], "properties": {
    "interface": {"type": "string"}, "mac": {"type": "string", "pattern": "^([0-9a-f]{2}:){5}[0-9a-f]{2}$"},
    "address": {"type": "string"}, "broadcast": {"type": ["string", "null"]}}}

_AUTH_ERRORS = {"401": _err("no client certificate, or not a paired master's (pair first)")}


def openapi_document() -> dict:
    """The full OpenAPI 3.0 document."""
    doc = _document()
    # Every request body is limited to 64 KiB (the API's client_max_size): a body the schema
    # allows (8192 four-byte characters, JSON-escaped) can still be larger than that.
    for ops in doc["paths"].values():
        for op in ops.values():
            if "requestBody" in op:
                op["responses"].setdefault("413", _err("the request body is larger than 64 KiB"))
    return doc


def _document() -> dict:
    return {
        "openapi": "3.1.0",
        "info": {"title": "herd-agent control API", "version": __version__,
                 "description": "Runs llama.cpp's RPC worker on behalf of a paired llama-herd master."},
        "components": {
            "securitySchemes": {"mtls": {"type": "mutualTLS", "description": "the client certificate of a paired master"}},
            "schemas": {"Error": _ERROR, "Rpc": _RPC},
        },
        "paths": {
            P.PATH_INFO: {"get": {
                "summary": "Who this node is (public)", "security": [],
                "responses": {"200": _json({"type": "object", "required": ["id", "name", "version", "ports"]},
                                           "node identity, versions and ports (no more: a stranger may ask)")}}},
            P.PATH_PING: {"get": {
                "summary": "Liveness (public)", "security": [],
                "responses": {"200": _json({"type": "object", "properties": {
                    "ok": {"type": "boolean"}, "id": {"type": "string"}, "time": {"type": "number"}}},
                    "alive")}}},
            P.PATH_PAIR_START: {"post": {
                "summary": "Pairing by PAKE, step 1: the master's SPAKE2 message (public)",
                "description": "See agent.pairing. The PIN never crosses the wire. Each start counts "
                               "as an attempt for the caller's address (exponential back-off).",
                "security": [],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {
                    "type": "object", "additionalProperties": False, "required": ["msg"],
                    "properties": {"msg": {"type": "string", "pattern": _HEX, "maxLength": 512},
                                   "name": {"type": "string", "maxLength": 100}}}}}},
                "responses": {
                    "200": _json({"type": "object", "required": ["session", "msg"], "properties": {
                        "session": {"type": "string"}, "msg": {"type": "string"}}}, "the agent's message"),
                    "400": _err("malformed request"),
                    "403": _err("no PIN is shown on the node now (herd-agent pin)"),
                    "429": _err("this address must wait before its next attempt (Retry-After)")}}},
            P.PATH_PAIR_FINISH: {"post": {
                "summary": "Pairing by PAKE, step 2: key confirmation and certificates (public)",
                "security": [],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {
                    "type": "object", "additionalProperties": False, "required": ["session", "cert", "mac"],
                    "properties": {"session": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
                                   "cert": {"type": "string", "maxLength": 8192},
                                   "mac": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}}}}},
                "responses": {
                    "200": _json({"type": "object", "required": ["cert", "mac", "id"], "properties": {
                        "cert": {"type": "string"}, "mac": {"type": "string"}, "id": {"type": "string"}}},
                        "paired: the agent's certificate and its MAC"),
                    "400": _err("malformed request, or an unknown or expired session"),
                    "403": _err("wrong PIN (the session is gone)")}}},
            P.PATH_PAIR: {"post": {
                "summary": "Retired (PIN for a bearer token); answers 410", "security": [],
                "responses": {"410": _err("pairing is by PAKE now: update the master")}}},
            P.PATH_PROVE: {"post": {
                "summary": "Retired (token proof); answers 410", "security": [],
                "responses": {"410": _err("identity is by pinned TLS keys now: update the master")}}},
            P.PATH_UNPAIR: {"post": {
                "summary": "Forget the calling master's pairing",
                "security": [{"mtls": []}],
                "responses": {"200": _json({"type": "object", "properties": {"unpaired": {"type": "string"}}},
                                           "unpaired"), "400": _err("malformed request"), **_AUTH_ERRORS}}},
            P.PATH_STATUS: {"get": {
                "summary": "Hardware, live load and the RPC worker",
                "security": [{"mtls": []}],
                "responses": {"200": _json({"type": "object", "required": ["id", "hardware", "load", "rpc"],
                                            "properties": {"rpc": {"$ref": "#/components/schemas/Rpc"},
                                                           "keep_awake": _KEEP_AWAKE, "wake": _WAKE}},
                                           "full state"), **_AUTH_ERRORS}}},
            P.PATH_RPC_START: {"post": {
                "summary": "Start (or restart with new options) the RPC worker",
                "security": [{"mtls": []}],
                "requestBody": {"required": False, "content": {"application/json": {"schema": {
                    "type": "object", "additionalProperties": False, "properties": {
                        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                        "threads": {"type": "integer", "minimum": 1, "maximum": 1024},
                        "devices": {"type": "array", "maxItems": 16, "items": {
                            "type": "string", "pattern": "^[A-Za-z0-9_.:\\-]{1,64}$"}},
                        "cache": {"type": "boolean", "default": True}}}}}},
                "responses": {"200": _json({"$ref": "#/components/schemas/Rpc"}, "start accepted"),
                              "400": _err("malformed request"),
                              "409": _err("the RPC port is in use, no RPC worker is installed, or the "
                                          "worker is leased to another master"), **_AUTH_ERRORS}}},
            P.PATH_RPC_STOP: {"post": {
                "summary": "Stop the RPC worker", "security": [{"mtls": []}],
                "responses": {"200": _json({"$ref": "#/components/schemas/Rpc"}, "stopped"),
                              "400": _err("malformed request"),
                              "409": _err("the worker is leased to another master"), **_AUTH_ERRORS}}},
            P.PATH_RPC_LOG: {"get": {
                "summary": "The RPC worker's last output lines", "security": [{"mtls": []}],
                "parameters": [{"name": "tail", "in": "query", "required": False, "schema": {
                    "type": "integer", "minimum": 0, "maximum": P.LOG_TAIL_MAX, "default": 100}}],
                "responses": {"200": _json({"type": "object", "required": ["lines"], "properties": {
                    "lines": {"type": "array", "items": {"type": "string"}}}}, "log lines"),
                    "400": _err("bad tail"), **_AUTH_ERRORS}}},
            P.PATH_BANDWIDTH: {"get": {
                "summary": "Stream N bytes to measure link throughput", "security": [{"mtls": []}],
                "parameters": [{"name": "bytes", "in": "query", "required": False, "schema": {
                    "type": "integer", "minimum": 1, "maximum": P.BANDWIDTH_MAX_BYTES}}],
                "responses": {"200": {"description": "N zero bytes",
                                      "content": {"application/octet-stream": {"schema": {
                                          "type": "string", "format": "binary"}}}},
                              "400": _err("bad byte count"), **_AUTH_ERRORS}}},
            P.PATH_OPENAPI: {"get": {"summary": "This document", "security": [],
                                     "responses": {"200": _json({"type": "object"}, "OpenAPI document")}}},
        },
    }
