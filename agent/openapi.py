"""The OpenAPI 3 document of the control API, written by hand (served at ``/openapi.json``).

It is the contract the master's client and the fuzz test rely on: request schemas here are as
strict as the handlers in :mod:`agent.api`.
"""

from __future__ import annotations

from agent import __version__
from agent import protocol as P
from agent.pairing import PROOF_NONCE_MAX, PROOF_NONCE_MIN, TOKEN_ID_HEX

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
        "last_crash": {"type": ["object", "null"], "description": "the worker's last crash, kept after "
                       "it was restarted", "properties": {
                           "error": {"type": "string"}, "lines": {"type": "array", "items": {"type": "string"}},
                           "uptime_s": {"type": "number"}}},
    },
    "required": ["state", "port", "restarts", "devices"],
}

_AUTH_ERRORS = {"401": _err("no or wrong bearer token (pair first)")}


def openapi_document() -> dict:
    """The full OpenAPI 3.0 document."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "herd-agent control API", "version": __version__,
                 "description": "Runs llama.cpp's RPC worker on behalf of a paired llama-herd master."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": _ERROR, "Rpc": _RPC},
        },
        "paths": {
            P.PATH_INFO: {"get": {
                "summary": "Who this node is (public)", "security": [],
                "responses": {"200": _json({"type": "object", "required": ["id", "name", "paired"]},
                                           "node identity, versions, hardware summary, RPC state")}}},
            P.PATH_PING: {"get": {
                "summary": "Liveness (public)", "security": [],
                "responses": {"200": _json({"type": "object", "properties": {
                    "ok": {"type": "boolean"}, "id": {"type": "string"}, "time": {"type": "number"}}},
                    "alive")}}},
            P.PATH_PAIR: {"post": {
                "summary": "Trade the PIN shown on the worker for a bearer token (public)",
                "security": [],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {
                    "type": "object", "additionalProperties": False, "required": ["pin"],
                    "properties": {"pin": {"type": "string", "pattern": f"^[0-9]{{{P.PIN_DIGITS}}}$"},
                                   "name": {"type": "string", "maxLength": 100}}}}}},
                "responses": {
                    "200": _json({"type": "object", "required": ["token"], "properties": {
                        "token": {"type": "string"}, "id": {"type": "string"}, "fp": {"type": "string"}}},
                        "paired"),
                    "400": _err("malformed request"),
                    "403": _err("wrong PIN"),
                    "429": _err("too many wrong PINs; locked out for a while (Retry-After)")}}},
            P.PATH_PROVE: {"post": {
                "summary": "Prove this agent holds a pairing, without the token crossing the wire (public)",
                "description": "mac = HMAC-SHA256(key=sha256(token), nonce || id || 0x00 || address); "
                               "address is the IP this agent was reached at.",
                "security": [],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {
                    "type": "object", "additionalProperties": False, "required": ["token_id", "nonce"],
                    "properties": {
                        "token_id": {"type": "string", "pattern": f"^[0-9a-f]{{{TOKEN_ID_HEX}}}$"},
                        "nonce": {"type": "string",
                                  "pattern": f"^([0-9a-f]{{2}}){{{PROOF_NONCE_MIN},{PROOF_NONCE_MAX}}}$"}}}}}},
                "responses": {
                    "200": _json({"type": "object", "required": ["mac", "address", "id"], "properties": {
                        "mac": {"type": "string"}, "address": {"type": "string"},
                        "id": {"type": "string"}}}, "the proof"),
                    "400": _err("malformed request"),
                    "404": _err("no pairing with this token_id"),
                    "429": _err("too many proofs asked; retry later (Retry-After)")}}},
            P.PATH_STATUS: {"get": {
                "summary": "Hardware, live load and the RPC worker",
                "security": [{"bearer": []}],
                "responses": {"200": _json({"type": "object", "required": ["id", "hardware", "load", "rpc"],
                                            "properties": {"rpc": {"$ref": "#/components/schemas/Rpc"}}},
                                           "full state"), **_AUTH_ERRORS}}},
            P.PATH_RPC_START: {"post": {
                "summary": "Start (or restart with new options) the RPC worker",
                "security": [{"bearer": []}],
                "requestBody": {"required": False, "content": {"application/json": {"schema": {
                    "type": "object", "additionalProperties": False, "properties": {
                        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                        "threads": {"type": "integer", "minimum": 1, "maximum": 1024},
                        "devices": {"type": "array", "maxItems": 16, "items": {
                            "type": "string", "pattern": "^[A-Za-z0-9_.:\\-]{1,64}$"}},
                        "cache": {"type": "boolean", "default": True}}}}}},
                "responses": {"200": _json({"$ref": "#/components/schemas/Rpc"}, "start accepted"),
                              "400": _err("malformed request"),
                              "409": _err("the RPC port is in use, or no RPC worker is installed"), **_AUTH_ERRORS}}},
            P.PATH_RPC_STOP: {"post": {
                "summary": "Stop the RPC worker", "security": [{"bearer": []}],
                "responses": {"200": _json({"$ref": "#/components/schemas/Rpc"}, "stopped"),
                              "400": _err("malformed request"), **_AUTH_ERRORS}}},
            P.PATH_RPC_LOG: {"get": {
                "summary": "The RPC worker's last output lines", "security": [{"bearer": []}],
                "parameters": [{"name": "tail", "in": "query", "required": False, "schema": {
                    "type": "integer", "minimum": 0, "maximum": P.LOG_TAIL_MAX, "default": 100}}],
                "responses": {"200": _json({"type": "object", "required": ["lines"], "properties": {
                    "lines": {"type": "array", "items": {"type": "string"}}}}, "log lines"),
                    "400": _err("bad tail"), **_AUTH_ERRORS}}},
            P.PATH_BANDWIDTH: {"get": {
                "summary": "Stream N bytes to measure link throughput", "security": [{"bearer": []}],
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
