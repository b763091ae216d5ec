"""Notifier channels. Each one :meth:`~Channel.deliver` s an alert or raises
:class:`~cronwarden.watch.alerting.http.DeliveryError`; :meth:`~Channel.notify` is the
watcher-facing
``Notifier`` method that never raises (a broken channel is logged and counted, and must not stop
the watcher or the other channels).

========== =====================================================================================
log        one JSON log line (``alert.fired`` / ``alert.recovered``): always on
slack      Slack-style incoming webhook: ``{"text": …, "alert": {…}}`` (as ``WebhookNotifier``)
webhook    generic JSON webhook signed with HMAC-SHA256 (see :func:`sign`, :func:`verify`)
pagerduty  Events API v2: ``trigger`` on fire, ``resolve`` on recovery, one ``dedup_key`` per
           job and condition, so a re-fire joins the open incident
teams      Microsoft Teams incoming webhook / Workflows: an Adaptive Card (or legacy MessageCard)
email      SMTP (stdlib :mod:`smtplib`), STARTTLS or implicit TLS optional, login optional
========== =====================================================================================
"""

from __future__ import annotations

import abc
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from ...model.logs import get_logger
from ...model.redaction import redact, register_secret
from ..notify import LogNotifier
from .http import DeliveryError, send

if TYPE_CHECKING:
    from ..health import Alert

SIGNATURE_HEADER = "X-Cronwarden-Signature"  #: ``sha256=<hex HMAC of "<timestamp>.<body>">``
TIMESTAMP_HEADER = "X-Cronwarden-Timestamp"  #: Unix seconds when the request was signed
PAGERDUTY_EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"


def headline(alert: Alert) -> str:
    """``FIRING failing: billing-sync (owner team-data)``: subjects and card titles."""
    state = "FIRING" if alert.firing else "RECOVERED"
    if alert.extra.get("test"):
        state = "TEST"
    owner = alert.extra.get("owner")
    return f"{state} {alert.kind.value}: {alert.job}" + (f" (owner {owner})" if owner else "")


def escape_mrkdwn(text: str) -> str:
    """``text`` safe inside Slack mrkdwn (and Teams card text): ``&``, ``<``, ``>`` become
    ``&amp;``, ``&lt;``, ``&gt;``, so a job's error text cannot ping ``<!channel>`` nor disguise a
    link as ``<https://evil|docs>``. Slack decodes the three entities back when it renders."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


#: what a card's Markdown (a CommonMark subset) reads as markup: a link ``[text](url)``,
#: emphasis, code, strike-through; each is backslash-escaped (CommonMark's literal escape)
_CARD_MARKDOWN = str.maketrans({c: "\\" + c for c in "\\[]*_`~"})


def escape_card_markdown(text: str) -> str:
    """``text`` safe inside a Teams card (Markdown; a MessageCard also takes HTML): the
    entities of :func:`escape_mrkdwn`, then Markdown's link, emphasis and code marks escaped,
    so a job's error text cannot show a disguised link (``[re-authenticate](https://evil)``)
    nor shout in bold."""
    return escape_mrkdwn(text).translate(_CARD_MARKDOWN)


def _json(value: Any) -> bytes:
    return json.dumps(value, default=str, separators=(",", ":")).encode()


class Channel(abc.ABC):
    """A named destination for alerts."""

    type: ClassVar[str]

    def __init__(self, name: str, *, timeout: float = 10.0) -> None:
        self.name = name
        self.timeout = timeout
        self.failures = 0
        self.log = get_logger("alert")

    @abc.abstractmethod
    def deliver(self, alert: Alert) -> None:
        """Send ``alert``; raise :class:`DeliveryError` when it did not arrive."""

    def deliver_test(self, alert: Alert) -> None:
        """Send a test alert (``cronwarden notify test``); PagerDuty also resolves it."""
        self.deliver(alert)

    def notify(self, alert: Alert) -> None:
        try:
            self.deliver(alert)
        except Exception as exc:
            self.failures += 1
            self.log.error(
                "alert channel %s (%s) failed: %s",
                self.name,
                self.type,
                redact(str(exc)) if isinstance(exc, DeliveryError) else redact(repr(exc)),
                extra={
                    "event": "alert.delivery_failed",
                    "channel": self.name,
                    "channel_type": self.type,
                    "job": alert.job,
                    "alert": alert.kind.value,
                },
            )

    def describe(self) -> str:
        return f"{self.name} ({self.type})"


class LogChannel(Channel):
    """One structured log line per transition (wraps :class:`cronwarden.LogNotifier`)."""

    type = "log"

    def __init__(self, name: str = "log", logger: logging.Logger | None = None) -> None:
        super().__init__(name)
        self._notifier = LogNotifier(logger)

    def deliver(self, alert: Alert) -> None:
        self._notifier.notify(alert)


class SlackWebhook(Channel):
    """Slack-style incoming webhook (also Mattermost, Rocket.Chat, Google Chat's ``text``)."""

    type = "slack"

    def __init__(self, name: str, url: str, *, timeout: float = 10.0) -> None:
        super().__init__(name, timeout=timeout)
        register_secret(url)
        self.url = url

    def deliver(self, alert: Alert) -> None:
        # the text carries a job's error text, owner and tags: not ours, so never markup
        body = _json({"text": escape_mrkdwn(alert.text), "alert": alert.fields()})
        send(self.url, body, headers={"Content-Type": "application/json"}, timeout=self.timeout)


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The ``X-Cronwarden-Signature`` value: ``sha256=`` + hex HMAC-SHA256 of
    ``b"<timestamp>." + body`` keyed with ``secret`` (UTF-8)."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(
    secret: str,
    body: bytes,
    timestamp: str | None,
    signature: str | None,
    *,
    now: float | None = None,
    tolerance: float = 300.0,
) -> bool:
    """What a receiver checks: the signature matches and the timestamp is within
    ``tolerance`` seconds of ``now`` (replays of old requests are refused)."""
    if not timestamp or not signature or not timestamp.isdigit():
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, int(timestamp), body), signature)


