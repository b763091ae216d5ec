"""Alerting and metrics cost nothing until used: no HTTP, SMTP or OpenTelemetry module is
imported by ``import cronwarden``, by building a watcher, or by loading alerting settings."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("urllib.request", "smtplib", "opentelemetry", "prometheus_client", "http.client")


def test_watcher_and_settings_import_no_transport_or_telemetry() -> None:
    code = f"""
import sys
import cronwarden
from cronwarden.watch.alerting.settings import load_settings
settings = load_settings(env={{"CRONWARDEN_WEBHOOK_URL": "https://hooks.example.test/x"}})
watcher = cronwarden.Watcher(cronwarden.JobSet(), store=None, notifiers=[settings.router()])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {{h.split(".")[0] for h in {HEAVY!r}}}
                and any(m == h or m.startswith(h + ".") for h in {HEAVY!r}))
print(",".join(loaded))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "", result.stdout
