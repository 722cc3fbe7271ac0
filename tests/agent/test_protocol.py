"""The TXT record contract: what an agent advertises reads back, and garbage never raises."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from agent import protocol as P


def _txt_bytes(d: dict[str, str]) -> dict[bytes, bytes]:
    return {k.encode(): v.encode() for k, v in d.items()}


def test_built_txt_parses_back():
    nid = str(uuid.uuid4())
    txt = P.build_txt(node_id=nid, version="0.1.0", api_port=50050, rpc_port=50052, echo_port=50053,
                      state=P.STATE_READY, proto="7.0.0", engine="11434", fingerprint="ab" * 8)
    adv = P.parse_txt(_txt_bytes(txt), name="pc-1", addresses=["10.0.0.2"])
    assert adv == P.NodeAdvert(node_id=nid, api_port=50050, rpc_port=50052, echo_port=50053,
                               state="ready", version="0.1.0", proto="7.0.0", engine="11434",
                               fingerprint="ab" * 8, name="pc-1", addresses=("10.0.0.2",))


def test_values_are_capped():
    txt = P.build_txt(node_id=str(uuid.uuid4()), version="v" * 500, api_port=1, rpc_port=2,
                      echo_port=3, state="ready", fingerprint="f" * 1000)
    assert all(len(v.encode()) <= P.TXT_VALUE_MAX for v in txt.values())
    assert set(txt) == set(P.TXT_KEYS)


def test_rejects_records_without_identity_or_api():
    nid = str(uuid.uuid4()).encode()
    assert P.parse_txt({b"api": b"50050"}) is None
    assert P.parse_txt({b"id": nid}) is None
    assert P.parse_txt({b"id": b"not-a-uuid", b"api": b"1"}) is None
    assert P.parse_txt({b"id": nid, b"api": b"70000"}) is None
    assert P.parse_txt({b"id": nid, b"api": b"-5"}) is None
    assert P.parse_txt({b"id": nid, b"api": b"\xff\xfe"}) is None
    assert P.parse_txt(None) is None
    assert P.parse_txt([1, 2]) is None


def test_bad_optional_fields_fall_back():
    nid = str(uuid.uuid4())
    adv = P.parse_txt({b"id": nid.encode(), b"api": b"50050", b"rpc": b"x", b"state": b"exploded",
                       b"ver": None, b"fp": b"\x00\x01"})
    assert adv is not None
    assert (adv.rpc_port, adv.state, adv.version, adv.fingerprint) == (0, "unknown", "", "")


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.one_of(st.binary(max_size=8), st.sampled_from([k.encode() for k in P.TXT_KEYS])),
                       st.one_of(st.none(), st.binary(max_size=300), st.text(max_size=40)), max_size=12))
def test_parse_txt_never_raises(props):
    adv = P.parse_txt(props)
    assert adv is None or isinstance(adv, P.NodeAdvert)


def test_instance_name_is_a_safe_label():
    assert P.instance_name("kitchen.pc") == "kitchen-pc"
    assert P.instance_name("") == "herd-node"
    long = P.instance_name("é" * 100)
    assert len(long.encode()) <= P.INSTANCE_NAME_MAX and long
