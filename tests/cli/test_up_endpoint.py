"""What ``herd up`` says about its endpoint (#34): the front door's addresses with ``--lan``, and
that llama-server itself is open to the network, with no key, without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gui.cli.cluster_commands import _endpoint_line
from gui.cluster.llama.server_command import ServerOptions, ServerSpec
from gui.cluster.serving.api_keys import ApiKeyStore
from gui.cluster.serving.door_certificate import door_certificate
from gui.cluster.serving.sharing import door_hosts, share_on_lan


def spec(host: str, port: int = 8080) -> ServerSpec:
    return ServerSpec(model=Path("m.gguf"), options=ServerOptions(host=host, port=port, alias="m"))


@pytest.mark.parametrize(("host", "where"), [("0.0.0.0", "every address of this computer"),
                                             ("192.168.1.5", "192.168.1.5")])
def test_llama_server_open_to_the_network_without_the_front_door_is_warned_about(host, where):
    first, second = _endpoint_line(spec(host)).splitlines()
    assert first.startswith("Endpoint: http://")
    assert second.startswith(f"llama-server listens on {where} (--host {host}): other computers")
    assert "with no key" in second and "share it with --lan instead" in second


def test_loopback_without_the_front_door_is_not_warned_about():
    assert _endpoint_line(spec("127.0.0.1")).splitlines() == [
        "Endpoint: http://127.0.0.1:8080/v1  (OpenAI-compatible; model 'm'; chat at "
        "http://127.0.0.1:8080/v1/chat/completions)"]


def test_with_lan_llama_server_moves_to_loopback_and_the_door_prints_where_it_listens(tmp_path):
    upstream, door = share_on_lan(ServerOptions(port=8123, alias="m"), "192.168.1.5", ApiKeyStore(tmp_path / "k.json"))
    assert (upstream.host, upstream.alias) == ("127.0.0.1", "m") and upstream.port != 8123
    assert door.upstream == f"http://127.0.0.1:{upstream.port}" and door.port == 8123
    lines = _endpoint_line(spec(upstream.host, upstream.port), door).splitlines()
    assert lines[0].startswith("Endpoint: http://192.168.1.5:8123/v1  (OpenAI-compatible; model 'm'")
    assert lines[1] == "  also at http://127.0.0.1:8123/v1" and "herd keys add NAME" in lines[2]
    assert len(lines) == 3


def test_the_door_listens_on_loopback_beside_a_named_lan_address():
    assert door_hosts(None) == ("0.0.0.0",)
    assert door_hosts("0.0.0.0") == ("0.0.0.0",)
    assert door_hosts("192.168.1.5") == ("192.168.1.5", "127.0.0.1")
    assert door_hosts("127.0.0.1") == ("127.0.0.1",)


def test_with_https_the_door_prints_its_https_addresses_and_the_certificate_names_them(tmp_path):
    cert = door_certificate(["192.168.1.5"], "den-pc.local", tmp_path)
    upstream, door = share_on_lan(ServerOptions(port=8123, alias="m"), "192.168.1.5",
                                  ApiKeyStore(tmp_path / "k.json"), certificate=cert)
    assert door.upstream == f"http://127.0.0.1:{upstream.port}"  # llama-server behind it stays plain, on loopback
    lines = _endpoint_line(spec(upstream.host, upstream.port), door).splitlines()
    assert lines[0].startswith("Endpoint: https://192.168.1.5:8123/v1")
    assert "https://127.0.0.1:8123/v1" in lines[1]
    assert {"192.168.1.5", "127.0.0.1"} <= set(cert.names)  # every address it prints is one the certificate holds


def test_https_without_lan_is_refused_in_words():
    import argparse
    import asyncio

    from gui.cli.cluster_commands import _front_door
    from gui.cli.common import CommandError

    args = argparse.Namespace(lan=False, https=True, host=None, key_for_local=False)
    with pytest.raises(CommandError, match="--https needs --lan"):
        asyncio.run(_front_door(args, ServerOptions(port=8123)))
