"""Loopback servers that record what notifiers send: HTTP (stdlib) and SMTP (aiosmtpd)."""

from __future__ import annotations

import io
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from cronwarden.model.logs import JsonFormatter, get_logger
from tests.support.harness import FakeClock, at


@dataclass
class Received:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class HttpSink:
    """Records every request; ``status[path]`` sets the reply code for a path (default 200),
    ``redirect[path]`` answers it with that code (default 302) and this ``Location``."""

    base: str
    received: list[Received] = field(default_factory=list)
    status: dict[str, int] = field(default_factory=dict)
    redirect: dict[str, str] = field(default_factory=dict)

    def at(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"expected {count} request(s), got {self.received}")
            time.sleep(0.01)
        return self.received


@pytest.fixture
def http_sink() -> Iterator[HttpSink]:
    sink = HttpSink(base="")

    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            parts = urlsplit(self.path)
            sink.received.append(
                Received(
                    self.command,
                    parts.path,
                    parse_qs(parts.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length) if length else b"",
                )
            )
            location = sink.redirect.get(parts.path)
            code = sink.status.get(parts.path, 200 if location is None else 302)
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            if location is not None:
                self.send_header("Location", location)
            self.end_headers()
            self.wfile.write(b"OK" if code < 400 else b"rejected: invalid routing key")

        do_GET = do_POST = _record

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    sink.base = f"http://127.0.0.1:{server.server_address[1]}"
    yield sink
    server.shutdown()
    server.server_close()
    thread.join(5)


@dataclass
class SmtpSink:
    host: str
    port: int
    messages: list[Any] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def smtp_sink() -> Iterator[SmtpSink]:
    from email import message_from_bytes, policy

    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    sink = SmtpSink("127.0.0.1", free_port())

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            message = message_from_bytes(envelope.content, policy=policy.default)
            sink.messages.append((envelope.mail_from, list(envelope.rcpt_tos), message))
            return "250 OK"

    def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, auth: Any) -> Any:
        if isinstance(auth, LoginPassword):
            sink.logins.append((auth.login.decode(), auth.password.decode()))
            return AuthResult(success=auth.password == b"smtp-pass-1234")
        return AuthResult(success=False)

    controller = Controller(
        Handler(),
        hostname=sink.host,
        port=sink.port,
        authenticator=authenticate,
        auth_require_tls=False,
    )
    controller.start()
    yield sink
    controller.stop()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(at("2026-01-20T10:00:30Z"))


@pytest.fixture
def log_lines() -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """Every cronwarden log line emitted during the test, as parsed JSON."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = get_logger()
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    def lines() -> list[dict[str, Any]]:
        return [json.loads(line) for line in stream.getvalue().splitlines() if line]

    yield lines
    logger.removeHandler(handler)
    logger.setLevel(previous)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path
