"""``cronwarden doctor``: a live preflight against the configured provider.

Each check returns :class:`Check` lines: ``ok``, ``FAIL`` (with the fix) or ``n/a`` (the
provider offers no way to check it from here: said plainly, never counted as ok or failed).
Checks, in order:

1. *store*: a reserved record (``status/_doctor``) is written, read back and deleted;
2. *queue*: a probe message (attribute ``cw-probe``, not a run request) is published; a running
   worker acknowledges it and records it in ``status/_doctor`` (:mod:`cronwarden.watch.probe`). When
   no worker answers within ``worker_wait``, doctor receives it itself on pull queues: any other
   message it receives meanwhile is put back at once (its delivery count rises by one on every
   broker: that is the cost of looking) and never run;
3. *dead letters*: the dead-letter queue exists and the broker's delivery limit is not below
   any job's ``retry.max_attempts`` (else the broker dead-letters before cronwarden's budget);
4. *schedules*: where the provider has an API for it; else ``n/a`` with what to run instead;
5. *watcher*: its heartbeat record is recent and its last check succeeded;
6. *notifiers*: every channel answers a dry run (nothing is posted to a human).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..jobs.definitions import JobSet
from ..model.ports import Create, Delete, Provider, Queue, Store
from ..model.records import iso
from ..model.redaction import redact
from ..watch.probe import PROBE_ATTRIBUTE, doctor_key, probe_body, probe_token

if TYPE_CHECKING:
    from ..watch.alerting.channels import Channel
    from ..watch.alerting.settings import AlertingSettings


@dataclass(frozen=True)
class Check:
    """One line of the report. ``ok``: True passed, False failed, None cannot be checked."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""

    def line(self) -> str:
        mark = {True: "ok  ", False: "FAIL", None: "n/a "}[self.ok]
        text = f"{mark}  {self.name}: {self.detail}"
        return text + (f"\n        fix: {self.fix}" if self.ok is False and self.fix else "")


@dataclass(frozen=True)
class DeadLetterPolicy:
    """What a broker says about its dead-letter set-up (adapters' ``dead_letter_policy()``)."""

    exists: bool  #: the dead-letter destination exists and is attached
    max_deliveries: int | None  #: deliveries before the broker dead-letters (None: unknown)
    where: str  #: the resource, for the report


_STORE_FIX = {
    "gcp": "grant the runtime identity roles/datastore.user on the Firestore database",
    "azure": "grant the runtime identity 'Storage Table Data Contributor' on the table "
    "(or use a SAS / connection string with write permission)",
    "local": "make the SQLite file and its directory writable by this user",
    "postgres": "GRANT SELECT, INSERT, UPDATE, DELETE on cronwarden's tables to the role",
    "aws": "allow dynamodb:GetItem, Query, PutItem, UpdateItem, DeleteItem and "
    "TransactWriteItems on the table (and its by-kind index) to the runtime role",
}
_QUEUE_FIX = {
    "gcp": "check the topic and subscription names (CRONWARDEN_PUBSUB_*) and grant "
    "roles/pubsub.publisher on the topic and roles/pubsub.subscriber on the subscription",
    "azure": "check the queue name and grant 'Azure Service Bus Data Sender' and "
    "'Data Receiver' on it",
    "local": "check CRONWARDEN_LOCAL_PATH: the queue is '<path>-queue'",
    "aws": "check CRONWARDEN_SQS_QUEUE(_URL) and allow sqs:SendMessage, ReceiveMessage, "
    "DeleteMessage, ChangeMessageVisibility and GetQueueAttributes on both queues",
}
_SCHEDULE_NA = {
    "gcp": "cannot check from here: cronwarden does not call the Cloud Scheduler API (and it "
    "has no emulator); run `gcloud scheduler jobs describe` for each job and check "
    "state ENABLED",
    "azure": "cannot check from here: timer triggers and AzureWebJobs.<function>.Disabled "
    "are ARM settings; run `az functionapp config appsettings list` and check no "
    "*.Disabled is true",
    "postgres": "cannot check from here: the scheduler is whatever runs `cronwarden run` "
    "or the trigger",
}


