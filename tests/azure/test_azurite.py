"""Installing, starting, resetting and stopping Azurite, and its CLI command."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cronwarden.emulators import azurite as az
from cronwarden.emulators._process import free_port, http_ok, port_open
from cronwarden.emulators.azurite import install
from cronwarden.emulators.azurite.cli import azurite as azurite_command

pytestmark = pytest.mark.azure

FAKE_NPM = """#!/bin/sh
# records its arguments, then lays out what `npm ci` would
echo "$@" >> "$CALLS"
[ -n "$FAIL" ] && { echo "npm ERR! boom" >&2; exit 1; }
prefix="$3"
[ -f "$prefix/package-lock.json" ] || exit 3
mkdir -p "$prefix/node_modules/.bin"
touch "$prefix/node_modules/.bin/azurite-table"
"""


def _wait_for(predicate, deadline: float = 30.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_lock_file_pins_azurite_exactly() -> None:
    folder = Path(install.__file__).parent
    manifest = json.loads((folder / "package.json").read_text())
    assert manifest["dependencies"]["azurite"] == install.pinned_version()
    major, minor, _ = (int(p) for p in install.pinned_version().split("."))
    assert (major, minor) >= (3, 35)
    lock = json.loads((folder / "package-lock.json").read_text())
    assert all("integrity" in meta for name, meta in lock["packages"].items() if name)


@pytest.fixture
def fake_npm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    npm = bindir / "npm"
    npm.write_text(FAKE_NPM)
    npm.chmod(npm.stat().st_mode | stat.S_IEXEC)
    calls = tmp_path / "calls"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CALLS", str(calls))
    monkeypatch.setenv(install.ENV_DIR, str(tmp_path / "cache"))
    return calls


def test_install_runs_npm_ci_once_even_when_called_concurrently(fake_npm: Path) -> None:
    assert not install.is_installed()
    threads = [threading.Thread(target=install.ensure_installed) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert install.is_installed()
    calls = fake_npm.read_text().splitlines()
    assert len(calls) == 1 and calls[0].startswith("ci --prefix ")
    assert install.install_dir().parent == install.cache_root()
    assert install.ensure_installed() == install.install_dir()  # idempotent: no second npm ci
    assert len(fake_npm.read_text().splitlines()) == 1
    assert not [p for p in install.cache_root().iterdir() if p.name.startswith(".staging")]


def test_failed_install_reports_npm_output_and_leaves_nothing(
    fake_npm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAIL", "1")
    with pytest.raises(install.AzuriteInstallError, match="boom"):
        install.ensure_installed()
    assert not install.is_installed()
    assert not [p for p in install.cache_root().iterdir() if p.name.startswith(".staging")]


def test_missing_npm_is_reported_with_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(install.ENV_DIR, str(tmp_path / "cache"))
    assert install.missing_tools() == ["node", "npm"]
    with pytest.raises(install.AzuriteInstallError, match=r"Node\.js"):
        install.ensure_installed()


def test_start_reset_and_stop_by_process_group() -> None:
    emulator = az.Azurite(blob=True).start()
    try:
        assert emulator.running() and len(emulator.pids) == 2 and emulator.pid == emulator.pids[0]
        assert http_ok(emulator.table_endpoint + "/Tables")
        assert emulator.blob_endpoint and http_ok(emulator.blob_endpoint + "?comp=list")
        from azure.data.tables import TableServiceClient

        with TableServiceClient.from_connection_string(emulator.connection_string) as svc:
            for _ in range(3):
                svc.create_table(emulator.new_table())
        assert emulator.reset() == 3
        pids, port = emulator.pids, emulator.port
    finally:
        emulator.stop()
    assert not emulator.alive()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    assert not port_open("127.0.0.1", port)
    emulator.stop()  # idempotent


def test_cli_install_prints_the_pinned_version() -> None:
    result = CliRunner().invoke(azurite_command, ["--install"])
    assert result.exit_code == 0, result.output
    assert install.pinned_version() in result.output


def test_cli_runs_until_sigterm_and_prints_the_connection_string() -> None:
    port = free_port()
    code = "from cronwarden.emulators.azurite.cli import azurite; azurite()"
    process = subprocess.Popen(
        [sys.executable, "-c", code, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(2)]
        assert f"127.0.0.1:{port}" in lines[0]
        assert lines[1].startswith("AZURE_STORAGE_CONNECTION_STRING=")
        assert f"TableEndpoint=http://127.0.0.1:{port}/devstoreaccount1" in lines[1]
        assert http_ok(f"http://127.0.0.1:{port}/devstoreaccount1/Tables")
        process.terminate()
        assert process.wait(timeout=30) == 0
        assert _wait_for(lambda: not port_open("127.0.0.1", port))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)
            process.wait()


def test_cli_reports_a_busy_port_cleanly() -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(azurite_command, ["--port", str(port)])
    assert result.exit_code == 1
    assert "azurite-table exited during start" in result.output
