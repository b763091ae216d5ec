"""The crontab tools on real-world crontabs: Debian's /etc/crontab with the cron.d files of
common packages, and a web application host's user crontab."""

from __future__ import annotations

from pathlib import Path

from cronwarden.jobs.config import load_jobs
from cronwarden.jobs.crontab import parse_crontab
from cronwarden.jobs.crontab_codegen import render_module

DATA = Path(__file__).parent / "data"


def test_debian_system_crontab_translates_line_for_line(tmp_path: Path) -> None:
    table = parse_crontab(
        (DATA / "debian-system.crontab").read_text(), system=True, timezone="Europe/Berlin"
    )
    assert table.refused == [] and table.invalid == ()
    got = {e.lineno: (e.cron, e.user, e.command.split()[0]) for e in table.entries}
    assert got == {
        9: ("17 * * * *", "root", "cd"),
        10: ("25 6 * * *", "root", "test"),
        11: ("47 6 * * 7", "root", "test"),
        12: ("52 6 1 * *", "root", "test"),
        14: ("9,39 * * * *", "root", "["),
        16: ("0 */12 * * *", "root", "test"),
        18: ("5-55/10 * * * *", "root", "command"),
        19: ("59 23 * * *", "root", "command"),
        21: ("57 0 * * 0", "root", "if"),
        23: ("30 3 * * 0", "root", "test"),
        24: ("10 3 * * *", "root", "test"),
    }
    mdadm = next(e for e in table.entries if e.lineno == 21)
    assert "$(date +%d)" in mdadm.command and mdadm.stdin is None  # \% is a literal %
    flags = {e.lineno: [f.code for f in e.flags] for e in table.entries if e.flags}
    # nothing to decide: offsets on the same hour are on different days (30 3 * * 0 and
    # 10 3 * * * are not chained), and mdadm wrote "first Sunday" around the OR rule
    assert flags == {}
    assert all(e.env_value("SHELL") == "/bin/sh" for e in table.entries)

    module = tmp_path / "debian_jobs.py"
    module.write_text(render_module(table, max_runtime="30m", max_attempts=5))
    jobs = load_jobs(str(module))
    assert len(jobs) == len(table.entries)
    assert all(job.tags == ("crontab", "cron-user:root") for job in jobs)
    assert {job.schedule.timezone for job in jobs} == {"Europe/Berlin"}


def test_web_application_user_crontab(tmp_path: Path) -> None:
    table = parse_crontab((DATA / "webapp-user.crontab").read_text(), timezone="UTC")
    refused = {e.lineno: e.refusal for e in table.refused}
    assert list(refused) == [3] and "@reboot" in (refused[3] or "")
    flags = {e.lineno: [f.code for f in e.flags] for e in table.entries if e.flags}
    assert flags == {
        3: ["reboot"],
        5: ["percent"],  # date +%F: cron cuts the command at the %
        6: ["chained"],  # the upload 15 minutes after the dump
        7: ["dom-or-dow"],  # "first Monday" that is really days 1-7 OR every Monday
    }
    dump = next(e for e in table.entries if e.lineno == 5)
    assert (dump.command, dump.stdin) == (
        "mysqldump mydb | gzip > /backups/db-$(date +",
        "F).sql.gz\n",
    )
    assert all(e.mailto == "dev@example.com" for e in table.entries)
    module = tmp_path / "webapp_jobs.py"
    module.write_text(render_module(table, max_runtime="10m", max_attempts=1, skip={3}))
    jobs = {job.name: job for job in load_jobs(str(module))}
    assert sorted(jobs) == [
        "cd",
        "curl",
        "echo",
        "first-monday-report",
        "invoice-run",
        "mysqldump",
        "upload-backups",
    ]
    assert jobs["invoice-run"].schedule.cron == "0 0 1 * *"
    assert jobs["curl"].schedule.cron == "*/30 8-18 * * 1-5"
    assert all(job.owner == "dev@example.com" for job in jobs.values())


def test_commands_run_in_home_when_the_crontab_sets_it(tmp_path: Path) -> None:
    from cronwarden.testing import capture_events, run_once

    home = tmp_path / "home"
    home.mkdir()
    table = parse_crontab(f"HOME={home}\n0 1 * * * pwd\n", timezone="UTC")
    module = tmp_path / "home_jobs.py"
    module.write_text(render_module(table, max_runtime="1m", max_attempts=1))
    (job,) = load_jobs(str(module))
    with capture_events() as events:
        outcome = run_once(job, "2026-01-20T01:00Z")
    assert outcome.kind.value == "succeeded"
    (done,) = [e for e in events if e.get("event") == "command.completed"]
    assert done["output_tail"] == f"{home}\n"
