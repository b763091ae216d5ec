"""Alerting that reaches a human: notifier channels, routing by owner or tag, settings with
secrets by reference, and watching the watcher (a dead-man's switch, per-job pings, the
watcher's own heartbeat in the store).

Everything here is standard library; HTTP goes through :mod:`urllib.request`, imported only
when something is sent, so ``import cronwarden`` stays light. Modules:

* :mod:`.text`      times in the job's timezone and UTC; owner, tags and description on alerts
* :mod:`.secrets`   ``env:NAME`` / ``file:/path`` references, registered for redaction
* :mod:`.channels`  log, Slack-style webhook, HMAC-signed webhook, PagerDuty, Teams, e-mail
* :mod:`.routing`   which channels an alert goes to (owner / tag filters)
* :mod:`.settings`  one TOML file or the environment → router and watcher hooks
* :mod:`.watchdog`  watcher heartbeat record, dead-man's-switch pings, per-job pings
"""
