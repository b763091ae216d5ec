"""Hosting the rendered ``main.py`` locally, as Cloud Functions would: functions-framework's
``create_app`` per target, all three on one real loopback HTTP server (werkzeug, threaded),
with the emulator's push subscriptions pointing at it, and the Cloud Scheduler driver.

The stand-in for Cloud Functions next to the emulators it runs against (functions-framework and
werkzeug are imported only when a deployment is made: ``pip install 'cronwarden[gcp]'``)."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cronwarden.adapters.gcp import FirestoreStore, PubSubQueue
from cronwarden.adapters.gcp.functions import FunctionsRuntime, runtime_of
from cronwarden.jobs.definitions import JobSet

from .emulator import FirestoreEmulator, PubSubEmulator
from .scheduler import CloudSchedulerDriver


class SetsEnv(Protocol):
    """Where :func:`deployed` sets the deployment's environment (``pytest.MonkeyPatch``)."""

    def setenv(self, name: str, value: str) -> None: ...


def fresh_project() -> str:
    """A project id no other test uses (the emulators keep state per project)."""
    return f"cw-gcp-{uuid.uuid4().hex[:10]}"


TARGETS = ("trigger", "worker", "watcher")
MAIN = """\
from cronwarden.adapters.gcp.functions import make_functions

import {module} as jobs_module

trigger, worker, watcher = make_functions(jobs_module)
"""


def gcp_env(project: str, pubsub: PubSubEmulator, firestore: FirestoreEmulator) -> dict[str, str]:
    """The environment the deployment renders (core/deploy/gcp.py), pointed at the emulators."""
    from cronwarden.adapters.gcp.settings import GcpSettings
    from cronwarden.hosting import HostSettings

    settings = GcpSettings(
        project=project,
        pubsub_emulator_host=pubsub.address,
        firestore_emulator_host=firestore.address,
        topic="cronwarden-runs",
        subscription="cronwarden-worker",
        dead_letter_topic="cronwarden-runs-dead-letter",
        dead_letter_subscription="cronwarden-worker-dead-letter",
        max_deliveries=5,
        ack_deadline=30,
        create_missing=False,
        collection_prefix="cw_",
    )
    return {**HostSettings(provider="gcp").to_env(), **settings.to_env()}


class LoopbackServer:
    """A threaded werkzeug server on 127.0.0.1:<free port> serving ``app``."""

    def __init__(self, app: Any) -> None:
        from werkzeug.serving import make_server

        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def post(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """POST ``body`` as JSON to a loopback ``url``: (status, parsed reply)."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"not an HTTP URL: {url!r}")
    request = urllib.request.Request(  # noqa: S310 - checked above
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:  # noqa: S310
            status, raw = reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw


@dataclass
class Deployment:
    project: str
    url: str
    runs: PubSubQueue  #: the test's own handle on the run-request topic and its DLQ
    schedule: PubSubQueue  #: the schedule topic Cloud Scheduler publishes to
    store: FirestoreStore
    functions: dict[str, Callable[..., Any]]
    jobs: JobSet
    closers: list[Callable[[], None]] = field(default_factory=list)

    def runtime(self, target: str) -> FunctionsRuntime:
        return runtime_of(self.functions[target])

    def post(self, target: str, body: bytes, headers: dict[str, str] | None = None) -> Any:
        return post(f"{self.url}/{target}/", body, headers)

    def driver(self, *names: str, **options: Any) -> CloudSchedulerDriver:
        jobs = JobSet([self.jobs[n] for n in names]) if names else self.jobs
        driver = CloudSchedulerDriver(jobs, self.schedule, **options)
        self.closers.append(driver.stop)
        return driver


@contextlib.contextmanager
def deployed(
    tmp_path: Path,
    monkeypatch: SetsEnv,
    pubsub: PubSubEmulator,
    firestore: FirestoreEmulator,
    *,
    main_source: str | None = None,
    module: str = "jobs",
    extra_files: dict[str, bytes] | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[Deployment]:
    """Deploy ``main.py`` (default: the rendered shape, importing ``module``) on loopback."""
    from functions_framework import create_app as untyped_create_app

    create_app: Callable[..., Any] = untyped_create_app
    from werkzeug.exceptions import NotFound
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    project = fresh_project()
    for name, value in {**gcp_env(project, pubsub, firestore), **(env or {})}.items():
        monkeypatch.setenv(name, value)
    folder = tmp_path / "function"
    folder.mkdir()
    (folder / "main.py").write_text(main_source or MAIN.format(module=module))
    for name, data in (extra_files or {}).items():
        (folder / name).write_bytes(data)
    apps: dict[str, Any] = {}
    functions: dict[str, Callable[..., Any]] = {}
    for target in TARGETS:
        apps[f"/{target}"] = create_app(target, str(folder / "main.py"), "http")
        functions[target] = getattr(sys.modules["main"], target)
    jobs = runtime_of(functions["worker"]).jobs
    server = LoopbackServer(DispatcherMiddleware(NotFound(), apps))
    common: dict[str, Any] = {
        "dead_letter_topic": "cronwarden-runs-dead-letter",
        "dead_letter_subscription": "cronwarden-worker-dead-letter",
        "max_deliveries": 5,
        "ack_deadline": 30,
        "retry_backoff": (0.0, 1.0),
        "emulator_host": pubsub.address,
        "create_missing": True,
    }
    # Dead-letter topic first: both push subscriptions forward to it (as the deployment does).
    runs = PubSubQueue(
        project,
        "cronwarden-runs",
        "cronwarden-worker",
        push_endpoint=f"{server.url}/worker/",
        **common,
    )
    schedule = PubSubQueue(
        project,
        "cronwarden-schedule",
        "cronwarden-trigger",
        push_endpoint=f"{server.url}/trigger/",
        **common,
    )
    store = FirestoreStore(project, emulator_host=firestore.address)
    deployment = Deployment(project, server.url, runs, schedule, store, functions, jobs)
    try:
        runs.ensure_resources()
        schedule.ensure_resources()
        yield deployment
    finally:
        for close in deployment.closers:
            close()
        server.stop()
        for target in TARGETS:
            deployment.runtime(target).close()
        runs.close()
        schedule.close()
        store.close()


class WebhookSink:
    """A loopback HTTP endpoint recording the JSON bodies POSTed to it (the alert webhook)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
            size = int(environ.get("CONTENT_LENGTH") or 0)
            body = json.loads(environ["wsgi.input"].read(size) or b"{}")
            with self._lock:
                self.bodies.append(body)
            start_response("204 No Content", [])
            return []

        self.server = LoopbackServer(app)
        self.url = self.server.url + "/hook"

    def received(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.bodies)

    def stop(self) -> None:
        self.server.stop()
