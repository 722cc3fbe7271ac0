"""Raw HTTPS clients for tests that talk to an agent's API below :class:`agent.client.AgentClient`."""

from __future__ import annotations

import httpx

from agent.identity import client_context


def anon_http(url: str, **kw) -> httpx.AsyncClient:
    """A raw HTTPS client that presents no certificate and accepts any server key (a stranger)."""
    return httpx.AsyncClient(base_url=url, verify=client_context(), **kw)


def master_http(client, **kw) -> httpx.AsyncClient:
    """A raw HTTPS client with the same keys as the paired ``client`` (mutual TLS, pinned)."""
    return httpx.AsyncClient(base_url=client.base_url, verify=client_context(client.identity, client.pinned), **kw)