class SignedWebhook(Channel):
    """Generic JSON webhook, signed: ``{"version": 1, "text", "headline", "alert": {…}}``
    with :data:`TIMESTAMP_HEADER` and :data:`SIGNATURE_HEADER` (see :func:`sign`)."""

    type = "webhook"

    def __init__(self, name: str, url: str, secret: str, *, timeout: float = 10.0) -> None:
        super().__init__(name, timeout=timeout)
        register_secret(url)
        register_secret(secret)
        self.url = url
        self.secret = secret

    def deliver(self, alert: Alert) -> None:
        body = _json(
            {
                "version": 1,
                "headline": headline(alert),
                "text": alert.text,
                "alert": alert.fields(),
            }
        )
        stamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            TIMESTAMP_HEADER: str(stamp),
            SIGNATURE_HEADER: sign(self.secret, stamp, body),
        }
        send(self.url, body, headers=headers, timeout=self.timeout)


_SEVERITY = {"skipping": "warning"}  # everything else that fires is an error
_DEDUP_MAX = 255  # PagerDuty refuses a longer dedup_key


def dedup_key(job: str, condition: str) -> str:
    """Stable per job and condition: a re-fire joins the open incident, a recovery resolves it.

    ``cronwarden/<job>/<condition>``; when that exceeds PagerDuty's 255 characters the job part
    is shortened and followed by a hash of the whole key, so it stays stable and distinct."""
    key = f"cronwarden/{job}/{condition}"
    if len(key) <= _DEDUP_MAX:
        return key
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    tail = f"~{digest}/{condition}"
    return f"cronwarden/{job}"[: _DEDUP_MAX - len(tail)] + tail


