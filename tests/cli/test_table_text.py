"""Tables print stored text as text: a run's error is data, never Rich markup or terminal
control (an error holding ``[/data]`` made ``history`` fail; ``[link=…]`` hid a URL)."""

from __future__ import annotations

from pathlib import Path

from tests.integration.test_cli import cw

JOBS = """
import cronwarden

@cronwarden.job("hostile", cron="*/5 * * * *", max_runtime="1m", retry=cronwarden.Retry(1))
def hostile(ctx):
    raise KeyError("missing [/data] [link=https://evil.example]see runbook[/link] \\x1b[31mred")
"""


def test_history_and_dlq_list_show_markup_and_escapes_in_errors_as_text(tmp_path: Path) -> None:
    (tmp_path / "hostile_jobs.py").write_text(JOBS)
    jobs = str(tmp_path / "hostile_jobs.py")
    ran = cw(tmp_path, "trigger", "--jobs", jobs, "hostile", "-o", "json")
    assert ran.returncode == 1, ran.stdout + ran.stderr  # dead-lettered
    for args in (("history", "--jobs", jobs, "hostile", "--long"), ("dlq", "list")):
        shown = cw(tmp_path, *args, "-o", "table")
        assert shown.returncode == 0, shown.stderr
        flat = "".join(shown.stdout.split())  # the table folds long cells over lines
        assert "[/data]" in flat and "[link=https://evil.example]" in flat, shown.stdout
        assert "\x1b" not in shown.stdout and "\\x1b[31m" in flat
