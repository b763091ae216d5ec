"""The official queue samples of the *installed* azure-servicebus, run against the emulator.

At module set-up the source distribution of the installed SDK version is fetched from the
package registry (``pip download --no-binary :all:``; a failed download fails the tests, it does
not skip them), and ``samples/sync_samples`` + ``samples/async_samples`` are extracted to a
temporary directory. Nothing of the samples is committed here.

Each sample runs as its own process against the session's emulator on a fresh queue. Only the
connection settings differ from a run against Azure: the environment variables the samples read
(``SERVICEBUS_FULLY_QUALIFIED_NAMESPACE``, ``SERVICEBUS_CONNECTION_STR``,
``SERVICEBUS_QUEUE_NAME``, ``SERVICEBUS_SAS_POLICY`` / ``SERVICEBUS_SAS_KEY``...) and
``sample_shim/sitecustomize.py`` (Entra ID credential → the emulator's key, no TLS, the
hard-coded custom-endpoint placeholders → the emulator's address).

Every queue sample must exit 0 unless it is in :data:`EXCEPTIONS`, which names why:

* ``HANGS`` — it iterates a receiver with no ``max_wait_time``, which waits for the next message
  for ever on any Service Bus. It runs until it made its progress (the messages printed and
  completed), is seen still running, and is killed by process group.
* ``FAILS_IN`` — it reaches a feature the emulator does not support (sessions, topics) after its
  queue parts; it must have printed what its queue parts print and fail in the named function.
* ``NOT_RUN`` — cannot run here (a missing optional transport library).

Samples of unsupported features are not run at all (:data:`UNSUPPORTED`). A sample of a newer
SDK that is in none of these tables is expected to pass.
"""

from __future__ import annotations

import concurrent.futures
import importlib.metadata
import importlib.util
import re
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from cronwarden.emulators._process import ManagedProcess
from cronwarden.emulators.servicebus.auth import DEFAULT_KEY, DEFAULT_KEY_NAME
from cronwarden.emulators.servicebus.pytest_plugin import ServiceBusEmulator

pytestmark = [pytest.mark.azure, pytest.mark.slow]

SDK = "azure-servicebus"
SAMPLE_DIRS = ("sync_samples", "async_samples")
SHIM = Path(__file__).parent / "sample_shim"
PARALLEL = 8  # the samples mostly wait (sleeps, receive timeouts), so they share the cores well

# Whole families of samples for features the emulator declares unsupported (README "Not
# supported"): matched on the file name without ``_async``.
UNSUPPORTED: dict[str, str] = {
    r"^mgmt_": "ServiceBusAdministrationClient (the HTTPS management API) is not emulated",
    r"topic|subscription": "topics and subscriptions are not supported",
    r"session": "sessions are not supported",
}


_BOTH = (  # samples shipped sync and async (the async file name ends in _async)
    "authenticate_client_connstr",
    "authenticate_using_azure_named_key_credential",
    "authenticate_using_azure_sas_credential",
    "auto_lock_renew",
    "client_identity_authentication",
    "connection_to_custom_endpoint_address",
    "deadletter_messages_and_correct",
    "proxy",
    "receive_deadlettered_messages",
    "receive_deferred_message_queue",
    "receive_iterator_queue",
    "receive_peek",
    "receive_queue",
    "sample_code_servicebus",
    "schedule_messages_and_cancellation",
    "send_and_receive_amqp_annotated_message",
    "send_queue",
)
_SYNC_ONLY = ("failure_and_recovery", "generate_sas_token_and_authenticate_client")
KNOWN_QUEUE_SAMPLES = {f"sync_samples/{name}.py" for name in _BOTH + _SYNC_ONLY} | {
    f"async_samples/{name}_async.py" for name in _BOTH
}  # the 36 queue samples of azure-servicebus 7.15.0


class Kind(Enum):
    HANGS = "hangs by design"
    FAILS_IN = "reaches an unsupported feature"
    NOT_RUN = "not run"


@dataclass(frozen=True)
class Expected:
    kind: Kind
    reason: str
    prints: tuple[str, ...] = ()  # stdout lines that prove the supported part ran
    fails_in: str = ""  # a sample function its traceback passes through (FAILS_IN)
    prefill: int = 0  # messages put on the queue before it starts (HANGS)


_ITERATES = "iterates a receiver without max_wait_time: waits for the next message for ever"