class PagerDuty(Channel):
    """PagerDuty Events API v2: trigger on fire, resolve on recovery, :func:`dedup_key`."""

    type = "pagerduty"

    def __init__(
        self,
        name: str,
        routing_key: str,
        *,
        url: str = PAGERDUTY_EVENTS_URL,
        source: str = "cronwarden",
        timeout: float = 10.0,
    ) -> None:
        super().__init__(name, timeout=timeout)
        register_secret(routing_key)
        self.routing_key = routing_key
        self.url = url
        self.source = source

    def event(self, alert: Alert, action: str | None = None) -> dict[str, Any]:
        """The Events v2 body for ``alert`` (``action`` overrides trigger/resolve)."""
        test = bool(alert.extra.get("test"))
        key = dedup_key(alert.job, "test" if test else alert.kind.value)
        action = action or ("trigger" if alert.firing else "resolve")
        body: dict[str, Any] = {
            "routing_key": self.routing_key,
            "event_action": action,
            "dedup_key": key,
        }
        if action == "trigger":
            body["payload"] = {
                "summary": f"{headline(alert)}: {alert.text}"[:1024],
                "source": self.source,
                "severity": "info" if test else _SEVERITY.get(alert.kind.value, "error"),
                "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "component": alert.job,
                "group": alert.extra.get("owner") or "unowned",
                "class": alert.kind.value,
                "custom_details": alert.fields(),
            }
        return body

    def deliver(self, alert: Alert) -> None:
        self._post(self.event(alert))

    def deliver_test(self, alert: Alert) -> None:
        """Trigger, then resolve at once: the test leaves no open incident behind."""
        self._post(self.event(alert, "trigger"))
        self._post(self.event(alert, "resolve"))

    def _post(self, body: dict[str, Any]) -> None:
        send(
            self.url,
            _json(body),
            headers={"Content-Type": "application/json"},
            timeout=self.timeout,
        )


class Teams(Channel):
    """Microsoft Teams: an Adaptive Card message (Workflows "post to a channel when a webhook
    request is received"), or ``card = "messagecard"`` for legacy Office 365 connectors."""

    type = "teams"
    CARDS = ("adaptive", "messagecard")

    def __init__(
        self, name: str, url: str, *, card: str = "adaptive", timeout: float = 10.0
    ) -> None:
        super().__init__(name, timeout=timeout)
        if card not in self.CARDS:
            raise ValueError(f"teams card must be one of {', '.join(self.CARDS)}")
        register_secret(url)
        self.url = url
        self.card = card

    def payload(self, alert: Alert) -> dict[str, Any]:
        """The card; every text and fact value is escaped (:func:`escape_card_markdown`): card
        text is Markdown (adaptive) or Markdown with HTML (messagecard), and none of it is ours."""
        facts = [
            (name, escape_card_markdown(str(value)))
            for name, value in (
                ("Job", alert.job),
                ("Condition", alert.kind.value),
                ("Owner", alert.extra.get("owner") or "none declared"),
                ("Tags", ", ".join(alert.extra.get("tags") or []) or "-"),
                ("First check", alert.first_check or "-"),
            )
        ]
        text = escape_card_markdown(alert.text)
        title = escape_card_markdown(headline(alert))
        color = "attention" if alert.firing else "good"
        if self.card == "messagecard":
            return {
                "@type": "MessageCard",
                "@context": "https://schema.org/extensions",
                "summary": headline(alert),  # plain text: shown in notifications only
                "themeColor": "D13438" if alert.firing else "2EB886",
                "title": title,
                "sections": [{"text": text, "facts": [{"name": n, "value": v} for n, v in facts]}],
            }
        card = {
            "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
            "type": "AdaptiveCard",
            "version": "1.4",
            "body": [
                {
                    "type": "TextBlock",
                    "text": title,
                    "weight": "Bolder",
                    "size": "Medium",
                    "color": color,
                    "wrap": True,
                },
                {"type": "TextBlock", "text": text, "wrap": True},
                {"type": "FactSet", "facts": [{"title": n, "value": v} for n, v in facts]},
            ],
        }
        return {
            "type": "message",
            "attachments": [
                {
                    "contentType": "application/vnd.microsoft.card.adaptive",
                    "contentUrl": None,
                    "content": card,
                }
            ],
        }

    def deliver(self, alert: Alert) -> None:
        body = _json(self.payload(alert))
        send(self.url, body, headers={"Content-Type": "application/json"}, timeout=self.timeout)


