"""Fuzzing the control API from its own OpenAPI document (schemathesis): whatever a client
sends — valid, invalid, with or without a token — the agent answers without a 5xx and lives on."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from agent.openapi import openapi_document
from conftest import free_port

schema = schemathesis.openapi.from_dict(openapi_document())

# About 220 cases in all: 10 operations × 22 examples.
FUZZ = settings(max_examples=22, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def live_agent(tmp_path_factory):
    """A real ``herd-agent`` process on loopback, paired; yields (base_url, token, process)."""
    state = tmp_path_factory.mktemp("fuzz-agent")
    api = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent.main", "--config", str(state / "agent.toml"), "--state-dir", str(state),
         "--bind", "127.0.0.1", "--api-port", str(api), "--rpc-port", str(free_port()),
         "--echo-port", str(free_port()), "--no-mdns", "run"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "LLAMA_CACHE": str(state / "cache")})
    url = f"http://127.0.0.1:{api}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/api/v1/ping", timeout=1)
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, "agent did not start"
                time.sleep(0.05)
        pin = (state / "agent-state.json").read_text().split('"pin": "')[1][:6]
        token = httpx.post(url + "/api/v1/pair", json={"pin": pin}).json()["token"]
        yield url, token, proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@schema.parametrize()
@FUZZ
def test_no_server_errors(case, live_agent):
    url, token, proc = live_agent
    response = case.call(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert response.status_code < 500, (case.method, case.path, case.body, case.query, response.text[:300])
    assert proc.poll() is None, "the agent died"
