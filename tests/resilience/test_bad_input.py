"""Bad input, swept: raw garbage requests to a real agent (2,000+, on top of the schema-driven
fuzz in tests/agent/test_fuzz.py), corrupt and truncated GGUF and profile files, half-written
settings and state files, and a rogue mDNS advertiser on the simulated LAN. No crash, a clear
error naming what is wrong, and nothing lost."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import httpx
import pytest
from cluster.agents import paired_agent, start_agent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lan import Lan

from agent import protocol as P
from agent.settings import STATE_NAME, Settings, SettingsError, dump_settings, load_settings, load_state
from gui.cluster.launching.profile import ProfileError, load_profile, make_profile, profile_from_json, save_profile
from gui.cluster.llama.model import ModelError, inspect_model
from gui.cluster.nodes.records import Node
from gui.cluster.planning.plan import Device, Plan

# --- raw requests ------------------------------------------------------------------------------

PATHS = [P.PATH_INFO, P.PATH_PING, P.PATH_PAIR, P.PATH_PAIR_START, P.PATH_PAIR_FINISH, P.PATH_STATUS, P.PATH_RPC_START, P.PATH_RPC_STOP,
         P.PATH_RPC_LOG, P.PATH_BANDWIDTH, P.PATH_OPENAPI, "/", "/api", "/api/v1/", "/api/v1/../info",
         "/%00", "/api/v1/status%20", "/" + "a" * 5000]
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=20)
bodies = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(st.sampled_from(["pin", "name", "port", "threads", "devices", "cache", "x"]),
                    json_values, max_size=4).map(lambda v: json.dumps(v).encode()),
    st.just(b"{" * 5000),                                   # deep nesting
    st.just(b'{"pin": "' + b"9" * 70000 + b'"}'),            # over the body size limit
)
queries = st.dictionaries(st.sampled_from(["tail", "bytes", "x", ""]),
                          st.text(max_size=20) | st.integers(-10, 10**15).map(str), max_size=3)


@pytest.fixture(scope="module")
def raw_agent(tmp_path_factory):
    """A real herd-agent process on loopback, paired: (url, keys, process, state dir)."""
    with paired_agent(tmp_path_factory.mktemp("raw-agent"), "raw") as (agent, keys):
        yield agent.api_url, keys, agent.proc, agent.state_dir


SENT = []
CLIENTS: dict = {}  # one keep-alive connection per way of presenting oneself, for the whole sweep


def _client(keys, paired: bool) -> httpx.Client:
    """The paired master's keys (mutual TLS), or a stranger's TLS with no certificate."""
    from agent.identity import client_context
    if paired not in CLIENTS:
        CLIENTS[paired] = httpx.Client(timeout=10, verify=keys.client_context() if paired else client_context())
    return CLIENTS[paired]


@settings(max_examples=2500, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(method=st.sampled_from(METHODS), path=st.sampled_from(PATHS), body=bodies, query=queries,
       auth=st.sampled_from(["good", "none", "bad", "garbage"]),
       ctype=st.sampled_from([None, "application/json", "text/plain", "multipart/form-data", "\x00"]))
def _one_raw_request(raw_agent, method, path, body, query, auth, ctype):
    url, keys, proc, _ = raw_agent
    # "good" is the paired master's certificate; the others come without one, with headers that
    # once meant something (bearer tokens) or garbage.
    headers = {"good": {}, "none": {},
               "bad": {"Authorization": "Bearer " + "0" * 43},
               "garbage": {"Authorization": "Basic \u00ff\u00fe"}}[auth].copy()
    if ctype is not None:
        headers["Content-Type"] = ctype
    # Never start a worker from here (it would need the engine and time); everything else goes.
    if path in (P.PATH_RPC_START, P.PATH_UNPAIR) and auth == "good":
        auth = "none"
    if path == P.PATH_BANDWIDTH:
        query = {k: v for k, v in query.items() if k != "bytes"}
    try:
        r = _client(keys, auth == "good").request(method, url + path, params=query, content=body if method != "GET" else None,
                           headers={k: v.encode("utf-8") for k, v in headers.items()})
    except httpx.LocalProtocolError:
        SENT.append(0)  # httpx itself refused to send it (e.g. a control character in a header)
        return
    except httpx.RemoteProtocolError:
        # The server's HTTP parser refused the request outright and closed the connection
        # (seen rarely, for request lines it cannot parse): fine, as long as it lives on.
        SENT.append(400)
        assert proc.poll() is None, "the agent died"
        assert _client(keys, False).get(url + P.PATH_PING, timeout=5).status_code == 200
        return
    SENT.append(r.status_code)
    assert r.status_code < 500, (method, path, body[:80], query, r.text[:200])
    if method != "HEAD" and r.status_code >= 400:
        assert "error" in r.json(), r.text[:200]  # every refusal says what is wrong
    assert proc.poll() is None, "the agent died"


def test_raw_garbage_requests_break_nothing_and_lose_nothing(raw_agent):
    _one_raw_request(raw_agent)  # hypothesis runs it for every generated request
    url, keys, proc, state = raw_agent
    assert sum(1 for s in SENT if s) >= 2000, f"only {len(SENT)} requests were sent"
    assert proc.poll() is None
    # The pairing and identity survived: the same keys work, the state file is whole, nothing set aside.
    r = httpx.get(url + P.PATH_STATUS, verify=keys.client_context())
    assert r.status_code == 200
    saved = json.loads((state / STATE_NAME).read_text())
    assert saved["node_id"] == r.json()["id"] and len(saved["masters"]) >= 1
    assert not list(state.glob("*.corrupt-*"))


# --- corrupt files -----------------------------------------------------------------------------

@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_corrupt_or_truncated_gguf_is_a_clear_model_error(demo_model, tmp_path_factory, data):
    raw = bytearray(demo_model.read_bytes())
    header_end = 64 * 1024  # keys and tensor infos of the demo model live well inside this
    cut = data.draw(st.integers(0, len(raw)) | st.integers(0, header_end), label="cut")
    flips = data.draw(st.lists(st.tuples(st.integers(0, header_end - 1), st.integers(0, 255)), max_size=6),
                      label="flips")
    for pos, value in flips:
        raw[pos] = value
    path = tmp_path_factory.mktemp("gguf") / "bad.gguf"
    path.write_bytes(bytes(raw[:cut]))
    try:
        info = inspect_model(path)
    except ModelError as exc:
        assert str(path) in str(exc)
        return
    # Flips in padding or in a string value can leave a readable model: then it must be coherent.
    assert info.n_layer >= 1 and info.file_bytes == cut


@pytest.fixture(scope="module")
def good_profile(tmp_path_factory, demo_model) -> bytes:
    nodes = [Node(id="id-a", name="alpha", host="127.0.0.1", api_port=7001, rpc_port=50052),
             Node(id="id-b", name="beta", host="127.0.0.1", api_port=7002, rpc_port=50053)]
    a = Device("id-a", "alpha", "127.0.0.1:50052", 0, "CPU", 1 << 30, 2 << 30)
    b = Device("id-b", "beta", "127.0.0.1:50053", 0, "CPU", 1 << 30, 2 << 30)
    prof = make_profile(Plan(8, 1, [(a, 3), (b, 5)]), inspect_model(demo_model), nodes, ctx=2048, port=8181)
    path = save_profile(tmp_path_factory.mktemp("prof") / "p.json", prof)
    assert load_profile(path) == prof
    return path.read_bytes()


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_corrupt_profile_is_a_clear_profile_error(good_profile, tmp_path_factory, data):
    raw = bytearray(good_profile)
    cut = data.draw(st.integers(0, len(raw) - 1), label="cut")
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 255)), max_size=4),
                      label="flips")
    for pos, value in flips:
        raw[pos] = value
    path = tmp_path_factory.mktemp("prof") / "bad.json"
    path.write_bytes(bytes(raw[:cut]) if data.draw(st.booleans(), label="truncate") else bytes(raw))
    before = path.read_bytes()
    try:
        loaded = load_profile(path)
    except ProfileError as exc:
        # It says where: the file (unreadable, not JSON, not a profile), or the field that is
        # wrong as a path into the document (profile.plan.assignments[1].count: …).
        assert re.match(rf'({re.escape(str(path))}|profile(\.\w+|\[\d+\]|\["[^"]*"\])*): \S', str(exc)), str(exc)
    else:
        # A flip in a string or in white space can leave a valid profile: then it is a whole one,
        # written back and read again unchanged.
        assert profile_from_json(json.loads(json.dumps(loaded.to_json()))) == loaded
    assert path.read_bytes() == before  # a profile the user picked is never moved or changed


def test_half_written_settings_are_reported_and_kept(tmp_path):
    good = dump_settings(Settings(name="worker", bind="127.0.0.1", threads=3, devices=["CPU"])).encode()
    for cut in range(0, len(good)):
        path = tmp_path / f"cut{cut}" / "agent.toml"
        path.parent.mkdir()
        path.write_bytes(good[:cut])
        try:
            s = load_settings(path)
        except SettingsError as exc:
            assert str(path) in str(exc)
            moved = list(path.parent.glob("agent.toml.corrupt-*"))
            # Invalid TOML is set aside (bytes kept); a bad value is left for the user to fix.
            kept = moved[0] if moved else path
            assert kept.read_bytes() == good[:cut]
            continue
        assert isinstance(s, Settings)  # a prefix that is whole TOML: the rest are defaults


def test_half_written_state_never_becomes_a_new_identity_silently(tmp_path):
    state = load_state(tmp_path / "good")
    good = (tmp_path / "good" / STATE_NAME).read_bytes()
    for cut in range(0, len(good), 7):
        folder = tmp_path / f"cut{cut}"
        folder.mkdir()
        (folder / STATE_NAME).write_bytes(good[:cut])
        with pytest.raises(SettingsError, match="moved it to") as info:
            load_state(folder)
        assert str(folder / STATE_NAME) in str(info.value)
        (moved,) = folder.glob(f"{STATE_NAME}.corrupt-*")
        assert moved.read_bytes() == good[:cut]
    # The real program says so and stops, instead of starting as a different node.
    folder = tmp_path / "program"
    folder.mkdir()
    (folder / STATE_NAME).write_bytes(good[: len(good) // 2])
    out = subprocess.run([sys.executable, "-m", "agent.main", "--config", str(folder / "agent.toml"),
                          "--state-dir", str(folder), "pin"], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert out.returncode != 0 and "unreadable" in out.stderr and "moved it to" in out.stderr, out
    assert state.node_id not in out.stdout


# --- a rogue advertiser on the LAN -------------------------------------------------------------

ROGUE = r"""
import asyncio, os, random, sys, uuid
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf
ip, stype, real_id, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rnd = random.Random(7)
def junk():
    kind = rnd.randrange(7)
    if kind == 0: return {}
    if kind == 1: return {rnd.randbytes(rnd.randrange(1, 9)): rnd.randbytes(rnd.randrange(0, 200))}
    if kind == 2: return {"id": str(uuid.uuid4()), "api": rnd.choice(["0", "-1", "65536", "x", "", "1e3"])}
    if kind == 3: return {"id": rnd.choice(["", "../../etc", "\u00ff" * 40, "0" * 250]), "api": "50050"}
    if kind == 4: return {"id": str(uuid.uuid4()), "api": "50050", "rpc": "99999999", "echo": "-5", "st": "x" * 250}
    if kind == 5: return {b"id": b"\xff\xfe\xfd", b"api": b"\x00"}
    return {"id": real_id, "api": "not-a-port"}  # a known node's id with a broken record
