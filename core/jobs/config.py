"""Choosing a provider by configuration, and loading job modules (see :mod:`.loading`), with
:func:`load_jobs`, which reads a jobs module into a :class:`~cronwarden.jobs.JobSet`.

The settings readers every settings object shares live in :mod:`cronwarden.model.environment`;
they are offered here too, where they were first.
"""

from __future__ import annotations

from ..model.environment import duration_text as duration_text
from ..model.environment import env_duration as env_duration
from ..model.environment import env_flag as env_flag
from ..model.environment import env_int as env_int
from ..model.environment import env_text as env_text
from ..model.errors import ConfigurationError
from .definitions import JobSet
from .loading import PROVIDERS as PROVIDERS
from .loading import load_module as load_module
from .loading import provider_from_env as provider_from_env


def load_jobs(target: str) -> JobSet:
    jobs = JobSet.from_module(load_module(target))
    if not len(jobs) and not jobs.consumers:
        raise ConfigurationError(
            f"{target!r} defines no jobs (declare them with @cronwarden.job "
            "or @cronwarden.consumer)"
        )
    return jobs
