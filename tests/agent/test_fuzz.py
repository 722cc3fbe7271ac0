"""Fuzzing the control API from its own OpenAPI document (schemathesis): whatever a client
sends — valid, invalid, with the paired master's certificate or without one, with old bearer
headers — the agent answers without a 5xx, only with answers its document declares, refuses
every protected operation to anyone but the paired master, and lives on."""

from __future__ import annotations

import pytest
import schemathesis
from cluster.agents import paired_agent
from hypothesis import HealthCheck, settings

from agent import protocol as P
from agent.openapi import openapi_document

schema = schemathesis.openapi.from_dict(openapi_document())

# About 880 cases in all: 10 operations × 22 examples × 4 ways to present oneself.
FUZZ = settings(max_examples=22, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def live_agent(tmp_path_factory):
    """A real ``herd-agent`` process on loopback, paired; yields (base_url, keys, process)."""
    with paired_agent(tmp_path_factory.mktemp("fuzz-agent"), "fuzz") as (agent, keys):
        yield agent.api_url, keys, agent.proc


DOC = openapi_document()

# How a client may present itself: the paired master's certificate, nothing, or no certificate
# but an Authorization header of the kind that once opened the API (a bearer token).
AUTH = {
    "paired": None,
    "none": None,
    "old bearer header": "Bearer " + "a" * 43,
    "other scheme": "Basic dXNlcjpwYXNz",
}


@schema.parametrize()
@FUZZ
@pytest.mark.parametrize("auth", list(AUTH))
def test_no_server_errors(case, live_agent, auth):
    url, keys, proc = live_agent
    header = AUTH[auth]
    tls = {"verify": False, "cert": keys.cert_files()} if auth == "paired" else {"verify": False}
    if auth == "paired" and case.path == P.PATH_UNPAIR:
        tls = {"verify": False}  # the pairing must survive the sweep
    response = case.call(base_url=url, headers={"Authorization": header} if header else {}, timeout=30,
                         **tls)
    what = (auth, case.method, case.path, case.body, case.query, response.status_code, response.text[:300])
    assert response.status_code < 500, what
    op = DOC["paths"][case.path].get(case.method.lower())
    if op is None:  # schemathesis also tries methods the path does not have
        assert response.status_code == 405, what
    else:
        # every answer is one the document declares for the operation
        assert str(response.status_code) in op["responses"], what
        # and an operation that needs the token answers nobody else
        if op.get("security") and (auth != "paired" or case.path == P.PATH_UNPAIR):
            assert response.status_code == 401, what
    assert proc.poll() is None, "the agent died"