def _error(exc: BaseException) -> str:
    return redact(f"{type(exc).__name__}: {exc}")[:300]


class Doctor:
    """Runs the checks against ``provider`` for ``jobs``. ``alerting``: the channels to
    dry-run (None: notifier check skipped). Never runs a job and never touches a job's
    records."""

    def __init__(
        self,
        jobs: JobSet,
        provider: Provider,
        *,
        alerting: AlertingSettings | None = None,
        watcher_max_age: timedelta = timedelta(minutes=15),
        probe_timeout: float = 60.0,
        worker_wait: float = 5.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.jobs = jobs
        self.provider = provider
        self.kind = str(getattr(provider, "name", "") or type(provider).__name__).lower()
        self.alerting = alerting
        self.watcher_max_age = watcher_max_age
        self.probe_timeout = probe_timeout
        self.worker_wait = worker_wait
        self.clock = clock

    def run(self) -> list[Check]:
        checks: list[Check] = []
        for step in (
            self.check_store,
            self.check_queue,
            self.check_dead_letters,
            self.check_schedules,
            self.check_watcher,
            self.check_notifiers,
        ):
            try:
                checks += step()
            except Exception as exc:  # a check's own failure is a failed check, never a crash
                checks.append(Check(step.__name__.removeprefix("check_"), False, _error(exc)))
        return checks

    # -- 1. store ---------------------------------------------------------------------------
    def check_store(self) -> list[Check]:
        fix = _STORE_FIX.get(self.kind, "grant the runtime identity read and write on the store")
        try:
            store: Store = self.provider.store()
            token = secrets.token_hex(8)
            key = doctor_key()
            existing = store.get(key)
            if existing is not None:
                store.commit([Delete(key, existing.version)])
            store.commit([Create(key, {"token": token, "at": iso(self.clock())})])
            back = store.get(key)
            if back is not None:
                store.commit([Delete(key, back.version)])
        except Exception as exc:
            return [Check("store", False, f"read/write failed: {_error(exc)}", fix)]
        if back is None or back.data.get("token") != token:
            return [Check("store", False, "a record written could not be read back", fix)]
        return [Check("store", True, "read, write and delete of a reserved record")]

    # -- 2. queue round trip ----------------------------------------------------------------
    def check_queue(self) -> list[Check]:
        fix = _QUEUE_FIX.get(self.kind, "check the queue name and the identity's rights")
        queue: Queue = self.provider.queue()
        store = self.provider.store()
        token = secrets.token_hex(8)
        try:
            queue.publish(probe_body(token), attributes={PROBE_ATTRIBUTE: token})
        except Exception as exc:
            return [Check("queue", False, f"cannot publish: {_error(exc)}", fix)]
        started = time.monotonic()
        deadline = started + self.probe_timeout
        put_back = 0
        pull = not getattr(queue, "push_endpoint", None)
        while time.monotonic() < deadline:
            seen = self._worker_saw(store, token)
            if seen is not None:
                return [Check("queue", True, f"probe published, received and settled by {seen}")]
            if not pull or time.monotonic() - started < self.worker_wait:
                time.sleep(0.2)  # polling the store for a worker's answer, with a deadline
                continue
            try:
                deliveries = queue.receive(10, visibility=30.0, wait=1.0)
            except Exception as exc:
                return [Check("queue", False, f"cannot receive: {_error(exc)}", fix)]
            found = False
            for delivery in deliveries:
                if probe_token(delivery) is not None:
                    queue.ack(delivery)  # ours, or a stale probe of an earlier doctor
                    found = found or probe_token(delivery) == token
                else:
                    _put_back(queue, delivery)
                    put_back += 1
            if found:
                note = f"; {put_back} other message(s) put back unrun" if put_back else ""
                return [
                    Check(
                        "queue",
                        True,
                        "probe published, received and settled by doctor itself: no worker "
                        f"answered within {self.worker_wait:g}s (is one consuming this "
                        f"queue?){note}",
                    )
                ]
        return [
            Check(
                "queue",
                False,
                f"probe published but never received within {self.probe_timeout:g}s "
                "(wrong queue or subscription, or no worker consuming it)",
                fix,
            )
        ]

    @staticmethod
    def _worker_saw(store: Store, token: str) -> str | None:
        record = store.get(doctor_key())
        if record is None or record.data.get("probe_seen_token") != token:
            return None
        store.commit([Delete(doctor_key(), record.version)])
        return f"worker {record.data.get('probe_seen_by') or '?'}"

    # -- 3. dead letters --------------------------------------------------------------------
    def check_dead_letters(self) -> list[Check]:
        queue = self.provider.queue()
        reader = getattr(queue, "dead_letter_policy", None)
        if callable(reader):
            policy: DeadLetterPolicy = reader()
            if not policy.exists:
                return [
                    Check(
                        "dead-letter queue",
                        False,
                        f"missing: {policy.where}",
                        "attach a dead-letter policy (the deployment does; for development "
                        "create_missing=True aligns it)",
                    )
                ]
            limit, source = policy.max_deliveries, f"broker setting of {policy.where}"
        else:
            try:
                queue.dlq_depth()
            except Exception as exc:
                return [Check("dead-letter queue", False, f"unreachable: {_error(exc)}")]
            limit = queue.capabilities.max_deliveries
            source = "configured max_deliveries (the broker's own setting cannot be read here)"
        checks = [Check("dead-letter queue", True, f"exists ({source})")]
        if limit is None:
            return [*checks, Check("delivery limit", None, "the broker does not say")]
        for job in self.jobs:
            budget = job.retry.max_attempts
            if limit < budget:
                checks.append(
                    Check(
                        f"delivery limit for {job.name}",
                        False,
                        f"the broker dead-letters after {limit} deliveries but {job.name} "
                        f"allows {budget} attempts",
                        f"raise the queue's delivery limit to at least {budget} "
                        f"or lower Retry(max_attempts) to {limit}",
                    )
                )
        if len(checks) == 1:
            checks.append(
                Check("delivery limit", True, f"{limit} >= every job's retry.max_attempts")
            )
        return checks

    # -- 4. schedules -----------------------------------------------------------------------
    def check_schedules(self) -> list[Check]:
        reader = getattr(self.provider, "schedule_state", None)
        if callable(reader):
            out = []
            for job in self.jobs:
                ok, detail = reader(job)
                out.append(Check(f"schedule of {job.name}", ok, detail, "enable or create it"))
            return out
        if self.kind == "local":
            return [Check("schedules", True, "in-process: `cronwarden run` fires every job")]
        text = _SCHEDULE_NA.get(self.kind, f"cannot check from here on provider {self.kind}")
        return [Check("schedules", None, text)]

    # -- 5. watcher -------------------------------------------------------------------------
    def check_watcher(self) -> list[Check]:
        from ..watch.alerting.watchdog import read_watcher_heartbeat

        fix = "run the watcher (`cronwarden run`, the watcher function, or `cronwarden check`)"
        beat = read_watcher_heartbeat(self.provider.store())
        now = self.clock()
        if beat is None:
            return [Check("watcher", False, "no watcher heartbeat recorded yet", fix)]
        if beat.stale(now, self.watcher_max_age):
            return [Check("watcher", False, beat.describe(now) + " (too long ago)", fix)]
        if not beat.ok:
            return [Check("watcher", False, beat.describe(now), "see the error above")]
        return [Check("watcher", True, beat.describe(now))]

    # -- 6. notifiers -----------------------------------------------------------------------
    def check_notifiers(self) -> list[Check]:
        if self.alerting is None:
            return [Check("notifiers", None, "no alerting settings given")]
        channels = self.alerting.channels
        out: list[Check] = []
        if not channels:
            out.append(
                Check(
                    "notifiers",
                    False,
                    f"no channel configured ({self.alerting.source}): only the log would "
                    "see an alert",
                    "configure a channel (CRONWARDEN_ALERTING_CONFIG or CRONWARDEN_WEBHOOK_URL)",
                )
            )
        for channel in channels:
            out.append(dry_run(channel))
        if self.alerting.heartbeat is not None:
            out.append(_http_answers("heartbeat", self.alerting.heartbeat.url, "HEAD"))
        return out


def _put_back(queue: Queue, delivery: Any) -> None:
    abandon = getattr(queue, "abandon", None)  # Service Bus: back as it was (count + 1)
    if callable(abandon):
        abandon(delivery)
    else:
        queue.retry(delivery, 0.0)


_REVOKED = {401, 403, 404, 410}


def _http_answers(name: str, url: str, method: str, body: bytes | None = None) -> Check:
    """Does ``url`` answer? Any HTTP reply but a redirect (alerts do not follow one) or
    401/403/404/410 counts (a dry run is not a valid message, so 400 or 405 is the expected
    answer of a live endpoint)."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(  # noqa: S310 - the user configures the scheme
        url,
        data=body,
        method=method,
        headers={"User-Agent": "cronwarden-doctor", "Content-Type": "application/json"},
    )
    from ..watch.alerting.http import opener

    try:
        with opener().open(request, timeout=10) as reply:
            code = int(reply.status)
    except urllib.error.HTTPError as exc:
        code = exc.code
    except (OSError, ValueError) as exc:
        return Check(name, False, f"does not answer: {_error(exc)}", "check the URL / network")
    if 300 <= code < 400:
        return Check(
            name,
            False,
            f"answers HTTP {code}: a redirect, which alerts do not follow",
            "configure the URL it redirects to",
        )
    if code in _REVOKED:
        return Check(name, False, f"answers HTTP {code}", "the URL or key was revoked: renew it")
    return Check(name, True, f"answers (HTTP {code}) to a dry run; nothing was posted")


def dry_run(channel: Channel) -> Check:
    """Ask ``channel``'s endpoint whether it is there, without delivering an alert."""
    name = f"notifier {channel.name} ({channel.type})"
    if channel.type == "email":
        return _smtp_dry_run(name, channel)
    url = getattr(channel, "url", None)
    if not isinstance(url, str):
        return Check(name, True, "local (no endpoint)")
    if channel.type == "slack":  # an empty POST: Slack answers 400 no_text, nothing is posted
        return _http_answers(name, url, "POST", b"{}")
    return _http_answers(name, url, "HEAD")


def _smtp_dry_run(name: str, channel: Any) -> Check:
    import smtplib
    import ssl

    context = ssl.create_default_context(cafile=channel.ca_file)
    try:
        if channel.tls == "ssl":
            client: smtplib.SMTP = smtplib.SMTP_SSL(
                channel.host, channel.port, timeout=channel.timeout, context=context
            )
        else:
            client = smtplib.SMTP(channel.host, channel.port, timeout=channel.timeout)
        with client:
            client.ehlo()
            if channel.tls == "starttls":
                client.starttls(context=context)
            if channel.username:
                client.login(channel.username, channel.password or "")
            client.noop()
    except (smtplib.SMTPException, OSError) as exc:
        return Check(
            name,
            False,
            f"SMTP {channel.host}:{channel.port}: {_error(exc)}",
            "check the relay's host, port, TLS mode and credentials",
        )
    return Check(name, True, "SMTP connect, EHLO, login, NOOP, QUIT (no message sent)")


def failed(checks: Iterable[Check]) -> list[Check]:
    return [c for c in checks if c.ok is False]


__all__ = ["Check", "DeadLetterPolicy", "Doctor", "dry_run", "failed"]
