"""Fuzzing the control API from its own OpenAPI document (schemathesis): whatever a client
sends — valid, invalid, with or without a token — the agent answers without a 5xx and lives on."""

from __future__ import annotations

import pytest
import schemathesis
from cluster.agents import paired_agent
from hypothesis import HealthCheck, settings

from agent.openapi import openapi_document

schema = schemathesis.openapi.from_dict(openapi_document())

# About 220 cases in all: 10 operations × 22 examples.
FUZZ = settings(max_examples=22, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def live_agent(tmp_path_factory):
    """A real ``herd-agent`` process on loopback, paired; yields (base_url, token, process)."""
    with paired_agent(tmp_path_factory.mktemp("fuzz-agent"), "fuzz") as (agent, token):
        yield agent.api_url, token, agent.proc


@schema.parametrize()
@FUZZ
def test_no_server_errors(case, live_agent):
    url, token, proc = live_agent
    response = case.call(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert response.status_code < 500, (case.method, case.path, case.body, case.query, response.text[:300])
    assert proc.poll() is None, "the agent died"
