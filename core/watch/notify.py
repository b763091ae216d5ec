"""Where alerts go: a structured log line, a webhook, or anything with ``notify(alert)``."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Protocol

from ..model.logs import get_logger
from ..model.redaction import redact, register_secret

if TYPE_CHECKING:
    from .health import Alert


class Notifier(Protocol):
    """Receives alert transitions (fired and recovered). Must not raise."""

    def notify(self, alert: Alert) -> None: ...


class LogNotifier:
    """One JSON log line per transition: ``alert.fired`` (error) / ``alert.recovered`` (info)."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or get_logger("alert")

    def notify(self, alert: Alert) -> None:
        self.logger.log(
            logging.ERROR if alert.firing else logging.INFO,
            alert.text,
            extra={"event": "alert.fired" if alert.firing else "alert.recovered", **alert.fields()},
        )


class WebhookNotifier:
    """POSTs ``{"text": ..., "alert": {...}}`` as JSON (Slack-compatible ``text``).

    The URL is treated as a secret (Slack/Teams webhook URLs are credentials) and never logged.
    Delivery failures are logged and swallowed: a broken webhook must not stop the watcher.
    """

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        if not url.startswith(("https://", "http://")):
            raise ValueError("webhook URL must start with https:// or http://")
        register_secret(url)
        self.url = url
        self.timeout = timeout
        self.failures = 0

    def notify(self, alert: Alert) -> None:
        from .alerting.http import send  # only when a webhook fires: keeps cold starts light

        body = json.dumps({"text": alert.text, "alert": alert.fields()}).encode()
        try:
            send(
                self.url,
                body,
                headers={"Content-Type": "application/json"},
                timeout=self.timeout,
            )
        except Exception as exc:
            self.failures += 1
            get_logger("alert").error(
                "webhook delivery failed: %s",
                redact(f"{type(exc).__name__}: {exc}"),
                extra={"event": "alert.webhook_failed", "alert": alert.kind, "job": alert.job},
            )
