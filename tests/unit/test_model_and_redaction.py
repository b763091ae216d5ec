from __future__ import annotations

import io
import json
import logging
from datetime import UTC, datetime

import pytest

from cronwarden import RunRequest, redact, register_secret, run_key
from cronwarden.errors import MalformedRunRequest
from cronwarden.logs import JsonFormatter, configure
from cronwarden.redaction import snippet

W = datetime(2026, 1, 20, 2, 0, tzinfo=UTC)


def test_run_key_is_job_and_utc_window() -> None:
    assert run_key("billing-sync", W) == "billing-sync:2026-01-20T02:00Z"
    berlin = datetime.fromisoformat("2026-01-20T03:00+01:00")
    assert run_key("billing-sync", berlin) == "billing-sync:2026-01-20T02:00Z"


def test_run_request_round_trips() -> None:
    request = RunRequest("billing-sync", W, reason="manual", payload={"x": [1, "ü"]})
    back = RunRequest.from_json(request.to_json())
    assert (back.job, back.window, back.reason, back.payload) == (
        "billing-sync",
        W,
        "manual",
        {"x": [1, "ü"]},
    )
    assert back.run_key == request.run_key


def test_run_key_must_match_job_and_window() -> None:
    body = json.loads(RunRequest("a", W).to_json())
    body["run_key"] = "a:2026-01-21T02:00Z"
    with pytest.raises(MalformedRunRequest, match="does not match"):
        RunRequest.from_json(json.dumps(body))


@pytest.mark.parametrize(
    "text",
    [
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0a2V5MTIzNDU2Nzg5MA==;"
        "EndpointSuffix=core.windows.net",
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;"
        "SharedAccessKey=c2VjcmV0a2V5MTIzNDU2Nzg5MA=",
        "postgres://admin:c2VjcmV0a2V5MTIzNDU2Nzg5MA@db.internal:5432/app",
        "Authorization: Bearer c2VjcmV0a2V5MTIzNDU2Nzg5MA.abc.def",
        "https://acct.blob.core.windows.net/c/b?sv=2024&sig=c2VjcmV0a2V5MTIzNDU2Nzg5MA%3D",
        "token=c2VjcmV0a2V5MTIzNDU2Nzg5MA",
        "api_key: 'c2VjcmV0a2V5MTIzNDU2Nzg5MA'",
        "xoxb-c2VjcmV0a2V5MTIzNDU2Nzg5MA",
        "-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0a2V5MTIzNDU2Nzg5MA\n"
        "-----END RSA PRIVATE KEY-----",
    ],
)
def test_secret_shapes_are_redacted(text: str) -> None:
    out = redact(text)
    assert "c2VjcmV0a2V5MTIzNDU2Nzg5MA" not in out
    assert "***" in out


def test_registered_secret_values_are_redacted_everywhere() -> None:
    register_secret("canary-7f3a9b1c")
    assert redact("connecting with canary-7f3a9b1c failed") == "connecting with *** failed"
    assert "canary-7f3a9b1c" not in snippet(RuntimeError("bad canary-7f3a9b1c"))


def test_snippet_is_truncated() -> None:
    text = snippet(ValueError("x" * 2000), limit=100)
    assert len(text) == 100 and text.startswith("ValueError: ")


def test_json_log_lines_are_redacted_including_tracebacks_and_fields() -> None:
    stream = io.StringIO()
    handler = configure(stream=stream)
    log = logging.getLogger("cronwarden.test")
    try:
        raise RuntimeError("connect failed: AccountKey=c2VjcmV0a2V5MTIzNDU2Nzg5MA==")
    except RuntimeError:
        log.exception(
            "oops password=hunter22", extra={"event": "x.y", "conn": "SharedAccessKey=abcdEFGH1234"}
        )
    logging.getLogger("cronwarden").removeHandler(handler)
    line = json.loads(stream.getvalue().strip().splitlines()[-1])
    text = json.dumps(line)
    assert "c2VjcmV0a2V5MTIzNDU2Nzg5MA" not in text and "hunter22" not in text
    assert "abcdEFGH1234" not in text
    assert line["event"] == "x.y" and line["level"] == "error"
    assert isinstance(JsonFormatter().format(logging.makeLogRecord({"msg": "m"})), str)
