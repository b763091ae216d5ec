"""Choosing a provider by configuration, and loading job modules.

``CRONWARDEN_PROVIDER`` selects the provider (``local`` by default, ``gcp``, ``azure``,
``aws``); each provider reads its own settings from the environment (see its ``from_env``).
Job code never names a provider: moving clouds is a configuration change.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

from .errors import ConfigurationError
from .jobs import JobSet
from .ports import Provider

PROVIDERS = {
    "local": "cronwarden.adapters.local:LocalProvider",
    "gcp": "cronwarden.adapters.gcp:GcpProvider",
    "azure": "cronwarden.adapters.azure:AzureProvider",
    "aws": "cronwarden.adapters.aws:AwsProvider",
}


def provider_from_env(name: str | None = None, **options: Any) -> Provider:
    """Build the provider named ``name`` (default ``$CRONWARDEN_PROVIDER`` or ``local``)."""
    chosen = (name or os.environ.get("CRONWARDEN_PROVIDER") or "local").strip().lower()
    target = PROVIDERS.get(chosen)
    if target is None:
        raise ConfigurationError(
            f"unknown provider {chosen!r}; choose one of {', '.join(sorted(PROVIDERS))}"
        )
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        extra = {"gcp": "gcp", "azure": "azure", "aws": "aws"}.get(chosen)
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
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        raise ConfigurationError(f"cannot import job module {target!r}: {exc}") from exc


def load_jobs(target: str) -> JobSet:
    jobs = JobSet.from_module(load_module(target))
    if not len(jobs):
        raise ConfigurationError(f"{target!r} defines no jobs (declare them with @cronwarden.job)")
    return jobs
