"""``cronwarden check`` notifies through the same alerting settings as every host (the settings
file's channels and the dead-man's switch), not only a hard-wired webhook."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwarden.cli import main

from .conftest import HttpSink, write


def test_check_alerts_through_the_settings_file_and_pings_the_switch(
    tmp_path: Path, http_sink: HttpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = write(
        tmp_path,
        "jobs_check.py",
        "import cronwarden\n"
        "@cronwarden.job('minutely', cron='* * * * *', max_runtime='10s')\n"
        "def minutely(ctx):\n    pass\n",
    )
    toml = write(
        tmp_path,
        "alerting.toml",
        f"""
[channels.chat]
type = "slack"
url = "{http_sink.base}/hooks/chat"

[heartbeat]
url = "{http_sink.base}/ping/check-uuid"
""",
    )
    monkeypatch.setenv("CRONWARDEN_ALERTING_CONFIG", str(toml))
    monkeypatch.setenv("CRONWARDEN_LOCAL_PATH", str(tmp_path / "state.db"))
    monkeypatch.delenv("CRONWARDEN_WEBHOOK_URL", raising=False)
    (tmp_path / "state.db").touch()  # an existing (empty) state: nothing has ever run
    with pytest.raises(SystemExit) as caught:
        main(["check", "--jobs", str(jobs)])
    assert caught.value.code == 0  # first sight of the job: within its grace, nothing due yet
    assert http_sink.at("/hooks/chat") == []
    http_sink.wait_for(1)
    assert [r.path for r in http_sink.received] == ["/ping/check-uuid"]