class Email(Channel):
    """E-mail over SMTP with :mod:`smtplib`. ``tls``: ``starttls`` (upgrade a plain connection,
    port 587), ``ssl`` (implicit TLS, port 465) or ``none`` (a local relay only). The server's
    certificate is verified against the system CAs, or ``ca_file`` (a private relay's CA)."""

    type = "email"
    TLS = ("starttls", "ssl", "none")

    def __init__(
        self,
        name: str,
        *,
        host: str,
        sender: str,
        recipients: Sequence[str],
        port: int | None = None,
        tls: str = "starttls",
        username: str | None = None,
        password: str | None = None,
        subject_prefix: str = "[cronwarden]",
        ca_file: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        super().__init__(name, timeout=timeout)
        if tls not in self.TLS:
            raise ValueError(f"email tls must be one of {', '.join(self.TLS)}")
        if not recipients:
            raise ValueError("email needs at least one recipient")
        register_secret(password)
        self.host = host
        self.port = port or {"starttls": 587, "ssl": 465, "none": 25}[tls]
        self.tls = tls
        self.sender = sender
        self.recipients = list(recipients)
        self.username = username
        self.password = password
        self.subject_prefix = subject_prefix
        self.ca_file = ca_file

    def message(self, alert: Alert, now: datetime | None = None) -> Any:
        """The e-mail for ``alert``: ``text/plain`` (UTF-8), with ``Date``, a
        :meth:`message_id` and ``References`` (one thread per job and condition), and
        ``Auto-Submitted: auto-generated`` (RFC 3834: no auto-replies, no vacation notices)."""
        from email.message import EmailMessage
        from email.utils import format_datetime

        msg = EmailMessage()
        msg["Subject"] = f"{self.subject_prefix} {headline(alert)}".strip()
        msg["From"] = self.sender
        msg["To"] = ", ".join(self.recipients)
        msg["Date"] = format_datetime(now or datetime.now(UTC))
        msg["Message-ID"] = self.message_id(alert)
        thread = self._thread_id(alert)
        if thread != msg["Message-ID"]:
            msg["References"] = thread
            msg["In-Reply-To"] = thread
        msg["Auto-Submitted"] = "auto-generated"
        msg["X-Auto-Response-Suppress"] = "All"  # Exchange's spelling of the same
        details = "\n".join(f"{k}: {v}" for k, v in alert.fields().items() if v not in (None, []))
        msg.set_content(f"{alert.text}\n\n{details}\n", subtype="plain", charset="utf-8")
        return msg

    def message_id(self, alert: Alert) -> str:
        """Stable per alert transition: the same job, condition, state and fields (last
        success, next expected run, the condition's details) give the same ``Message-ID``, so
        a transition sent twice is recognisably one message; another transition differs in at
        least its state, last success or next expected run, and gets a new one (a client that
        drops duplicate ids must never drop a real alert). A test alert's identity includes
        its text, which names the moment it was sent."""
        identity: dict[str, Any] = {**alert.fields(), "job": alert.job}
        if alert.extra.get("test"):
            identity["text"] = alert.text
        blob = json.dumps(identity, sort_keys=True, default=str)
        digest = hashlib.sha256(blob.encode()).hexdigest()[:32]
        return f"<{digest}.cronwarden@{self._domain()}>"

    def _thread_id(self, alert: Alert) -> str:
        """One ``References`` root per job and condition: a fire and its recovery thread."""
        digest = hashlib.sha256(f"{alert.job}\x1f{alert.kind.value}".encode()).hexdigest()[:32]
        return f"<thread.{digest}.cronwarden@{self._domain()}>"

    def _domain(self) -> str:
        from email.utils import parseaddr

        domain = parseaddr(self.sender)[1].rpartition("@")[2].strip()
        return domain or "cronwarden.invalid"

    def deliver(self, alert: Alert) -> None:
        import smtplib
        import ssl

        context = ssl.create_default_context(cafile=self.ca_file)
        try:
            if self.tls == "ssl":
                client: smtplib.SMTP = smtplib.SMTP_SSL(
                    self.host, self.port, timeout=self.timeout, context=context
                )
            else:
                client = smtplib.SMTP(self.host, self.port, timeout=self.timeout)
            with client:
                if self.tls == "starttls":
                    client.starttls(context=context)
                if self.username:
                    client.login(self.username, self.password or "")
                refused = client.send_message(self.message(alert))
        except (smtplib.SMTPException, OSError) as exc:
            raise DeliveryError(redact(f"SMTP {self.host}:{self.port}: {exc}")) from None
        if refused:
            raise DeliveryError(f"SMTP refused recipient(s): {', '.join(sorted(refused))}")
