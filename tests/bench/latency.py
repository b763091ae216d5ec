"""Trigger → handler latency, p50 / p95, per provider, on the emulators:

* **local**: ``Trigger.tick`` → SQLite queue → a ``Worker`` polling it → the handler;
* **gcp**: the Cloud Scheduler driver publishes a tick → schedule topic → push → the ``trigger``
  function → run-request topic → push → the ``worker`` function → the handler; both functions
  are the rendered ``main.py`` (``make_functions``) served by functions-framework's
  ``create_app`` on a loopback werkzeug server, exactly as ``tests/gcp`` host them;
* **azure**: the app from ``build_app`` hosted by the Functions host stand-in (``LocalHost``):
  the job's timer function → Service Bus emulator → the worker function → the handler.

Each sample is a distinct job (distinct run key), fired one at a time; the clock is
``time.time()`` in this process (every part runs here).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from .emulators import Emulators, fresh_project
from .stats import latency_summary

SAMPLES = 30


@contextlib.contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def measure_local(emulators: Emulators, samples: int = SAMPLES) -> dict[str, Any]:
    from cronwarden import Engine, Trigger, Worker
    from cronwarden.adapters.local import SQLiteQueue, SQLiteStore

    from . import latency_jobs as lj

    lj.reset()
    folder = tempfile.mkdtemp(dir=emulators.workdir)
    store = SQLiteStore(os.path.join(folder, "state.db"))
    queue = SQLiteQueue(os.path.join(folder, "queue.db"))
    engine = Engine(lj.JOBS, store)
    trigger = Trigger(lj.JOBS, queue, store)
    stop = threading.Event()
    worker = threading.Thread(target=Worker(engine, queue).serve, args=(stop,), daemon=True)
    worker.start()
    latencies = []
    try:
        for i in range(samples):
            name = f"lat-{i}"
            sent = time.time()
            trigger.tick(name, datetime.now(UTC))
            latencies.append(lj.wait(name) - sent)
    finally:
        stop.set()
        worker.join(10)
        store.close()
        queue.close()
    return {
        "path": "Trigger.tick → SQLite queue → Worker (polling) → handler",
        **latency_summary(latencies),
    }


MAIN = """\
from cronwarden.adapters.gcp.functions import make_functions

import tests.bench.latency_jobs as jobs_module