# Keyed by "<dir>/<file>". Durations: auto_lock_renew sleeps 100 s per part, by design.
EXCEPTIONS: dict[str, Expected] = {
    "sync_samples/receive_iterator_queue.py": Expected(
        Kind.HANGS, _ITERATES, prints=tuple(f"iter-{i}" for i in range(5)), prefill=5
    ),
    "async_samples/receive_iterator_queue_async.py": Expected(
        Kind.HANGS, _ITERATES, prints=tuple(f"iter-{i}" for i in range(5)), prefill=5
    ),
    "sync_samples/failure_and_recovery.py": Expected(
        Kind.HANGS, _ITERATES, prints=tuple(f"Data {i}" for i in range(10))
    ),
    "sync_samples/auto_lock_renew.py": Expected(
        Kind.FAILS_IN,
        "after the queue part, renews a session lock on SERVICEBUS_SESSION_QUEUE_NAME (sessions)",
        prints=("Register messages into AutoLockRenewer done.", "Complete messages."),
        fails_in="renew_lock_on_session_of_the_sessionful_entity",
    ),
    "async_samples/auto_lock_renew_async.py": Expected(
        Kind.FAILS_IN,
        "after the two queue parts, renews locks on a topic subscription (topics)",
        prints=("Complete messages.", "Complete queue messages."),
        fails_in="renew_lock_via_receiver_auto_lock_renewer_keyword",
    ),
    "sync_samples/sample_code_servicebus.py": Expected(
        Kind.FAILS_IN,
        "its last part (example_session_ops_sync) uses a session queue (sessions)",
        fails_in="example_session_ops_sync",
    ),
    "async_samples/sample_code_servicebus_async.py": Expected(
        Kind.FAILS_IN,
        "its last part (example_session_ops_async) uses a session queue (sessions)",
        fails_in="example_session_ops_async",
    ),
    "sync_samples/proxy.py": Expected(
        Kind.NOT_RUN, "sends through an HTTP proxy with a password it expects on 127.0.0.1:8899"
    ),
    "async_samples/proxy_async.py": Expected(
        Kind.NOT_RUN, "sends through an HTTP proxy with a password it expects on 127.0.0.1:8899"
    ),
}
# A custom endpoint address makes the SDK use AMQP over WebSockets, which needs an optional
# library: websocket-client (sync, pure Python, in our dev extra) or aiohttp (async, not in
# our extras). Without it the sample cannot start; with it, it must pass.
for _relpath, _library in (
    ("sync_samples/connection_to_custom_endpoint_address.py", "websocket"),
    ("async_samples/connection_to_custom_endpoint_address_async.py", "aiohttp"),
):
    if importlib.util.find_spec(_library) is None:
        EXCEPTIONS[_relpath] = Expected(
            Kind.NOT_RUN, f"AMQP over WebSockets needs {_library}, which is not installed"
        )

PASS_TIMEOUT = 120.0  # the slowest passing sample takes ~20 s here
FAILS_IN_TIMEOUT = 290.0  # auto_lock_renew_async: two 100 s sleeps, then the topic part
HANG_TIMEOUT = 60.0  # how long a HANGS sample gets to show its progress


def unsupported_reason(relpath: str) -> str | None:
    stem = Path(relpath).stem.removesuffix("_async")
    return next((why for pattern, why in UNSUPPORTED.items() if re.search(pattern, stem)), None)


# --- fetching the samples ----------------------------------------------------------------


