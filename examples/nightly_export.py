"""Nightly export: build a per-customer report and "email" it, once per customer per night.

The seed case: a nightly job sent duplicate emails whenever the platform retried it. Here every
customer is an item of the ledger, so a retry after a crash resumes with the customers not yet
sent, and the mail sink receives each send with a stable idempotency key.

Run it:  cronwarden run --jobs examples/nightly_export.py --once
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import cronwarden

CUSTOMERS = [
    {"id": f"cust-{n:03d}", "email": f"owner{n}@example.com", "orders": n * 3 % 17}
    for n in range(1, 26)
]


class MailSink:
    """A fake mail provider that records every send (and honours idempotency keys)."""

    def __init__(self, path: str | None = None) -> None:
        default = Path(os.environ.get("CRONWARDEN_LOCAL_PATH", ".cronwarden/state.db")).parent
        self.path = path or os.environ.get("EXAMPLE_MAIL_SINK") or str(default / "mail.db")
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(self.path) as db:
            db.execute("CREATE TABLE IF NOT EXISTS sent (idem TEXT, recipient TEXT, body TEXT)")

    def send(self, recipient: str, body: str, *, idempotency_key: str) -> bool:
        """Send unless this idempotency key was already accepted; True if sent now."""
        with sqlite3.connect(self.path) as db:
            if db.execute("SELECT 1 FROM sent WHERE idem = ?", (idempotency_key,)).fetchone():
                return False
            db.execute("INSERT INTO sent VALUES (?, ?, ?)", (idempotency_key, recipient, body))
            return True


@cronwarden.job(
    "nightly-export",
    cron="0 2 * * *",
    timezone="Europe/Berlin",
    max_runtime="15m",
    overlap="skip",
    retry=cronwarden.Retry(max_attempts=5, min_backoff="30s", max_backoff="10m"),
    catch_up=cronwarden.CatchUp.oldest_first(within="3d"),
    liveness=cronwarden.Liveness(failure_threshold=2),
)
def nightly_export(ctx: cronwarden.RunContext) -> None:
    """Email each customer the report of the night's window."""
    mail = MailSink()
    sent = 0
    for item in ctx.items(CUSTOMERS, key="id"):
        report = {
            "customer": item.key,
            "window": ctx.window.isoformat(),
            "orders": item.value["orders"],
        }
        if mail.send(item.value["email"], json.dumps(report), idempotency_key=item.idempotency_key):
            sent += 1
    ctx.count("emails_sent", sent)
    ctx.log.info("sent %d report(s) for %s", sent, ctx.window.date())
