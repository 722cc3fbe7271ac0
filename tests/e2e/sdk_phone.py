"""A phone app on the simulated LAN that uses the official openai SDK (#34), run inside the
phone's namespace: ``python sdk_phone.py``. It reads one JSON command per line on stdin and
answers one JSON line each, so a test can act on the master between two requests (revoke a key)
without paying for a new process. A command is ``{"op", "base", "key", "ca"?, "url"?}``:

* ``op``: ``chat`` (a plain completion), ``stream`` (a streamed one), ``models``, or ``get``
  (an absolute ``url`` through the SDK's own client: an admin route);
* ``ca``: the certificate file to pin (an httpx client with ``verify`` = only that
  certificate), or absent for the system's authorities.

An answer is ``{"ok": true, "text", "chunks", "at"}`` (a stream's also ``"finish_reason"``) or ``{"ok": false, "error": the SDK's
exception class, "status", "message", "at"}``; ``at`` is the wall clock when the answer came
(the namespaces share the machine's clock). :class:`SdkPhone` drives it from a test.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai

MODEL = "SmolLM2-135M-Instruct.Q4_1"


def client(cmd: dict) -> openai.OpenAI:
    verify = ssl.create_default_context(cafile=cmd["ca"]) if cmd.get("ca") else True
    return openai.OpenAI(base_url=cmd["base"], api_key=cmd.get("key") or "none", max_retries=0, timeout=120,
                         http_client=httpx.Client(verify=verify))


def run(cmd: dict) -> dict:
    c = client(cmd)
    # No key: the SDK insists on one, so it gets a placeholder and the request leaves its
    # Authorization header out.
    no_key = {"extra_headers": {"Authorization": openai.Omit()}} if not cmd.get("key") else {}
    messages = [{"role": "user", "content": cmd.get("prompt", "Name a fruit.")}]
    if cmd["op"] == "chat":
        r = c.chat.completions.create(model=MODEL, messages=messages, max_tokens=12, temperature=0, **no_key)
        return {"text": r.choices[0].message.content, "chunks": 1}
    if cmd["op"] == "stream":
        parts, finish = [], None
        for ch in c.chat.completions.create(model=MODEL, messages=messages, max_tokens=cmd.get("max_tokens", 12),
                                            temperature=0, stream=True, extra_body=cmd.get("extra_body"), **no_key):
            if ch.choices:
                parts.append(ch.choices[0].delta.content or "")
                finish = ch.choices[0].finish_reason or finish
        return {"text": "".join(parts), "chunks": len(parts), "finish_reason": finish}
    if cmd["op"] == "models":
        return {"text": " ".join(m.id for m in c.models.list(**no_key)), "chunks": 1}
    if cmd["op"] == "get":
        return {"text": json.dumps(c.get(cmd["url"], cast_to=object, options={"headers": no_key.get("extra_headers", {})})), "chunks": 1}
    raise ValueError(f"unknown op {cmd['op']!r}")


class SdkPhone:
    """This script, running in ``host``'s namespace (a test's phone), for a test to drive.

    Args:
        host: the :class:`lan.Host` to run on.
        base: the base URL the SDK is given (``…/v1``).
        ca: the certificate file to pin, or None.
    """

    def __init__(self, host, base: str, ca: str | None) -> None:
        self.host, self.base, self.ca = host, base, ca
        self.proc = host.popen([sys.executable, str(Path(__file__))], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def send(self, op: str, key: str = "", pin: bool = True, **more) -> None:
        """Send one command (module docstring); :meth:`answer` reads what came back."""
        cmd = {"op": op, "base": self.base, "key": key, **({"ca": self.ca} if pin and self.ca else {}), **more}
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def answer(self) -> dict:
        """The answer to the command sent last (waits for it)."""
        line = self.proc.stdout.readline()
        assert line, f"the phone's SDK script ended: {self.proc.stderr.read()}"
        return json.loads(line)

    def ask(self, op: str, key: str = "", pin: bool = True, **more) -> dict:
        """:meth:`send`, then :meth:`answer`."""
        self.send(op, key, pin, **more)
        return self.answer()


def main() -> None:
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            out = {"ok": True, **run(cmd)}
        except openai.OpenAIError as exc:
            cause = exc.__cause__ or exc.__context__
            out = {"ok": False, "error": type(exc).__name__, "status": getattr(exc, "status_code", None),
                   "message": f"{exc} ({type(cause).__name__}: {cause})" if cause else str(exc)}
        print(json.dumps({**out, "at": time.time()}), flush=True)


if __name__ == "__main__":
    main()