trigger, worker, watcher = make_functions(jobs_module)
"""


def measure_gcp(emulators: Emulators, samples: int = SAMPLES) -> dict[str, Any]:
    from functions_framework import create_app
    from werkzeug.exceptions import NotFound
    from werkzeug.middleware.dispatcher import DispatcherMiddleware
    from werkzeug.serving import make_server

    from cronwarden.adapters.gcp import PubSubQueue
    from cronwarden.adapters.gcp.functions import runtime_of
    from cronwarden.emulators.gcp import CloudSchedulerDriver

    from . import latency_jobs as lj

    pubsub, firestore = emulators.pubsub(), emulators.firestore()
    project = fresh_project()
    from cronwarden.adapters.gcp.settings import GcpSettings
    from cronwarden.hosting import HostSettings

    gcp = GcpSettings(
        project=project,
        pubsub_emulator_host=pubsub.address,
        firestore_emulator_host=firestore.address,
        dead_letter_topic="cronwarden-runs-dead-letter",
        dead_letter_subscription="cronwarden-worker-dead-letter",
        create_missing=False,
    )
    env = {**HostSettings(provider="gcp").to_env(), **gcp.to_env()}
    lj.reset()
    folder = tempfile.mkdtemp(dir=emulators.workdir)
    with open(os.path.join(folder, "main.py"), "w") as handle:
        handle.write(MAIN)
    closers: list[Any] = []
    latencies = []
    with _env(env):
        try:
            apps, functions = {}, {}
            for target in ("trigger", "worker"):
                sys.modules.pop("main", None)
                apps[f"/{target}"] = create_app(target, os.path.join(folder, "main.py"), "http")
                functions[target] = getattr(sys.modules["main"], target)
            server = make_server(
                "127.0.0.1", 0, DispatcherMiddleware(NotFound(), apps), threaded=True
            )
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            closers.append(lambda: (server.shutdown(), server.server_close(), thread.join(10)))
            url = f"http://127.0.0.1:{server.server_port}"
            common: dict[str, Any] = {
                "dead_letter_topic": "cronwarden-runs-dead-letter",
                "dead_letter_subscription": "cronwarden-worker-dead-letter",
                "max_deliveries": 5,
                "ack_deadline": 30,
                "retry_backoff": (0.0, 1.0),
                "emulator_host": pubsub.address,
                "create_missing": True,
            }
            runs = PubSubQueue(
                project,
                "cronwarden-runs",
                "cronwarden-worker",
                push_endpoint=f"{url}/worker/",
                **common,
            )
            schedule = PubSubQueue(
                project,
                "cronwarden-schedule",
                "cronwarden-trigger",
                push_endpoint=f"{url}/trigger/",
                **common,
            )
            closers += [runs.close, schedule.close]
            closers += [runtime_of(f).close for f in functions.values()]
            runs.ensure_resources()
            schedule.ensure_resources()
            driver = CloudSchedulerDriver(lj.JOBS, schedule)
            # Warm-up (not measured): the first request builds clients and channels.
            warm = "lat-0"
            driver.fire(warm)
            lj.wait(warm, timeout=60)
            for i in range(1, min(samples, len(lj.JOBS))):
                name = f"lat-{i}"
                sent = time.time()
                driver.fire(name)
                latencies.append(lj.wait(name) - sent)
        finally:
            for close in reversed(closers):
                with contextlib.suppress(Exception):
                    close()
    return {
        "path": "scheduler tick → Pub/Sub push → trigger fn → Pub/Sub push → worker fn → handler",
        **latency_summary(latencies),
    }


def measure_azure(emulators: Emulators, samples: int = SAMPLES) -> dict[str, Any]:
    try:
        from cronwarden.adapters.azure import AzureProvider
        from cronwarden.adapters.azure.functions import build_app, timer_function_name
        from cronwarden.emulators.azure_functions.host import LocalHost
    except ImportError as exc:
        return {"skipped": f"the Azure function app is not available: {exc}"}

    from . import latency_jobs as lj

    azurite, servicebus = emulators.azurite(), emulators.servicebus()
    queue_name = servicebus.create_queue(lock_duration=30.0, requires_duplicate_detection=True)
    provider = AzureProvider(
        connection_string=azurite.connection_string,
        table=azurite.new_table(),
        servicebus_connection=servicebus.connection_string,
        queue_name=queue_name,
        max_deliveries=10,
    )
    lj.reset()
    from cronwarden.adapters.azure.settings import SERVICEBUS_BINDING_CONNECTION, AzureSettings

    app = build_app(lj.JOBS, provider=provider, env=AzureSettings(queue=queue_name).to_env())
    host = LocalHost(app, env={SERVICEBUS_BINDING_CONNECTION: servicebus.connection_string})
    stop = threading.Event()
    thread = threading.Thread(
        target=host.serve, args=(stop,), kwargs={"timers": False, "wait": 1.0}, daemon=True
    )
    thread.start()
    latencies = []
    try:
        host.fire(timer_function_name("lat-0"))  # warm-up: clients, links, table
        lj.wait("lat-0", timeout=60)
        for i in range(1, min(samples, len(lj.JOBS))):
            name = f"lat-{i}"
            sent = time.time()
            host.fire(timer_function_name(name))
            latencies.append(lj.wait(name) - sent)
    finally:
        stop.set()
        thread.join(15)
        host.close()
        with contextlib.suppress(Exception):
            servicebus.delete_queue(queue_name)
    return {
        "path": "timer fn → Service Bus (emulator) → LocalHost receive → worker fn → handler",
        **latency_summary(latencies),
    }


def measure(emulators: Emulators, providers: list[str], samples: int = SAMPLES) -> dict[str, Any]:
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    runners = {"local": measure_local, "gcp": measure_gcp, "azure": measure_azure}
    results: dict[str, Any] = {}
    for name in providers:
        try:
            results[name] = runners[name](emulators, samples)
        except Exception as exc:  # a broken provider is reported, the others still run
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return results
