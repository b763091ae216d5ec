"""`cronwarden deploy render|check`: the commands a user runs; errors are one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwarden.cli import main

from .conftest import EXAMPLES, terraform_or_skip


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_render_then_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], schemas: object
) -> None:
    terraform_or_skip()
    out = tmp_path / "gcp"
    code, stdout, stderr = run(
        [
            "deploy",
            "render",
            "--provider",
            "gcp",
            "--jobs",
            str(EXAMPLES / "quarter_hourly.py"),
            "--out",
            str(out),
            "--watcher-provider",
            "azure",
        ],
        capsys,
    )
    assert code == 0, stderr
    assert f"rendered {out} (1 job(s))" in stdout
    assert f"rendered {out / 'watcher'} (1 job(s))" in stdout
    code, stdout, stderr = run(["deploy", "check", str(out)], capsys)
    assert code == 0, stdout + stderr
    assert "schema: ok" in stdout and f"ok: {out}" in stdout


def test_check_fails_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], schemas: object
) -> None:
    terraform_or_skip()
    (tmp_path / "main.tf").write_text('resource "google_pubsub_topic" "t" {\n  nme = "x"\n}\n')
    code, stdout, stderr = run(["deploy", "check", str(tmp_path)], capsys)
    assert code == 2
    assert "unknown argument 'nme' (did you mean 'name'?)" in stdout
    assert stderr.strip().splitlines() == [f"error: 2 problem(s) in {tmp_path}"]  # + 'name' missing


def test_render_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = tmp_path / "jobs.py"
    jobs.write_text(
        "import cronwarden\n\n"
        '@cronwarden.job("both", cron="0 3 1 * MON", max_runtime="1m")\n'
        "def both(ctx): ...\n"
    )
    code, _, stderr = run(
        ["deploy", "render", "-p", "azure", "-j", str(jobs), "-o", str(tmp_path / "o")], capsys
    )
    assert code == 2
    assert len(stderr.strip().splitlines()) == 1
    assert stderr.startswith("error: job 'both': cron '0 3 1 * MON' restricts both")
    code, _, stderr = run(
        ["deploy", "render", "-p", "gcp", "-j", str(tmp_path / "missing.py"), "-o", "x"], capsys
    )
    assert code == 2 and "does not exist" in stderr and len(stderr.strip().splitlines()) == 1
    nightly = str(EXAMPLES / "nightly_export.py")
    code, _, stderr = run(["deploy", "render", "-p", "gcp", "-j", nightly, "-o", "x"], capsys)
    assert code == 2 and len(stderr.strip().splitlines()) == 1
    assert stderr.startswith("error: job 'nightly-export': max_runtime 900s is over the 570s")
    assert "python -m cronwarden.adapters.gcp.serve" in stderr


def test_import_cronwarden_does_not_import_deploy() -> None:
    import subprocess
    import sys

    code = (
        "import sys, cronwarden, cronwarden.cli; "
        "assert not [m for m in sys.modules if m.startswith('cronwarden.deploy')], sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
