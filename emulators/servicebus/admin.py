"""A small loopback HTTP API for tests and tooling (Service Bus manages entities over HTTPS/ATOM,
which the emulator does not implement).

    GET    /health              200 "Ok" once the AMQP port is listening
    GET    /queues              [{"name", "messages", "active", "deferred", "scheduled",
                                  "locked", "dead_letter"}, ...]
    POST   /reset               every queue back to its configured state, empty
    PUT    /queues/<name>       create or reconfigure a queue; body: Config.json "Properties"
    DELETE /queues/<name>       delete a queue (404 if absent)
    POST   /queues/<name>/expire-locks
                                every lock held on the queue ends now, as when LockDuration
                                elapses (delivery count + 1); {"expired": n} (404 if absent)

Contract: each request runs on the AMQP loop thread (:meth:`EmulatorServer.call`), so it is
atomic with respect to message traffic; a bad request answers 400 with ``{"error": ...}``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from .config import ConfigError, QueueConfig
from .server import EmulatorServer

_EXPIRE_LOCKS = "/expire-locks"


class _AdminHandler(BaseHTTPRequestHandler):
    server: _AdminHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, payload: Any) -> None:
        body = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        self.send_response(status)
        ctype = "text/plain" if isinstance(payload, str) else "application/json"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _queue_name(self) -> str | None:
        parts = self.path.split("?")[0].strip("/").split("/", 1)
        if len(parts) == 2 and parts[0] == "queues" and parts[1]:
            return unquote(parts[1])
        return None

    def do_GET(self) -> None:
        emulator = self.server.emulator
        if self.path.rstrip("/") in ("", "/health"):
            self._reply(200, "Ok")
        elif self.path.rstrip("/") == "/queues":
            self._reply(200, emulator.call(emulator.broker.describe))
        else:
            self._reply(404, {"error": "not found"})

    def do_POST(self) -> None:
        emulator = self.server.emulator
        path = self.path.split("?")[0].rstrip("/")
        if path == "/reset":
            emulator.call(emulator.broker.reset)
            self._reply(200, {"reset": True})
        elif path.startswith("/queues/") and path.endswith(_EXPIRE_LOCKS):
            name = unquote(path[len("/queues/") : -len(_EXPIRE_LOCKS)])
            try:
                expired = emulator.call(lambda: emulator.broker.expire_locks(name))
            except KeyError:
                self._reply(404, {"error": f"no queue {name!r}"})
            else:
                self._reply(200, {"expired": expired})
        else:
            self._reply(404, {"error": "not found"})

    def do_PUT(self) -> None:
        name = self._queue_name()
        if name is None:
            self._reply(404, {"error": "not found"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            props = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(props, dict):
                raise ConfigError("the body must be a JSON object of queue properties")
            config = QueueConfig.from_properties(name, props)
        except (ConfigError, ValueError) as exc:
            self._reply(400, {"error": str(exc)})
            return
        emulator = self.server.emulator
        emulator.call(lambda: emulator.broker.put_queue(config))
        self._reply(200, {"name": config.name})

    def do_DELETE(self) -> None:
        name = self._queue_name()
        emulator = self.server.emulator
        if name is not None and emulator.call(lambda: emulator.broker.delete_queue(name)):
            self._reply(200, {"deleted": name})
        else:
            self._reply(404, {"error": "not found"})


class _AdminHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], emulator: EmulatorServer) -> None:
        super().__init__(address, _AdminHandler)
        self.emulator = emulator


class AdminServer:
    """The admin API for ``emulator`` on ``host:port`` (``port=0``: a free port)."""

    def __init__(self, emulator: EmulatorServer, host: str, port: int) -> None:
        self._httpd = _AdminHTTPServer((host, port), emulator)
        self.host = host
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="servicebus-admin", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> AdminServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
