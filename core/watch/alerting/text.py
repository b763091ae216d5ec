"""Alert text pieces shared by the watcher and every channel.

Times are shown in UTC first (sortable, what the logs say) and, when the job runs in another
timezone, in that timezone too: ``2026-01-20 01:00 UTC (2026-01-20 02:00 CET, Europe/Berlin)``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    from ...jobs.definitions import Job

OWNER = "owner"
TAGS = "tags"
DESCRIPTION = "description"
TIMEZONE = "timezone"


def format_instant(when: datetime | None, tz: ZoneInfo | str | None = None) -> str:
    """``when`` in UTC, followed by the local time in ``tz`` unless that is UTC; ``never``."""
    if when is None:
        return "never"
    utc_text = when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    zone = ZoneInfo(tz) if isinstance(tz, str) else tz
    if zone is None or zone.key in ("UTC", "Etc/UTC"):
        return utc_text
    local = when.astimezone(zone)
    return f"{utc_text} ({local.strftime('%Y-%m-%d %H:%M %Z')}, {zone.key})"


def job_fields(job: Job) -> dict[str, Any]:
    """The job's owner, tags, description and timezone as alert fields (routing reads them)."""
    return {
        OWNER: job.owner or None,
        TAGS: list(job.tags),
        DESCRIPTION: job.description or None,
        TIMEZONE: job.schedule.timezone,
    }


def job_suffix(job: Job) -> str:
    """`` Owner: team-data; tags: billing, eu; job: Nightly invoice export.`` ('' when none)."""
    parts = []
    parts.append(f"Owner: {job.owner}" if job.owner else "Owner: none declared")
    if job.tags:
        parts.append(f"tags: {', '.join(job.tags)}")
    if job.description:
        parts.append(f"job: {job.description.rstrip('.')}")
    return " " + "; ".join(parts) + "."
