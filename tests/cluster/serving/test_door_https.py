"""The front door over HTTPS with herd's own certificate (#34 item 8), on loopback, in front of a
real llama-server with the real SmolLM2 weights: a client that pins the certificate gets replies,
one that does not gets a certificate error, and — the reason for it all — a key sent over HTTP
can be read off the wire, over HTTPS it cannot (a recording TCP proxy between client and door).
The same from a phone on the simulated LAN: tests/e2e/test_openai_sdk_lan.py."""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest
from conftest import free_port, llama_server_process

from gui.cluster.serving.api_keys import ApiKeyStore
from gui.cluster.serving.door_certificate import door_certificate
from gui.cluster.serving.front_door import DoorSettings, FrontDoor

pytestmark = [pytest.mark.engine]


@pytest.fixture(scope="module")
def upstream(engine, smollm2, tmp_path_factory):
    with llama_server_process(engine, smollm2, tmp_path_factory.mktemp("llama"), ctx=1024,
                              extra_args=("-np", "1", "--threads", "1")) as url:
        yield url


async def open_door(upstream: str, tmp_path, https: bool) -> FrontDoor:
    keys = ApiKeyStore(tmp_path / "api-keys.json")
    cert = door_certificate([], "test-pc.local", tmp_path) if https else None
    door = FrontDoor(upstream, keys, port=free_port(), settings=DoorSettings(require_key_on_loopback=True),
                     ssl_context=cert.server_context() if cert else None)
    await door.start()
    return door


class RecordingProxy:
    """A raw TCP relay to ``port`` on loopback that keeps every byte the client sent: what
    anyone on the same network could read off the wire."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.sent = bytearray()
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)

        async def pipe(src, dst, record: bool) -> None:
            try:
                while data := await src.read(65536):
                    if record:
                        self.sent += data
                    dst.write(data)
                    await dst.drain()
            except ConnectionError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))

    async def stop(self) -> None:
        self.server.close()
        await self.server.wait_closed()


def chat() -> dict:
    return {"model": "any", "messages": [{"role": "user", "content": "Name a fruit."}], "max_tokens": 4,
            "temperature": 0}


async def test_a_client_that_pins_the_certificate_is_served_one_that_does_not_is_refused(upstream, tmp_path):
    door = await open_door(upstream, tmp_path, https=True)
    try:
        key = door.keys.add("laptop")
        base = door.urls[0]
        assert base.startswith("https://127.0.0.1:")
        cert = tmp_path / "door-cert.pem"
        async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(cert)), timeout=60) as pinned:
            r = await pinned.post(base + "/v1/chat/completions", json=chat(),
                                  headers={"Authorization": f"Bearer {key}"})
            assert r.status_code == 200, r.text
            assert r.json()["choices"][0]["message"]["content"].strip()
            # by the name too: localhost is one of the certificate's names
            r = await pinned.get(base.replace("127.0.0.1", "localhost") + "/health")
            assert r.status_code == 200
        async with httpx.AsyncClient(timeout=60) as unpinned:  # the system's authorities only
            with pytest.raises(httpx.ConnectError) as err:
                await unpinned.get(base + "/health")
        assert isinstance(err.value.__context__ or err.value.__cause__, ssl.SSLCertVerificationError) \
            or "CERTIFICATE_VERIFY_FAILED" in str(err.value)
        async with httpx.AsyncClient(timeout=60) as plain:  # plain HTTP to the HTTPS port gets nothing
            with pytest.raises(httpx.HTTPError):
                await plain.get(base.replace("https://", "http://") + "/health")
    finally:
        await door.stop()


@pytest.mark.parametrize("https", [False, True], ids=["http", "https"])
async def test_the_key_can_be_read_off_the_wire_over_http_but_not_over_https(upstream, tmp_path, https):
    door = await open_door(upstream, tmp_path, https=https)
    proxy = RecordingProxy(door.port)
    try:
        key = door.keys.add("phone")
        port = await proxy.start()
        scheme = "https" if https else "http"
        # The proxy stands for the network between phone and master: the client talks to it.
        pinned = ssl.create_default_context(cafile=str(tmp_path / "door-cert.pem")) if https else True
        async with httpx.AsyncClient(verify=pinned, timeout=60) as c:
            r = await c.post(f"{scheme}://localhost:{port}/v1/chat/completions", json=chat(),
                             headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200, r.text
        wire = bytes(proxy.sent)
        assert b"Name a fruit" in wire or https  # the prompt too is in clear over HTTP
        if https:
            assert key.encode() not in wire and b"Name a fruit" not in wire
            assert wire[:1] == b"\x16"  # a TLS handshake record, not an HTTP request line
        else:
            assert key.encode() in wire  # why HTTPS matters: anyone on the LAN could use this key
    finally:
        await proxy.stop()
        await door.stop()
