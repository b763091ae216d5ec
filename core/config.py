"""Choosing a provider by configuration, and loading job modules.

``CRONWARDEN_PROVIDER`` selects the provider (``local`` by default, ``gcp``, ``azure``,
``aws``, ``postgres``); each provider reads its own settings from the environment (see its
``from_env``). Job code never names a provider: moving clouds is a configuration change.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from datetime import timedelta
from types import ModuleType
from typing import Any, TypeVar

from .errors import ConfigurationError
from .jobs import JobSet
from .ports import Provider

_T = TypeVar("_T")

PROVIDERS = {
    "local": "cronwarden.adapters.local:LocalProvider",
    "gcp": "cronwarden.adapters.gcp:GcpProvider",
    "azure": "cronwarden.adapters.azure:AzureProvider",
    "aws": "cronwarden.adapters.aws:AwsProvider",
    "postgres": "cronwarden.adapters.postgres:PostgresProvider",
}


def provider_from_env(name: str | None = None, **options: Any) -> Provider:
    """Build the provider named ``name`` (default ``$CRONWARDEN_PROVIDER`` or ``local``)."""
    from .hosting.settings import DEFAULT_PROVIDER, PROVIDER_ENV

    chosen = (name or os.environ.get(PROVIDER_ENV) or DEFAULT_PROVIDER).strip().lower()
    target = PROVIDERS.get(chosen)
    if target is None:
        raise ConfigurationError(
            f"unknown provider {chosen!r}; choose one of {', '.join(sorted(PROVIDERS))}"
        )
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        extra = {"gcp": "gcp", "azure": "azure", "aws": "aws", "postgres": "postgres"}.get(chosen)
        hint = f" (pip install 'cronwarden[{extra}]')" if extra else ""
        raise ConfigurationError(f"provider {chosen!r} is not available: {exc}{hint}") from exc
    cls = getattr(module, attr)
    factory = getattr(cls, "from_env", cls)
    provider: Provider = factory(**options)
    return provider


def load_module(target: str) -> ModuleType:
    """Import a job module from a dotted name (``app.jobs``) or a file path (``jobs.py``)."""
    if target.endswith(".py") or os.sep in target or "/" in target:
        path = os.path.abspath(target)
        if not os.path.isfile(path):
            raise ConfigurationError(f"job module file {target!r} does not exist")
        name = "cronwarden_jobs_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ConfigurationError(f"cannot load {target!r} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        directory = os.path.dirname(path)
        if directory not in sys.path:
            sys.path.insert(0, directory)
        loader = spec.loader
        _run_user_code(lambda: loader.exec_module(module), target)
        return module
    try:
        return _run_user_code(lambda: importlib.import_module(target), target)
    except ModuleNotFoundError as exc:
        if exc.name and target.split(".")[0] == exc.name.split(".")[0]:
            raise ConfigurationError(f"cannot import job module {target!r}: {exc}") from exc
        raise


def _run_user_code(load: Callable[[], _T], target: str) -> _T:
    """Run a job module's import; an error in it becomes a ConfigurationError naming the
    file and line at fault (cronwarden's own errors keep their message: they name the job)."""
    from .errors import CronwardenError

    try:
        return load()
    except CronwardenError:
        raise
    except SyntaxError as exc:
        where = f"{_shown(exc.filename)}:{exc.lineno}" if exc.filename else target
        raise ConfigurationError(f"{where}: SyntaxError: {exc.msg}") from exc
    except ModuleNotFoundError as exc:
        if exc.name and target.split(".")[0] == exc.name.split(".")[0]:
            raise  # the job module itself is missing
        raise ConfigurationError(
            f"{_user_frame(exc, target)}: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        raise ConfigurationError(
            f"{_user_frame(exc, target)}: {type(exc).__name__}: {exc}"
        ) from exc


def _user_frame(exc: BaseException, target: str) -> str:
    """``file:line`` of the innermost frame outside cronwarden and the import machinery."""
    import traceback

    here = os.path.dirname(os.path.abspath(__file__))
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith(here) and "<frozen" not in f.filename
    ]
    if not frames:
        return target
    return f"{_shown(frames[-1].filename)}:{frames[-1].lineno}"


def _shown(path: str) -> str:
    """``path`` relative to the current directory when it is under it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def load_jobs(target: str) -> JobSet:
    jobs = JobSet.from_module(load_module(target))
    if not len(jobs) and not jobs.consumers:
        raise ConfigurationError(
            f"{target!r} defines no jobs (declare them with @cronwarden.job "
            "or @cronwarden.consumer)"
        )
    return jobs


# -- reading settings from the environment (shared by every settings object) ---------------------


def env_text(env: Mapping[str, str], name: str, default: str = "") -> str:
    """``env[name]`` stripped, or ``default`` when unset or empty."""
    return (env.get(name) or "").strip() or default


def env_int(
    env: Mapping[str, str],
    name: str,
    default: int,
    *,
    low: int | None = None,
    high: int | None = None,
) -> int:
    """An integer setting within ``[low, high]``; a bad value raises
    :class:`ConfigurationError` naming the variable."""
    raw = env_text(env, name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from None
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"{low} to {high}" if low is not None and high is not None else f">= {low}"
        raise ConfigurationError(f"{name} must be {bounds}, got {value}")
    return value


def env_flag(env: Mapping[str, str], name: str) -> bool | None:
    """A yes/no setting (1/true/yes/on vs anything else); ``None`` when unset."""
    raw = env.get(name)
    if raw is None:
        return None
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def env_duration(env: Mapping[str, str], name: str) -> timedelta | None:
    """A duration setting (``90d``, ``1h30m``); ``None`` when unset."""
    raw = env_text(env, name)
    if not raw:
        return None
    from .durations import parse_duration

    try:
        return parse_duration(raw, field=name)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def duration_text(value: timedelta) -> str:
    """A duration as :func:`env_duration` reads it back (whole seconds: ``"3600s"``)."""
    return f"{int(value.total_seconds())}s"