def fetch_samples(dest: Path) -> tuple[str, Path]:
    """Download the sdist of the installed SDK version and extract its samples under ``dest``.

    Returns (version, samples directory). Raises with pip's output when the download fails."""
    version = importlib.metadata.version(SDK)
    download = dest / "sdist"
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
    argv += ["--disable-pip-version-check", f"{SDK}=={version}", "-d", str(download)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    archives = sorted(download.glob("*.tar.gz")) if download.is_dir() else []
    if done.returncode != 0 or len(archives) != 1:
        raise RuntimeError(
            f"could not fetch the {SDK} {version} sdist (pip exit {done.returncode}):\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    wanted = re.compile(r"^[^/]+/samples/(sync_samples|async_samples)/[^/]+\.py$")
    with tarfile.open(archives[0]) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and wanted.match(m.name)]
        tar.extractall(dest / "extracted", members=members, filter="data")
    roots = list((dest / "extracted").glob("*/samples"))
    if len(roots) != 1:
        raise RuntimeError(f"no samples/ directory in {archives[0].name}")
    return version, roots[0]


# --- running one sample ------------------------------------------------------------------


@dataclass
class SampleRun:
    relpath: str
    queue: str
    log_path: Path
    returncode: int | None = None  # None: killed while still running
    seconds: float = 0.0
    queue_left: int = -1  # messages left on the queue when a HANGS sample was killed
    error: str = ""  # set when the harness itself failed
    output: str = field(default="", repr=False)


def _environment(sb: ServiceBusEmulator, queue: str) -> dict[str, str]:
    namespace = f"{sb.host}:{sb.port}"
    return {
        "PYTHONPATH": str(SHIM),
        "PYTHONUNBUFFERED": "1",
        "CW_SB_SAMPLE_SHIM": "1",
        "CW_SB_SAMPLE_KEY_NAME": DEFAULT_KEY_NAME,
        "CW_SB_SAMPLE_KEY": DEFAULT_KEY,
        "CW_SB_SAMPLE_CUSTOM_ENDPOINT": f"sb://{namespace}",
        "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE": namespace,
        "SERVICEBUS_CONNECTION_STR": sb.connection_string,
        "SERVICEBUS_QUEUE_NAME": queue,
        "SERVICEBUS_SAS_POLICY": DEFAULT_KEY_NAME,
        "SERVICEBUS_SAS_KEY": DEFAULT_KEY,
        # read by the parts that need unsupported entities; they name nothing that exists
        "SERVICEBUS_SESSION_QUEUE_NAME": "no-such-session-queue",
        "SERVICEBUS_SESSION_ID": "session-1",
        "SERVICEBUS_TOPIC_NAME": "no-such-topic",
        "SERVICEBUS_SUBSCRIPTION_NAME": "no-such-subscription",
    }


def _queue_count(sb: ServiceBusEmulator, queue: str) -> int:
    return int(next(q for q in sb.queues() if q["name"] == queue)["messages"])


def _prefill(sb: ServiceBusEmulator, queue: str, count: int) -> None:
    with (
        ServiceBusClient.from_connection_string(sb.connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages([ServiceBusMessage(f"iter-{i}") for i in range(count)])


def run_sample(
    sb: ServiceBusEmulator,
    samples: Path,
    relpath: str,
    logs: Path,
    lock_duration: float,
    stopping: threading.Event,
) -> SampleRun:
    """Run one sample on a fresh queue; for a HANGS sample, stop once its progress is seen.
    ``stopping`` set (module teardown) kills it at once."""
    expected = EXCEPTIONS.get(relpath)
    queue = sb.create_queue(lock_duration=lock_duration)
    log_path = logs / (relpath.replace("/", "__") + ".log")
    run = SampleRun(relpath, queue, log_path)
    start = time.monotonic()
    try:
        if expected is not None and expected.prefill:
            _prefill(sb, queue, expected.prefill)
        process = ManagedProcess(
            relpath,
            [sys.executable, str(samples / relpath)],
            str(log_path),
            env=_environment(sb, queue),
        ).start()
        assert process.process is not None
        hangs = expected is not None and expected.kind is Kind.HANGS
        if hangs:
            limit = HANG_TIMEOUT
        elif expected is not None and expected.kind is Kind.FAILS_IN:
            limit = FAILS_IN_TIMEOUT
        else:
            limit = PASS_TIMEOUT
        deadline = start + limit
        try:
            while time.monotonic() < deadline and process.alive() and not stopping.is_set():
                if hangs and _progress_seen(log_path, expected, sb, queue):
                    run.queue_left = _queue_count(sb, queue)
                    break
                time.sleep(0.2)
            run.returncode = None if process.alive() else process.process.returncode
        finally:
            process.stop(grace=5)
    except Exception as exc:  # reported by the test, with the sample's output
        run.error = f"{type(exc).__name__}: {exc}"
    finally:
        run.seconds = round(time.monotonic() - start, 1)
        run.output = log_path.read_text(errors="replace") if log_path.exists() else ""
        sb.delete_queue(queue)
    return run


def _progress_seen(log_path: Path, expected: Expected, sb: ServiceBusEmulator, q: str) -> bool:
    lines = set(log_path.read_text(errors="replace").splitlines())
    return all(p in lines for p in expected.prints) and _queue_count(sb, q) == 0


# --- fixtures ----------------------------------------------------------------------------


@dataclass
class SampleSuite:
    version: str
    samples: Path
    queue_samples: list[str]
    runs: dict[str, concurrent.futures.Future[SampleRun]]


def _queue_samples(samples: Path) -> list[str]:
    found = []
    for directory in SAMPLE_DIRS:
        for path in sorted((samples / directory).glob("*.py")):
            relpath = f"{directory}/{path.name}"
            if unsupported_reason(relpath) is None:
                found.append(relpath)
    return found


def _selected(request: pytest.FixtureRequest, queue_samples: list[str]) -> set[str]:
    """The samples whose tests were collected and selected (``-k``), so a run of one sample
    does not wait for all of them."""
    wanted: set[str] = set()
    for item in request.session.items:
        if getattr(item, "module", None) is not request.module:
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "relpath" in callspec.params:
            wanted.add(callspec.params["relpath"])
        elif item.name == "test_new_samples":
            wanted |= set(queue_samples) - KNOWN_QUEUE_SAMPLES
    return wanted


@pytest.fixture(scope="module")
def suite(
    request: pytest.FixtureRequest,
    servicebus_emulator: ServiceBusEmulator,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[SampleSuite]:
    """Fetch the samples, then start every selected queue sample that runs (``PARALLEL`` at a
    time); each test waits for its own sample."""
    base = tmp_path_factory.mktemp("sb-samples")
    version, samples = fetch_samples(base)
    logs = base / "logs"
    logs.mkdir()
    queue_samples = _queue_samples(samples)
    pool = concurrent.futures.ThreadPoolExecutor(PARALLEL, thread_name_prefix="sb-sample")
    runs: dict[str, concurrent.futures.Future[SampleRun]] = {}
    stopping = threading.Event()
    # longest first, so the 200 s auto_lock_renew_async does not start last
    order = sorted(queue_samples, key=lambda r: "auto_lock_renew" not in r)
    selected = _selected(request, queue_samples)
    for relpath in order:
        expected = EXCEPTIONS.get(relpath)
        if relpath not in selected:
            continue
        if expected is not None and expected.kind is Kind.NOT_RUN:
            continue
        # a short lock, so the auto_lock_renew samples (100 s of work) must renew many times
        lock = 10.0 if "auto_lock_renew" in relpath else 60.0
        runs[relpath] = pool.submit(
            run_sample, servicebus_emulator, samples, relpath, logs, lock, stopping
        )
    try:
        yield SampleSuite(version, samples, queue_samples, runs)
    finally:
        stopping.set()
        pool.shutdown(wait=True, cancel_futures=True)


def _describe(run: SampleRun) -> str:
    tail = "\n".join(run.output.splitlines()[-25:])
    return f"{run.relpath} on queue {run.queue} after {run.seconds}s: {run.error}\n{tail}"


# --- tests -------------------------------------------------------------------------------


def test_every_queue_sample_is_covered(suite: SampleSuite) -> None:
    """The installed SDK's queue samples are exactly the ones the parametrized tests name, so a
    sample added by a newer SDK is not silently left out (and it runs: see ``test_new_samples``)."""
    assert set(EXCEPTIONS) <= KNOWN_QUEUE_SAMPLES
    missing = set(KNOWN_QUEUE_SAMPLES) - set(suite.queue_samples)
    assert not missing, f"{SDK} {suite.version} no longer ships {sorted(missing)}"


def test_new_samples(suite: SampleSuite) -> None:
    """Queue samples of the installed SDK that this file does not list must pass too."""
    for relpath in sorted(set(suite.queue_samples) - KNOWN_QUEUE_SAMPLES):
        run = suite.runs[relpath].result(timeout=PASS_TIMEOUT + 60)
        assert run.returncode == 0 and not run.error, _describe(run)


@pytest.mark.timeout(FAILS_IN_TIMEOUT + 120)
@pytest.mark.parametrize("relpath", sorted(KNOWN_QUEUE_SAMPLES))
def test_sample(suite: SampleSuite, relpath: str) -> None:
    if relpath not in suite.queue_samples:
        pytest.fail(f"{SDK} {suite.version} has no {relpath}")
    expected = EXCEPTIONS.get(relpath)
    if expected is not None and expected.kind is Kind.NOT_RUN:
        pytest.skip(f"not run: {expected.reason}")
    run = suite.runs[relpath].result(timeout=FAILS_IN_TIMEOUT + 60)
    assert not run.error, _describe(run)
    lines = run.output.splitlines()
    if expected is None:
        assert run.returncode == 0, _describe(run)
        return
    for line in expected.prints:
        assert line in lines, f"missing {line!r}: " + _describe(run)
    if expected.kind is Kind.HANGS:
        assert run.returncode is None, "expected it still iterating: " + _describe(run)
        assert run.queue_left == 0, "its messages were not all completed: " + _describe(run)
    else:
        assert run.returncode not in (0, None), _describe(run)
        frames = re.findall(r'File "[^"]+", line \d+, in (\w+)', run.output)
        assert expected.fails_in in frames, _describe(run)
