"""``cronwarden notify test``: a test alert through every channel, exit 1 naming a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwarden.cli import main

from .conftest import HttpSink, SmtpSink, write


def settings(tmp_path: Path, sink: HttpSink, smtp: SmtpSink) -> Path:
    return write(
        tmp_path,
        "alerting.toml",
        f"""
[channels.chat]
type = "slack"
url = "{sink.base}/hooks/chat"

[channels.signed]
type = "webhook"
url = "{sink.base}/signed"
secret = "env:HOOK_SECRET"

[channels.pager]
type = "pagerduty"
routing_key = "env:PD_KEY"
url = "{sink.base}/v2/enqueue"

[channels.teams]
type = "teams"
url = "{sink.base}/teams"

[channels.mail]
type = "email"
host = "{smtp.host}"
port = {smtp.port}
tls = "none"
from = "cronwarden@example.test"
to = ["oncall@example.test"]

[heartbeat]
url = "{sink.base}/ping/abc-uuid"
""",
    )


def run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    return int(caught.value.code or 0)


@pytest.fixture(autouse=True)
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_SECRET", "hook-secret-value")
    monkeypatch.setenv("PD_KEY", "pd-key-value-123")
    monkeypatch.delenv("CRONWARDEN_ALERTING_CONFIG", raising=False)
    monkeypatch.delenv("CRONWARDEN_WEBHOOK_URL", raising=False)
    monkeypatch.delenv("CRONWARDEN_HEARTBEAT_URL", raising=False)


def test_every_channel_receives_the_test_alert(
    tmp_path: Path, http_sink: HttpSink, smtp_sink: SmtpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(["notify", "test", "--config", str(settings(tmp_path, http_sink, smtp_sink))])
    out = capsys.readouterr().out
    assert code == 0, out
    for name in ("chat (slack)", "signed (webhook)", "pager (pagerduty)", "teams (teams)"):
        assert f"ok      {name}" in out
    assert "ok      mail (email)" in out and "ok      heartbeat (healthchecks)" in out
    paths = sorted(r.path for r in http_sink.received)
    assert paths == sorted(
        ["/hooks/chat", "/signed", "/v2/enqueue", "/v2/enqueue", "/teams", "/ping/abc-uuid/log"]
    )
    # the dead-man's switch gets a log entry, never a success ping: a test is not a check
    assert http_sink.at("/ping/abc-uuid") == []
    (logged,) = http_sink.at("/ping/abc-uuid/log")
    assert logged.method == "POST" and b"notify test" in logged.body
    assert "test alert" in http_sink.at("/hooks/chat")[0].json()["text"]
    trigger, resolve = (r.json() for r in http_sink.at("/v2/enqueue"))
    assert (trigger["event_action"], resolve["event_action"]) == ("trigger", "resolve")
    assert trigger["payload"]["severity"] == "info"  # an info event, resolved at once
    assert trigger["dedup_key"] == resolve["dedup_key"]
    (_, _, message) = smtp_sink.messages[0]
    assert message["Subject"].startswith("[cronwarden] TEST failing: cronwarden-notify-test")


def test_a_failing_channel_exits_1_and_is_named(
    tmp_path: Path, http_sink: HttpSink, smtp_sink: SmtpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    http_sink.status["/v2/enqueue"] = 400
    code = run(["notify", "test", "--config", str(settings(tmp_path, http_sink, smtp_sink))])
    captured = capsys.readouterr()
    assert code == 1
    assert "FAILED  pager (pagerduty): HTTP 400" in captured.out
    assert "ok      chat (slack)" in captured.out  # the others were still tried
    assert "1 channel(s) failed: pager" in captured.err
    assert "pd-key-value-123" not in captured.out + captured.err


def test_one_channel_can_be_tested_alone(
    tmp_path: Path, http_sink: HttpSink, smtp_sink: SmtpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    path = settings(tmp_path, http_sink, smtp_sink)
    assert run(["notify", "test", "--config", str(path), "--channel", "chat"]) == 0
    assert [r.path for r in http_sink.received] == ["/hooks/chat"]
    assert run(["notify", "test", "--config", str(path), "--channel", "nope"]) == 2
    assert "unknown channel(s) nope" in capsys.readouterr().err


def test_no_channel_configured_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = write(tmp_path, "empty.toml", "")
    assert run(["notify", "test", "--config", str(empty)]) == 1
    assert "nothing would reach a human" in capsys.readouterr().err


def test_a_missing_secret_is_a_configuration_error(
    tmp_path: Path,
    http_sink: HttpSink,
    smtp_sink: SmtpSink,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("PD_KEY")
    code = run(["notify", "test", "--config", str(settings(tmp_path, http_sink, smtp_sink))])
    assert code == 2
    assert "channels.pager.routing_key (env:PD_KEY): the environment variable is not set" in (
        capsys.readouterr().err
    )
    assert http_sink.received == []


def heartbeat_only(tmp_path: Path, url: str, fmt: str) -> Path:
    return write(tmp_path, "hb.toml", f'[heartbeat]\nurl = "{url}"\nformat = "{fmt}"\n')


def test_a_heartbeat_without_a_test_endpoint_is_skipped_not_pinged(
    tmp_path: Path, http_sink: HttpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    path = heartbeat_only(tmp_path, f"{http_sink.base}/p/key/watcher", "cronitor")
    assert run(["notify", "test", "--config", str(path)]) == 1  # nothing was tested
    captured = capsys.readouterr()
    assert "SKIPPED heartbeat (cronitor): cronitor has no test endpoint" in captured.out
    assert "nothing could be tested" in captured.err
    assert http_sink.received == []  # no ping: Cronitor would record a completed check


def test_a_failing_heartbeat_log_exits_1(
    tmp_path: Path, http_sink: HttpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    http_sink.status["/ping/abc-uuid/log"] = 404
    path = heartbeat_only(tmp_path, f"{http_sink.base}/ping/abc-uuid/", "healthchecks")
    assert run(["notify", "test", "--config", str(path)]) == 1
    captured = capsys.readouterr()
    assert "FAILED  heartbeat (healthchecks): HTTP 404" in captured.out
    assert [r.path for r in http_sink.received] == ["/ping/abc-uuid/log"]
