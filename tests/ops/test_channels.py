"""Each channel against a loopback server that records what it receives."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cronwarden import Alert, Condition, WebhookNotifier
from cronwarden.watch.alerting.channels import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    Email,
    PagerDuty,
    SignedWebhook,
    SlackWebhook,
    Teams,
    dedup_key,
    sign,
    verify,
)
from cronwarden.watch.alerting.http import DeliveryError

from .conftest import HttpSink, SmtpSink, free_port

FIELDS = {"owner": "team-data", "tags": ["billing"], "timezone": "Europe/Berlin"}


def alert(firing: bool = True, kind: Condition = Condition.FAILING) -> Alert:
    return Alert(
        "billing-sync",
        kind,
        firing,
        "billing-sync failing: 3 consecutive failures; last error: boom. Owner: team-data.",
        first_check="last error",
        extra=dict(FIELDS),
    )


def test_slack_webhook_posts_text_and_fields(http_sink: HttpSink) -> None:
    SlackWebhook("chat", http_sink.base + "/hooks/T0/B0/s3cretpath").deliver(alert())
    (got,) = http_sink.at("/hooks/T0/B0/s3cretpath")
    body = got.json()
    assert body["text"].startswith("billing-sync failing")
    assert body["alert"]["owner"] == "team-data" and body["alert"]["state"] == "firing"


def test_signed_webhook_carries_a_verifiable_hmac(http_sink: HttpSink) -> None:
    secret = "whsec-0123456789abcdef"
    SignedWebhook("ops", http_sink.base + "/cronwarden", secret).deliver(alert())
    (got,) = http_sink.at("/cronwarden")
    stamp, signature = got.headers[TIMESTAMP_HEADER.lower()], got.headers[SIGNATURE_HEADER.lower()]
    assert abs(int(stamp) - time.time()) < 600
    assert signature == sign(secret, int(stamp), got.body)
    assert verify(secret, got.body, stamp, signature)
    assert not verify("another-secret", got.body, stamp, signature)
    assert not verify(secret, got.body.replace(b"billing", b"hacked!"), stamp, signature)
    assert not verify(secret, got.body, stamp, signature, now=int(stamp) + 301)  # a replay
    body = got.json()
    assert (
        body["version"] == 1
        and body["headline"] == "FIRING failing: billing-sync (owner team-data)"
    )


def test_pagerduty_triggers_and_resolves_with_one_dedup_key(http_sink: HttpSink) -> None:
    channel = PagerDuty("pager", "R0UTINGKEY0123456789", url=http_sink.base + "/v2/enqueue")
    channel.deliver(alert(True))
    channel.deliver(alert(False))
    trigger, resolve = (r.json() for r in http_sink.at("/v2/enqueue"))
    assert trigger["event_action"] == "trigger" and resolve["event_action"] == "resolve"
    assert trigger["dedup_key"] == resolve["dedup_key"] == "cronwarden/billing-sync/failing"
    assert trigger["routing_key"] == "R0UTINGKEY0123456789"
    payload = trigger["payload"]
    assert payload["severity"] == "error" and payload["component"] == "billing-sync"
    assert payload["group"] == "team-data" and payload["class"] == "failing"
    assert payload["custom_details"]["owner"] == "team-data"
    assert "payload" not in resolve
    assert dedup_key("billing-sync", "missed") != dedup_key("billing-sync", "failing")


def test_pagerduty_test_alert_leaves_no_incident_open(http_sink: HttpSink) -> None:
    channel = PagerDuty("pager", "R0UTINGKEY0123456789", url=http_sink.base + "/v2/enqueue")
    test = Alert("cronwarden-notify-test", Condition.FAILING, True, "test", extra={"test": True})
    channel.deliver_test(test)
    actions = [(r.json()["event_action"], r.json()["dedup_key"]) for r in http_sink.received]
    key = "cronwarden/cronwarden-notify-test/test"
    assert actions == [("trigger", key), ("resolve", key)]
    assert http_sink.received[0].json()["payload"]["severity"] == "info"


@pytest.mark.parametrize("card", ["adaptive", "messagecard"])
def test_teams_posts_a_card(http_sink: HttpSink, card: str) -> None:
    Teams("teams", http_sink.base + "/webhookb2/abc", card=card).deliver(alert())
    body = http_sink.at("/webhookb2/abc")[0].json()
    if card == "adaptive":
        assert body["type"] == "message"
        (attachment,) = body["attachments"]
        assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
        content = attachment["content"]
        assert content["type"] == "AdaptiveCard"
        assert content["body"][0]["text"] == "FIRING failing: billing-sync (owner team-data)"
        facts = {f["title"]: f["value"] for f in content["body"][2]["facts"]}
    else:
        assert body["@type"] == "MessageCard" and body["themeColor"] == "D13438"
        facts = {f["name"]: f["value"] for f in body["sections"][0]["facts"]}
    assert facts["Owner"] == "team-data" and facts["Tags"] == "billing"


def test_email_over_smtp_with_login(smtp_sink: SmtpSink) -> None:
    channel = Email(
        "mail",
        host=smtp_sink.host,
        port=smtp_sink.port,
        tls="none",
        sender="cronwarden@example.test",
        recipients=["oncall@example.test", "data@example.test"],
        username="cronwarden",
        password="smtp-pass-1234",
    )
    channel.deliver(alert())
    (mail_from, rcpt, message) = smtp_sink.messages[0]
    assert mail_from == "cronwarden@example.test"
    assert rcpt == ["oncall@example.test", "data@example.test"]
    assert message["Subject"] == "[cronwarden] FIRING failing: billing-sync (owner team-data)"
    body = message.get_content()
    assert "3 consecutive failures" in body and "owner: team-data" in body
    assert smtp_sink.logins == [("cronwarden", "smtp-pass-1234")]


def test_email_to_a_dead_server_is_a_delivery_error_without_the_password() -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    channel = Email(
        "mail",
        host="127.0.0.1",
        port=port,
        tls="none",
        sender="cronwarden@example.test",
        recipients=["oncall@example.test"],
        username="cronwarden",
        password="wrong-pass-5678",
        timeout=2,
    )
    with pytest.raises(DeliveryError) as caught:
        channel.deliver(alert())
    assert f"127.0.0.1:{port}" in str(caught.value)
    assert "wrong-pass-5678" not in str(caught.value)


def test_starttls_against_a_server_without_it_fails_loudly(smtp_sink: SmtpSink) -> None:
    channel = Email(
        "mail",
        host=smtp_sink.host,
        port=smtp_sink.port,
        tls="starttls",
        sender="cronwarden@example.test",
        recipients=["oncall@example.test"],
    )
    with pytest.raises(DeliveryError, match="STARTTLS"):
        channel.deliver(alert())
    assert smtp_sink.messages == []


def test_http_errors_raise_on_deliver_and_are_logged_on_notify(
    http_sink: HttpSink, log_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    url = http_sink.base + "/hooks/T0/B0/xyz-very-secret-path"
    http_sink.status["/hooks/T0/B0/xyz-very-secret-path"] = 500
    channel = SlackWebhook("chat", url)
    with pytest.raises(DeliveryError, match="HTTP 500"):
        channel.deliver(alert())
    channel.notify(alert())  # never raises: the watcher and the other channels go on
    assert channel.failures == 1
    (line,) = [x for x in log_lines() if x["event"] == "alert.delivery_failed"]
    assert line["channel"] == "chat" and line["job"] == "billing-sync"
    assert "xyz-very-secret-path" not in json.dumps(log_lines())


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_is_a_delivery_error_and_is_not_followed(http_sink: HttpSink, code: int) -> None:
    # urllib would resend a POST answered 301/302/303 as a GET without its body: the page it
    # lands on answers 200, and an alert nobody received would count as delivered
    http_sink.redirect["/hook"] = http_sink.base + "/login"
    http_sink.status["/hook"] = code
    channel = SlackWebhook("chat", http_sink.base + "/hook")
    with pytest.raises(DeliveryError, match=f"HTTP {code} .*redirects"):
        channel.deliver(alert())
    assert [r.path for r in http_sink.received] == ["/hook"]  # never followed to /login
    legacy = WebhookNotifier(http_sink.base + "/hook")
    legacy.notify(alert())
    assert legacy.failures == 1


def test_unreachable_endpoint_is_a_delivery_error() -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(DeliveryError, match="cannot connect"):
        SlackWebhook("chat", f"http://127.0.0.1:{port}/x", timeout=2).deliver(alert())


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (the test's own CA, trusted via ``ca_file``)."""
    import datetime as dt
    import ipaddress

    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_email_upgrades_with_starttls_before_logging_in(tmp_path: Path) -> None:
    import ssl

    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult

    cert, key = _self_signed(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    got: list[tuple[bool, str]] = []

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            got.append((session.ssl is not None, envelope.content.decode()))
            return "250 OK"

    port = free_port()
    controller = Controller(
        Handler(),
        hostname="127.0.0.1",
        port=port,
        tls_context=server_tls,
        require_starttls=True,
        auth_require_tls=True,
        authenticator=lambda *args: AuthResult(success=True),
    )
    controller.start()
    try:
        channel = Email(
            "mail",
            host="127.0.0.1",
            port=port,
            tls="starttls",
            sender="cronwarden@example.test",
            recipients=["oncall@example.test"],
            username="cronwarden",
            password="tls-only-password",
            ca_file=str(cert),
        )
        channel.deliver(alert())
        untrusted = Email(
            "mail",
            host="127.0.0.1",
            port=port,
            tls="starttls",
            sender="cronwarden@example.test",
            recipients=["oncall@example.test"],
        )
        with pytest.raises(DeliveryError, match="CERTIFICATE_VERIFY_FAILED"):
            untrusted.deliver(alert())
    finally:
        controller.stop()
    ((encrypted, content),) = got
    assert encrypted and "billing-sync failing" in content


HOSTILE = (
    "billing-sync failing: upstream said <!channel> deploy <https://evil.example/x|the runbook> "
    "& <@U024BE7LH> now. Owner: team-data."
)


def hostile(firing: bool = True) -> Alert:
    return Alert("billing-sync", Condition.FAILING, firing, HOSTILE, extra=dict(FIELDS))


def test_slack_escapes_text_that_is_not_ours(http_sink: HttpSink) -> None:
    SlackWebhook("chat", http_sink.base + "/hooks/T0/B0/s3cretpath").deliver(hostile())
    text = http_sink.at("/hooks/T0/B0/s3cretpath")[0].json()["text"]
    assert "<" not in text and ">" not in text  # no mention, no link, no disguised URL
    assert "&lt;!channel&gt;" in text
    assert "&lt;https://evil.example/x|the runbook&gt;" in text
    assert "&amp; &lt;@U024BE7LH&gt;" in text  # & first, so entities are not double-read


@pytest.mark.parametrize("card", ["adaptive", "messagecard"])
def test_teams_shows_markdown_in_error_text_as_text(http_sink: HttpSink, card: str) -> None:
    # card text is Markdown: an error must not render as a disguised link or in bold
    text = "billing-sync failing: [re-authenticate](https://evil.example/login) **URGENT** now"
    Teams("teams", http_sink.base + "/hook", card=card).deliver(
        Alert("billing-sync", Condition.FAILING, True, text, extra=dict(FIELDS))
    )
    body = http_sink.at("/hook")[0].json()
    if card == "adaptive":
        shown = body["attachments"][0]["content"]["body"][1]["text"]
    else:
        shown = body["sections"][0]["text"]
    assert "[re-authenticate](" not in shown and "**URGENT**" not in shown
    assert r"\[re-authenticate\](https://evil.example/login) \*\*URGENT\*\*" in shown


@pytest.mark.parametrize("card", ["adaptive", "messagecard"])
def test_teams_escapes_card_text(http_sink: HttpSink, card: str) -> None:
    owned = Alert(
        "billing-sync",
        Condition.FAILING,
        True,
        HOSTILE,
        extra={"owner": "<at>team</at>", "tags": ["a&b"]},
    )
    Teams("teams", http_sink.base + "/webhookb2/abc", card=card).deliver(owned)
    body = http_sink.at("/webhookb2/abc")[0].json()
    if card == "adaptive":
        content = body["attachments"][0]["content"]
        text = content["body"][1]["text"]
        title = content["body"][0]["text"]
        facts = {f["title"]: f["value"] for f in content["body"][2]["facts"]}
    else:
        text, title = body["sections"][0]["text"], body["title"]
        facts = {f["name"]: f["value"] for f in body["sections"][0]["facts"]}
    assert "<" not in text + title + "".join(facts.values())
    assert "&lt;!channel&gt;" in text and "&amp;" in text
    assert facts["Owner"] == "&lt;at&gt;team&lt;/at&gt;" and facts["Tags"] == "a&amp;b"
    assert title == "FIRING failing: billing-sync (owner &lt;at&gt;team&lt;/at&gt;)"


def _mail(smtp_sink: SmtpSink) -> Email:
    return Email(
        "mail",
        host=smtp_sink.host,
        port=smtp_sink.port,
        tls="none",
        sender="Cronwarden <cronwarden@example.test>",
        recipients=["oncall@example.test"],
    )


def test_email_has_date_message_id_and_auto_submitted(smtp_sink: SmtpSink) -> None:
    from datetime import UTC, datetime, timedelta
    from email.utils import parsedate_to_datetime

    channel = _mail(smtp_sink)
    last = datetime(2026, 1, 19, 0, 30, tzinfo=UTC)
    fired = Alert("billing-sync", Condition.FAILING, True, HOSTILE, last_success=last)
    channel.deliver(fired)
    channel.deliver(fired)  # the same transition announced again (say, a second watcher)
    recovered = Alert(
        "billing-sync", Condition.FAILING, False, "recovered", last_success=last + timedelta(1)
    )
    channel.deliver(recovered)
    refired = Alert(
        "billing-sync", Condition.FAILING, True, HOSTILE, last_success=last + timedelta(1)
    )
    channel.deliver(refired)
    # fired again with the same last success (a lock freed, then held again): a later
    # window, so a new message that a client dropping duplicate ids keeps
    later = Alert(
        "billing-sync",
        Condition.FAILING,
        True,
        HOSTILE,
        last_success=last + timedelta(1),
        expected_next=last + timedelta(2),
    )
    channel.deliver(later)
    first, repeat, recovery, again, latest = (m for (_, _, m) in smtp_sink.messages)
    sent = parsedate_to_datetime(first["Date"])
    assert sent.tzinfo is not None and abs(sent - datetime.now(UTC)) < timedelta(minutes=10)
    assert first["Auto-Submitted"] == "auto-generated"
    assert first["Message-ID"].startswith("<") and first["Message-ID"].endswith("@example.test>")
    assert first["Message-ID"] == repeat["Message-ID"]  # a repeat is recognisable
    ids = {m["Message-ID"] for m in (first, recovery, again, latest)}
    assert len(ids) == 4  # each transition is its own message
    assert recovery["References"] == first["References"] == again["References"]  # one thread
    assert first.get_content_type() == "text/plain"
    assert first.get_content_charset() == "utf-8"
    assert "<!channel>" in first.get_content()  # plain text: nothing to escape, shown as is


def test_email_test_alerts_are_distinct_messages(smtp_sink: SmtpSink) -> None:
    channel = _mail(smtp_sink)
    for moment in ("10:00:00", "10:05:00"):
        channel.deliver(
            Alert(
                "cronwarden-notify-test",
                Condition.FAILING,
                True,
                f"test at {moment}",
                extra={"test": True},
            )
        )
    one, two = (m["Message-ID"] for (_, _, m) in smtp_sink.messages)
    assert one != two


def test_pagerduty_event_has_what_the_events_api_needs(http_sink: HttpSink) -> None:
    channel = PagerDuty(
        "pager", "R0UTINGKEY0123456789", url=http_sink.base + "/v2/enqueue", source="prod-eu"
    )
    channel.deliver(alert(True, Condition.SKIPPING))
    body = http_sink.at("/v2/enqueue")[0].json()
    assert body["dedup_key"] == "cronwarden/billing-sync/skipping"
    payload = body["payload"]
    assert payload["source"] == "prod-eu" and payload["component"] == "billing-sync"
    assert payload["severity"] == "warning"
    assert payload["custom_details"]["alert"] == "skipping"
    assert len(payload["summary"]) <= 1024


def test_pagerduty_dedup_key_stays_within_255_characters_and_stable() -> None:
    long_job = "j" * 300
    key = dedup_key(long_job, "failing")
    assert len(key) <= 255 and key == dedup_key(long_job, "failing")
    assert key.endswith("/failing") and key != dedup_key(long_job, "missed")
    assert key != dedup_key("j" * 299, "failing")
