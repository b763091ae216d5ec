"""What a deployment needs to know about the jobs, derived once from the job definitions.

:func:`plan` turns a :class:`~cronwarden.jobs.JobSet` into :class:`JobSpec` rows (plain numbers
and strings, ready for Terraform) and refuses, with one clear sentence, what a cloud cannot run:

* every cron must be expressible in Cloud Scheduler's and NCRONTAB's dialect (no ``L``, ``W``,
  ``#``, ``?``); for Azure it must also translate to one UTC NCRONTAB expression
  (:func:`~cronwarden.adapters.azure.ncrontab.utc_ncrontab`);
* GCP: the worker is pushed each run request by a Pub/Sub push subscription, whose ack
  deadline (at most 600 s) bounds the delivery and cannot be extended, so a job's max runtime
  plus the margin must fit in it (``GCP_PUSH_MAX_RUNTIME``, 570 s); longer jobs need the
  pull worker (``--gcp-worker pull``: ``python -m cronwarden.adapters.gcp.serve`` on a
  long-running host, whose deliveries are kept invisible for the whole lease);
* Azure: the function app runs on a dedicated plan with Always On (the consumption and Elastic
  Premium plans need a key-based content share, and cronwarden renders no secret), so runs are
  not cut at 10 minutes; Service Bus locks are renewed past their 5-minute maximum.

Values a cloud clamps are reported as notes (e.g. Pub/Sub needs 5..100 delivery attempts: a job
with fewer attempts still gets its own bound from the engine, which counts attempts in the run
record and dead-letters the request itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from cronwarden.adapters.azure.ncrontab import check_portable
from cronwarden.adapters.azure.settings import SCHEDULE_ENV_PREFIX
from cronwarden.jobs.definitions import JobSet
from cronwarden.model.durations import DurationLike, parse_duration
from cronwarden.model.errors import InvalidJobDefinition

from . import renderers
from ._moved import moved_names

PROVIDERS = renderers.builtin_names()  #: deprecated: renderers.names() adds registered clouds
GCP_WORKERS = ("push", "pull")  #: how the GCP worker receives run requests
MARGIN_SECONDS = 30  #: added to the longest max runtime for ack deadlines and host timeouts
AZURE_SKU = "B1"  #: default dedicated plan (Always On keeps timers firing)
_MOVED = {  #: deprecated names: the clouds' limits live with their renderers
    "PUBSUB_MIN_ATTEMPTS": "cronwarden.adapters.gcp.deploy",
    "PUBSUB_MAX_ATTEMPTS": "cronwarden.adapters.gcp.deploy",
    "PUBSUB_MAX_BACKOFF": "cronwarden.adapters.gcp.deploy",
    "PUBSUB_MAX_ACK_DEADLINE": "cronwarden.adapters.gcp.deploy",
    "GCP_PUSH_MAX_RUNTIME": "cronwarden.adapters.gcp.deploy",
    "SERVICEBUS_MAX_LOCK_SECONDS": "cronwarden.adapters.azure.deploy",
}

__getattr__ = moved_names(__name__, _MOVED)


def schedule_setting(job_name: str) -> str:
    """The Azure app setting holding a job's NCRONTAB schedule: ``CRONWARDEN_SCHEDULE_<NAME>``."""
    return SCHEDULE_ENV_PREFIX + job_name.upper().replace("-", "_")


@dataclass(frozen=True)
class JobSpec:
    """One job as the deployment sees it (seconds and strings only)."""

    name: str
    cron: str
    time_zone: str
    ncrontab_utc: str
    max_runtime_seconds: int
    max_attempts: int
    min_backoff_seconds: int
    max_backoff_seconds: int
    schedule_setting: str
    description: str = ""

    def terraform(self) -> dict[str, str | int]:
        """The object the ``common/settings`` module's ``jobs`` variable expects."""
        return {
            "cron": self.cron,
            "time_zone": self.time_zone,
            "ncrontab_utc": self.ncrontab_utc,
            "max_runtime_seconds": self.max_runtime_seconds,
            "max_attempts": self.max_attempts,
            "min_backoff_seconds": self.min_backoff_seconds,
            "max_backoff_seconds": self.max_backoff_seconds,
            "schedule_setting": self.schedule_setting,
        }


