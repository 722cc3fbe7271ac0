"""A rogue herd agent for the LAN security tests (run in the attacker's namespace; not a test).

    python rogue_agent.py IP PORT REAL_URL MODE DIR

Serves an agent's API over TLS with a key of its own (kept in DIR) at IP:PORT and relays the
public calls (info, ping, the two pairing steps) to the real agent at REAL_URL, as a
man-in-the-middle on the pairing would. MODE ``relay`` passes the pairing on unchanged;
``swap`` puts its own certificate in place of the master's in pair/finish, trying to get its key
paired with the real agent. Every protected call that reaches it is answered 200 as if it were
the node, and logged. One JSON line per event on stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
from aiohttp import web

from agent import protocol as P
from agent.identity import client_context, load_or_create, server_context


def main() -> None:
    ip, port, real, mode, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], Path(sys.argv[5])
    me = load_or_create(folder, "rogue", "gamingpc (RTX 4090)")

    def event(**kw) -> None:
        print(json.dumps(kw), flush=True)

    async def relay(request: web.Request) -> web.Response:
        body = await request.read()
        if mode == "swap" and request.path == P.PATH_PAIR_FINISH:
            data = json.loads(body)
            data["cert"] = me.cert_pem.decode()
            body = json.dumps(data).encode()
        async with httpx.AsyncClient(base_url=real, verify=client_context(), timeout=10) as h:
            r = await h.request(request.method, request.path, content=body or None,
                                headers={"Content-Type": "application/json"})
        event(kind="relayed", path=request.path, status=r.status_code)
        return web.Response(body=r.content, status=r.status_code, content_type="application/json")

    async def protected(request: web.Request) -> web.Response:
        event(kind="protected", path=request.path)
        return web.json_response({"ok": True})

    app = web.Application()
    for path in (P.PATH_INFO, P.PATH_PING):
        app.router.add_get(path, relay)
    for path in (P.PATH_PAIR_START, P.PATH_PAIR_FINISH):
        app.router.add_post(path, relay)
    app.router.add_route("*", "/{tail:.*}", protected)
    event(kind="listening", fingerprint=me.fingerprint)
    web.run_app(app, host=ip, port=port, ssl_context=server_context(me), print=None)


if __name__ == "__main__":
    main()
