"""A loopback HTTP channel that can be up, answer an error, or refuse connections, and a job
that misses its windows on the local provider (SQLite)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import cronwarden
from cronwarden import RunContext
from tests.support.harness import FakeClock, Harness, at, harness


@dataclass
class Sink:
    """Records every request. ``code`` is the reply (200, or 500 to fail); :meth:`down` closes
    the port (connections are refused) and :meth:`up` listens on it again."""

    port: int = 0
    code: int = 200
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (path, body)
    server: ThreadingHTTPServer | None = None
    thread: threading.Thread | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def at(self, path: str) -> list[dict[str, Any]]:
        return [body for p, body in self.received if p == path]

    def up(self) -> None:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if sink.code < 400:
                    sink.received.append((self.path, body))
                self.send_response(sink.code)
                self.end_headers()
                self.wfile.write(b"ok" if sink.code < 400 else b"down for maintenance")

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def down(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            assert self.thread is not None
            self.thread.join(5)
            self.server = None


@pytest.fixture
def sink() -> Iterator[Sink]:
    made = Sink()
    made.up()
    yield made
    made.down()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(at("2026-01-20T10:00:30Z"))


@pytest.fixture
def h(tmp_path: Path, clock: FakeClock) -> Iterator[Harness]:
    """Two hourly jobs with owners (routes by owner) on SQLite; nothing ever runs them."""

    def body(ctx: RunContext) -> None:
        return None

    jobs = [
        cronwarden.job(name, cron="0 * * * *", max_runtime="10m", owner=owner)(body)
        for name, owner in (("billing", "team-pay"), ("reports", "team-data"))
    ]
    made = harness(tmp_path, jobs, clock=clock)
    yield made
    made.close()