@dataclass(frozen=True)
class Plan:
    """The jobs plus what the clouds make of them (``notes``: clamps a user should know)."""

    jobs: tuple[JobSpec, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def longest_runtime(self) -> int:
        return max(j.max_runtime_seconds for j in self.jobs)

    @property
    def most_attempts(self) -> int:
        return max(j.max_attempts for j in self.jobs)

    def host_timeout(self) -> str:
        """``functionTimeout`` for host.json: the longest max runtime plus the margin."""
        total = self.longest_runtime + MARGIN_SECONDS
        hours, rest = divmod(total, 3600)
        return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def _seconds(value: DurationLike | None, what: str) -> int:
    delta = value if isinstance(value, timedelta) else parse_duration(value or 0, field=what)
    return max(0, int(delta.total_seconds()))


def plan(
    jobs: JobSet,
    providers: tuple[str, ...] | list[str],
    *,
    jobs_on: str | None = None,
    gcp_worker: str = "push",
) -> Plan:
    """The :class:`Plan` for deploying ``jobs`` with the given providers (jobs and watcher).

    ``jobs_on`` is the provider that runs the jobs (default: the first of ``providers``); its
    runtime limits and clamps apply, not those of a cloud that only hosts the watcher.
    ``gcp_worker`` is ``push`` (a Cloud Function, at most
    ``cronwarden.adapters.gcp.deploy.GCP_PUSH_MAX_RUNTIME`` per run) or ``pull`` (the pull
    worker: no such bound). Each cloud's limits and clamps are its renderer's ``check_job``.
    Raises :class:`InvalidJobDefinition` naming the job when a cloud cannot run it.
    """
    if not len(jobs):
        raise InvalidJobDefinition("the job module defines no jobs")
    known = renderers.names()
    unknown = [p for p in providers if p not in known]
    if unknown:
        raise InvalidJobDefinition(f"unknown provider {unknown[0]!r}; choose {renderers.choices()}")
    runs_on = jobs_on or (providers[0] if providers else "")
    if runs_on not in known:
        raise InvalidJobDefinition(f"unknown provider {runs_on!r}; choose {renderers.choices()}")
    if gcp_worker not in GCP_WORKERS:
        raise InvalidJobDefinition(f"unknown GCP worker {gcp_worker!r}; choose push or pull")
    clouds = [renderers.get(p) for p in dict.fromkeys([runs_on, *providers])]
    timers = [cloud.timer_schedule for cloud in clouds if cloud.timer_schedule is not None]
    specs: list[JobSpec] = []
    notes: list[str] = []
    for job in jobs:
        cron, tz = job.schedule.cron, job.schedule.timezone
        try:
            if timers:  # a cloud with timers of its own (Azure: one NCRONTAB in UTC)
                ncron = timers[0](cron, tz)
            else:
                check_portable(cron)
                ncron = ""
        except InvalidJobDefinition as exc:
            raise InvalidJobDefinition(f"job {job.name!r}: {exc}") from None
        if clouds[0].check_schedule is not None:  # refused now, not after the old render is gone
            try:
                clouds[0].check_schedule(job.name, cron, tz)
            except InvalidJobDefinition as exc:
                text = str(exc)
                named = text if text.startswith("job ") else f"job {job.name!r}: {text}"
                raise InvalidJobDefinition(named) from None
        limits = _limits(job.name, job.max_runtime, job.retry, gcp_worker)
        notes += clouds[0].check_job(limits)  # the jobs' cloud: its limits and clamps
        runtime, attempts = limits.runtime, limits.attempts
        lo, hi = limits.min_backoff, limits.max_backoff
        specs.append(
            JobSpec(
                name=job.name,
                cron=cron,
                time_zone=tz,
                ncrontab_utc=ncron,
                max_runtime_seconds=runtime,
                max_attempts=attempts,
                min_backoff_seconds=lo,
                max_backoff_seconds=hi,
                schedule_setting=schedule_setting(job.name),
                description=job.description,
            )
        )
    plan_made = Plan(tuple(specs), tuple(notes))
    _check_consumers(jobs, clouds[0], plan_made, gcp_worker)
    return plan_made


def _limits(name: str, runtime: DurationLike, retry: Any, worker: str) -> renderers.JobLimits:
    """The bounds of job (or consumer) ``name`` as a cloud's ``check_job`` sees them."""
    return renderers.JobLimits(
        name=name,
        runtime=_seconds(runtime, f"{name}: max_runtime"),
        attempts=retry.max_attempts,
        min_backoff=_seconds(retry.min_backoff, f"{name}: retry.min_backoff"),
        max_backoff=_seconds(retry.max_backoff, f"{name}: retry.max_backoff"),
        worker=worker,
    )


def _check_consumers(jobs: JobSet, cloud: Any, made: Plan, gcp_worker: str) -> None:
    """Refuse event consumers the deployment would cut short: the worker, its queue's
    visibility or ack deadline and its delivery count are sized from the scheduled jobs, so a
    consumer needing a longer run or more attempts would be stopped (or dead-lettered) early
    without a word. Each consumer also meets the jobs' cloud's limits (``check_job``)."""
    for name in sorted(jobs.consumers):
        declared = jobs.consumers[name]
        limits = _limits(name, declared.max_runtime, declared.retry, gcp_worker)
        cloud.check_job(limits)
        if limits.runtime > made.longest_runtime or limits.attempts > made.most_attempts:
            raise InvalidJobDefinition(
                f"consumer {name!r}: max_runtime {limits.runtime}s and "
                f"retry.max_attempts {limits.attempts} exceed what this deployment sizes its "
                f"worker and queue for ({made.longest_runtime}s, {made.most_attempts} "
                "attempts: the scheduled jobs' largest); its runs would be cut short. Lower "
                "them, or raise a scheduled job's to at least as much"
            )


__all__ = [
    "GCP_WORKERS",
    "PROVIDERS",
    "JobSpec",
    "Plan",
    "plan",
    "schedule_setting",
]