async def main():
    zc = AsyncZeroconf(interfaces=[ip])
    infos = [AsyncServiceInfo(stype, f"rogue-{i}-{os.getpid()}.{stype}",
                              addresses=[bytes(map(int, ip.split(".")))],
                              port=rnd.randrange(1, 65535), properties=junk()) for i in range(n)]
    # A rogue does not bother probing for its names first (and it is quicker).
    announced = await asyncio.gather(*(zc.async_register_service(info, cooperating_responders=True)
                                       for info in infos))
    await asyncio.gather(*announced)
    print("registered", len(infos), flush=True)
    for _ in range(3):  # and change them while the master browses
        for info in infos:
            info._set_properties(junk())
        await asyncio.gather(*await asyncio.gather(*(zc.async_update_service(info) for info in infos)))
        await asyncio.sleep(0.3)
    print("updated", flush=True)
    await asyncio.sleep(600)
asyncio.run(main())
"""


BROWSE = r"""
import asyncio, json, logging, sys
from gui.cluster.nodes.discovery import Discovery
from gui.cluster.nodes.records import TokenStore
ignored = []
class Keep(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith("ignored"):
            ignored.append(record.getMessage())
logging.getLogger("gui.cluster.nodes.discovery").addHandler(Keep())
logging.getLogger("gui.cluster.nodes.discovery").setLevel(logging.DEBUG)
async def main():
    async with Discovery([sys.argv[1]], tokens=TokenStore(sys.argv[2])) as disc:
        await asyncio.sleep(float(sys.argv[3]))
        print(json.dumps({"nodes": [n.to_json() for n in disc.nodes.values()], "ignored": ignored,
                          "pinging": not disc._pinger.done()}))
asyncio.run(main())
"""


@pytest.mark.netns
@pytest.mark.slow
def test_rogue_advertiser_on_the_lan_is_ignored(tmp_path):
    with Lan(["m", "good", "rogue"]) as lan:
        agent = start_agent(lambda argv, **kw: lan["good"].popen(argv, **kw), tmp_path, "good",
                            bind=lan["good"].ip, api_port=50050, rpc_port=50052, echo_port=50053)
        rogue = lan["rogue"].popen([sys.executable, "-c", ROGUE, lan["rogue"].ip, P.SERVICE_TYPE,
                                    agent.node_id, "24"], stdout=subprocess.PIPE, text=True)
        assert rogue.stdout.readline().startswith("registered")
        out = lan["m"].run([sys.executable, "-c", BROWSE, lan["m"].ip, str(tmp_path / "t.json"), "6"],
                           timeout=60)
        assert out.returncode == 0, out.stderr[-2000:]
        seen = json.loads(out.stdout)
        assert rogue.poll() is None and rogue.stdout.readline().startswith("updated")
        good_ip = lan["good"].ip
    nodes = {n["id"]: n for n in seen["nodes"]}
    assert set(nodes) == {agent.node_id}, seen["nodes"]
    real = nodes[agent.node_id]
    assert (real["host"], real["api_port"], real["name"]) == (good_ip, 50050, "good")
    assert sum("rogue-" in msg for msg in seen["ignored"]) >= 10, seen["ignored"]
    assert seen["pinging"], "discovery's ping loop died"
