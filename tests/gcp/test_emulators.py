"""The emulator launchers: SDK discovery, readiness, reset, process-group stop, the CLI, and
the skip reason when binaries are missing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

from cronwarden.adapters.gcp import FirestoreStore, PubSubQueue
from cronwarden.emulators.gcp import (
    EmulatorMissing,
    FirestoreEmulator,
    PubSubEmulator,
    missing_reason,
    sdk_root,
)
from cronwarden.model.ports import LOCK, Create, Key

pytestmark = pytest.mark.gcp


def process_group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_until(predicate, deadline: float = 15.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def no_sdk(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[None]:  # type: ignore[no-untyped-def]
    sdk_root.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CRONWARDEN_GCLOUD_SDK_ROOT", raising=False)
    monkeypatch.delenv("CLOUDSDK_ROOT_DIR", raising=False)
    yield
    sdk_root.cache_clear()


def test_sdk_is_found_here() -> None:
    assert sdk_root() is not None
    assert missing_reason("pubsub") is None and missing_reason("firestore") is None


def test_missing_binaries_give_an_install_hint(no_sdk: None) -> None:
    reason = missing_reason("pubsub")
    assert reason is not None
    assert "gcloud components install pubsub-emulator cloud-firestore-emulator" in reason
    with pytest.raises(EmulatorMissing, match="gcloud components install"):
        PubSubEmulator().start()


def test_session_emulators_answer_ok(
    pubsub_emulator: PubSubEmulator, firestore_emulator: FirestoreEmulator
) -> None:
    for emulator in (pubsub_emulator, firestore_emulator):
        assert emulator.host == "127.0.0.1" and emulator.ready() and emulator.running
        with urllib.request.urlopen(emulator.url + "/", timeout=5) as reply:
            assert reply.read().strip() == b"Ok"


def test_firestore_reset_wipes_a_project(firestore_emulator: FirestoreEmulator) -> None:
    store = FirestoreStore("cw-reset-test", emulator_host=firestore_emulator.address)
    try:
        store.commit([Create(Key(LOCK, "j"), {})])
        firestore_emulator.reset("cw-reset-test")
        assert store.get(Key(LOCK, "j")) is None
    finally:
        store.close()


def test_stop_kills_the_whole_process_group(tmp_path) -> None:  # type: ignore[no-untyped-def]
    emulator = PubSubEmulator(log_dir=str(tmp_path)).start()
    try:
        pgid = emulator.pid
        assert pgid is not None and process_group_alive(pgid)
        queue = PubSubQueue(
            "cw-stop", "runs", "worker", emulator_host=emulator.address, create_missing=True
        )
        queue.publish(b"x")
        emulator.reset()
        assert list(queue.subscriber.list_subscriptions(project="projects/cw-stop")) == []
        queue.close()
    finally:
        emulator.stop()
    assert wait_until(lambda: not process_group_alive(pgid))
    assert not emulator.running


def test_cli_prints_the_env_var_and_stops_on_sigterm(tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.Popen(
        [sys.executable, "-c", "from cronwarden.cli import main; main()", "emulators", "pubsub"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("export PUBSUB_EMULATOR_HOST=127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as reply:
            assert reply.read().strip() == b"Ok"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        # the emulator ran in its own group: nothing answers on the port any more
        assert wait_until(lambda: not _answers(port))
    finally:
        if proc.poll() is None:  # SIGTERM first: the CLI stops its emulator's process group
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1):
            return True
    except OSError:
        return False
