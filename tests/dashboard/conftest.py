"""A LocalProvider (SQLite) seeded with jobs in every state, and dashboard apps over it."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

if not os.environ.get("CI"):  # in CI the dev extra brings the dashboard's stack: fail, not skip
    pytest.importorskip("starlette", reason="the dashboard extra is not installed")

from cronwarden.adapters.local import LocalProvider
from cronwarden.dashboard import create_app

from . import seed

TOKEN = "test-token-0123456789abcdef"
#: the Host values the tests' clients send: Starlette's and schemathesis' "testserver", a named
#: host for the cross-origin tests, and the browser test's loopback server
HOSTS = ("testserver", "dash.test", "127.0.0.1", "localhost")


@pytest.fixture
def provider(tmp_path: Any) -> Iterator[LocalProvider]:
    prov = LocalProvider(os.path.join(tmp_path, "state.db"))
    seed.seed(prov.store(), prov.queue())
    yield prov
    prov.close()


@pytest.fixture
def app(provider: LocalProvider) -> Any:
    return create_app(
        seed.jobs(), provider.store(), provider.queue(), clock=lambda: seed.NOW, allowed_hosts=HOSTS
    )


@pytest.fixture
def actions_app(provider: LocalProvider) -> Any:
    return create_app(
        seed.jobs(),
        provider.store(),
        provider.queue(),
        actions_token=TOKEN,
        clock=lambda: seed.NOW,
        allowed_hosts=HOSTS,
    )


@pytest.fixture
def server(actions_app: Any) -> Iterator[str]:
    """``actions_app`` served by uvicorn on a free loopback port (a thread); its base URL."""
    import uvicorn

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = uvicorn.Config(actions_app, host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "the dashboard server did not start"
        assert thread.is_alive(), "the dashboard server stopped"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)
