from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
from datetime import UTC, datetime

import pytest

from cronwarden import RunRequest, redact, register_secret, run_key
from cronwarden.model.errors import MalformedRunRequest
from cronwarden.model.logs import JsonFormatter, configure
from cronwarden.model.records import RunRecord
from cronwarden.model.redaction import snippet
from cronwarden.model.runs import RunState, fingerprint, format_window, parse_window

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


def test_window_texts_are_cached_per_instant_and_errors_are_not() -> None:
    berlin = datetime.fromisoformat("2026-01-20T03:00+01:00")
    assert format_window(W) == format_window(berlin) == "2026-01-20T02:00Z"
    for _ in range(2):  # a cached text never hides a refusal
        with pytest.raises(ValueError, match="minute boundary"):
            format_window(W.replace(second=5))
        with pytest.raises(MalformedRunRequest):
            parse_window("2026-01-20 02:00")
    assert parse_window("2026-01-20T02:00Z") == W and parse_window("2026-01-20T02:00Z").tzinfo


def test_run_record_copies_and_codec_match_the_dataclass_ones() -> None:
    run = RunRecord(
        job="j",
        window="2026-01-20T02:00Z",
        run_key="j:2026-01-20T02:00Z",
        owner="w",
        started_at=W,
        counters={"n": 1},
        extra={"later": True},
    )
    changed = run.with_(state=RunState.SUCCEEDED, finished_at=W, duration_ms=3, overran=True)
    assert changed == dataclasses.replace(
        run, state=RunState.SUCCEEDED, finished_at=W, duration_ms=3, overran=True
    )
    assert run.state is RunState.RUNNING and run.finished_at is None  # the original stays
    assert RunRecord.from_data(changed.to_data()) == changed
    data = changed.to_data()
    assert list(data)[:4] == ["later", "job", "window", "run_key"]
    assert data["finished_at"] == "2026-01-20T02:00:00.000+00:00" and data["overran"] is True
    assert "traceback" not in data and "quarantined" not in data and "write_id" not in data
    with pytest.raises(TypeError):
        run.with_(no_such_field=1)


def test_an_empty_payload_has_the_json_fingerprint() -> None:
    assert fingerprint({}) == hashlib.sha256(b"{}").hexdigest()[:32]
    assert fingerprint({}) != fingerprint({"a": 1}) != fingerprint([])


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


SECRET = "c2VjcmV0a2V5MTIzNDU2Nzg5MA"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        # connection strings: the key goes, the account/endpoint stays readable
        (
            f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={SECRET}==;"
            "EndpointSuffix=core.windows.net",
            "AccountName=acct",
        ),
        (
            f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;"
            f"SharedAccessKey={SECRET}=",
            "SharedAccessKeyName=Root",
        ),
        # a SAS URL: the signature goes, the signed version and expiry stay (they are not secret)
        (
            f"https://acct.blob.core.windows.net/c/b?sv=2024-05-04&se=2026-01-01&sig={SECRET}%3D",
            "sv=2024-05-04",
        ),
        # a SAS as a connection-string value: the whole token is one credential, up to ";"
        (
            f"BlobEndpoint=https://a.blob.core.windows.net/;"
            f"SharedAccessSignature=sv=2024-05-04&ss=b&srt=co&sp=r&sig={SECRET}%3D",
            "BlobEndpoint=https://a.blob.core.windows.net/",
        ),
        # a Service Bus SAS token in an Authorization header
        (
            f"Authorization: SharedAccessSignature sr=sb%3A%2F%2Fns&sig={SECRET}&se=1&skn=Root",
            "Authorization:",
        ),
        (f"Authorization: Bearer {SECRET}.abc.def", "Authorization: Bearer"),
        # DSN passwords, including one that contains "@"
        (f"postgresql://user:{SECRET}@db.internal:5432/app", "@db.internal:5432/app"),
        (f"postgresql://user:p@ss{SECRET}@db.internal/app", "postgresql://user:"),
        (f"redis://:{SECRET}@cache:6379/0", "@cache:6379/0"),
        # AWS: access key ids, secret keys in env, ini and JSON (STS) shapes
        (f"AWS_SECRET_ACCESS_KEY={SECRET}/wJalrXUtnFEMI", "AWS_SECRET_ACCESS_KEY="),
        (f"aws_secret_access_key = {SECRET}/K7MDENG", "aws_secret_access_key"),
        (f'{{"AccessKeyId": "AKIAIOSFODNN7EXAMPLE", "SecretAccessKey": "{SECRET}"}}', "AKIA"),
        (f"aws_session_token={SECRET}", "aws_session_token="),
        # passwords in JSON and env shapes
        (f'{{"password": "{SECRET}", "user": "svc"}}', '"user": "svc"'),
        (f"DB_PASSWORD={SECRET}", "DB_PASSWORD="),
    ],
)
def test_one_rule_set_masks_secrets_and_keeps_context(text: str, kept: str) -> None:
    out = redact(text)
    assert SECRET not in out
    assert "***" in out
    assert kept in out


def test_aws_access_key_id_is_masked() -> None:
    assert "IOSFODNN7EXAMPLE" not in redact("key id AKIAIOSFODNN7EXAMPLE rejected")


def test_azure_adapter_uses_the_core_rule_set() -> None:
    from cronwarden.adapters.azure import _redact

    assert _redact.redact is redact


def test_plain_text_is_left_alone() -> None:
    text = "run billing-sync:2026-01-20T02:00Z succeeded after 3 attempts on worker-7:4411"
    assert redact(text) == text
    assert redact("see https://example.com/docs?page=2") == "see https://example.com/docs?page=2"


def test_identifiers_named_like_keys_are_not_secrets() -> None:
    text = "run_key=billing-sync:2026-01-20T02:00Z idempotency_key: cust-1"
    assert redact(text) == text
