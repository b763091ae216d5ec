"""Every failure a user can cause: one line naming the thing at fault, exit 2 (the table in
the [operator] report is these cases)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from .conftest import write_jobs

GOOD = "@cronwarden.job('x', cron='*/5 * * * *', max_runtime='1m')\ndef x(ctx): pass\n"


@pytest.fixture
def good(tmp_path: Path) -> str:
    return write_jobs(tmp_path / "good.py", GOOD)


@pytest.mark.parametrize(
    ("body", "line"),
    [
        (
            "\n@cronwarden.job('x', cron='* * * * *', max_runtime='1m'\ndef x(ctx): pass\n",
            "error: bad.py:3: SyntaxError: '(' was never closed",
        ),
        (
            "import no_such_library_xyz\n",
            "error: bad.py:2: ModuleNotFoundError: No module named 'no_such_library_xyz'",
        ),
        (
            "\n@cronwarden.job('x', cron='* * * * *')\ndef x(ctx): pass\n",
            "error: bad.py:3: TypeError: job() missing 1 required keyword-only argument: "
            "'max_runtime'",
        ),
        ("raise RuntimeError('boom')\n", "error: bad.py:2: RuntimeError: boom"),
    ],
)
def test_a_broken_job_module_is_named_by_file_and_line(
    cw, tmp_path: Path, body: str, line: str
) -> None:
    write_jobs(tmp_path / "bad.py", body)
    result = cw("status", "--jobs", "bad.py")
    assert result.code == 2, result
    assert result.err == line
    assert "Traceback" not in result.stderr


def test_debug_shows_the_traceback(cw, tmp_path: Path) -> None:
    write_jobs(tmp_path / "bad.py", "raise RuntimeError('boom')\n")
    result = cw("--debug", "status", "--jobs", "bad.py")
    assert result.code == 2
    assert result.stderr.startswith("Traceback")
    assert result.stderr.splitlines()[-1] == "error: bad.py:2: RuntimeError: boom"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["status", "--jobs", ""],
            "error: Invalid value for '--jobs' / '-j': is empty; give a module name or a .py path",
        ),
        (
            ["history", "--jobs", "good.py", "x", "--limit", "-5"],
            "error: Invalid value for '--limit': must be at least 1, got -5",
        ),
        (
            ["dlq", "list", "--limit", "-1"],
            "error: Invalid value for '--limit': must be at least 1, got -1",
        ),
        (
            ["backfill", "--jobs", "good.py", "x", "--from", "2020-01-01", "--limit", "-2"],
            "error: Invalid value for '--limit': must be at least 1, got -2",
        ),
        (
            ["run", "--jobs", "good.py", "--workers", "0"],
            "error: Invalid value for '--workers': must be at least 1, got 0",
        ),
        (
            ["status", "--jobs", "good.py", "--provider", "gcp", "--state", "x.db"],
            "error: --state applies to --provider local only (this is --provider gcp)",
        ),
        (
            ["trigger", "--jobs", "good.py", "x", "--window", "soon"],
            "error: --window: 'soon' is not an ISO time like 2026-01-20T02:00Z",
        ),
        (["history", "--jobs", "good.py", "nope"], "error: unknown job 'nope' (known: x)"),
        (
            ["check", "--jobs", "good.py", "--provider", ""],
            "error: --provider is empty: name one of local, gcp, azure, aws, postgres, redis, "
            "s3, blob, gcs",
        ),
        (
            ["check", "--jobs", "good.py", "--state", ""],
            "error: Invalid value for '--state': is empty: name a state file, or leave --state out",
        ),
        (
            ["status", "--jobs", "good.py", "--provider", "nimbus"],
            "error: unknown provider 'nimbus'; choose one of aws, azure, blob, gcp, gcs, local, "
            "postgres, redis, s3",
        ),
    ],
)
def test_counts_limits_and_names_are_validated(cw, good: str, args: list[str], line: str) -> None:
    result = cw(*args)
    assert result.code == 2, result
    assert result.err == line


def test_a_state_path_that_is_a_directory_is_named(cw, tmp_path: Path, good: str) -> None:
    (tmp_path / "dir").mkdir()
    result = cw("trigger", "--jobs", good, "x", "--state", "dir")
    assert result.code == 2
    assert result.err == (
        f"error: state path {tmp_path}/dir is a directory; --state names a file "
        f"(e.g. {tmp_path}/dir/state.db)"
    )


@pytest.mark.parametrize(("name", "label"), [("s.db", "state"), ("s.db-queue", "queue")])
def test_a_corrupted_state_file_is_named(
    cw, tmp_path: Path, good: str, name: str, label: str
) -> None:
    assert cw("trigger", "--jobs", good, "x", "--state", "s.db").code == 0
    (tmp_path / name).write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        (tmp_path / (name + suffix)).unlink(missing_ok=True)
    result = cw("trigger", "--jobs", good, "x", "--state", "s.db")
    assert result.code == 2, result
    assert result.err == (
        f"error: {label} file {tmp_path}/{name} cannot be used: file is not a database "
        "(move it aside to start afresh)"
    )


BLOCK = "import sys; sys.modules.update({m: None for m in %r}); "
MAIN = "from cronwarden.cli import main; main()"


def test_a_missing_cloud_extra_names_its_install_command(cw, good: str) -> None:
    argv = [sys.executable, "-c", BLOCK % ["google.cloud.firestore", "google.cloud"] + MAIN]
    result = cw(
        "status",
        "--jobs",
        good,
        "--provider",
        "gcp",
        argv=argv,
        env={"CRONWARDEN_GCP_PROJECT": "demo"},
    )
    assert result.code == 2, result
    assert result.err.startswith("error: ")
    assert "google.cloud" in result.err
    assert result.err.endswith("pip install 'cronwarden[gcp]')")


def test_emulators_without_the_extra_names_its_install_command(cw) -> None:
    argv = [sys.executable, "-c", BLOCK % ["cronwarden.emulators.cli"] + MAIN]
    result = cw("emulators", "pubsub", argv=argv)
    assert result.code == 2, result
    assert result.err.startswith("error: `cronwarden emulators` needs the [emulators] extra")
    assert result.err.endswith("pip install 'cronwarden[emulators]'")


def test_a_taken_servicebus_port_names_the_process_holding_it(cw) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cw("emulators", "servicebus", "--port", str(port))
    assert result.code == 2, result
    assert result.err.startswith(f"error: port {port} on 127.0.0.1 is already taken by pid ")
    assert result.err.endswith("stop it or choose another --port (0 picks a free one)")


def test_a_taken_pubsub_port_is_refused_not_reported_ready(cw) -> None:
    from cronwarden.emulators.gcp._sdk import missing_reason

    if missing_reason("pubsub"):
        pytest.skip(missing_reason("pubsub") or "")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cw("emulators", "pubsub", "--port", str(port))
    assert result.code == 2, result
    assert result.err.startswith(
        f"error: pubsub emulator: port {port} on 127.0.0.1 is already taken by pid "
    )
    assert "emulator ready" not in result.stderr
