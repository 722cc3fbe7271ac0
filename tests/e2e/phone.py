"""A phone on the simulated LAN: sends requests to herd's front door and prints what came back.

Run inside the phone's namespace: ``python phone.py REQUESTS_JSON``, where each request is
``{"url", "method", "key"?, "json"?, "stream"?}``. Prints one JSON list: per request its
``status`` (None when the connection failed, then ``error`` says how), ``headers``, ``body`` or
the SSE ``events`` of a stream.
"""

from __future__ import annotations

import asyncio
import json
import sys

import httpx


async def one(client: httpx.AsyncClient, req: dict) -> dict:
    headers = {"Authorization": f"Bearer {req['key']}"} if req.get("key") else {}
    try:
        if req.get("stream"):
            events = []
            async with client.stream(req["method"], req["url"], json=req.get("json"), headers=headers) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: {"):
                        events.append(json.loads(line[6:]))
            return {"status": r.status_code, "headers": dict(r.headers), "events": events}
        r = await client.request(req["method"], req["url"], json=req.get("json"), headers=headers)
        return {"status": r.status_code, "headers": dict(r.headers), "body": r.text}
    except httpx.HTTPError as exc:
        return {"status": None, "error": f"{type(exc).__name__}: {exc}"}


async def main(requests: list[dict]) -> None:
    async with httpx.AsyncClient(timeout=120) as client:
        print(json.dumps([await one(client, r) for r in requests]))


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
