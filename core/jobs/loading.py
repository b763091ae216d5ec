"""Loading a jobs module, and choosing a provider by configuration.

``CRONWARDEN_PROVIDER`` selects the provider (``local`` by default, ``gcp``, ``azure``,
``aws``, ``postgres``, ``redis``, ``s3``, ``blob``, ``gcs``); each provider reads its own
settings from the environment (see its ``from_env``). Job code never names a provider: moving
clouds is a configuration change.
Providers are named here by import path only: no layer of the core imports an adapter.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from ..model.environment import DEFAULT_PROVIDER, PROVIDER_ENV
from ..model.errors import ConfigurationError, CronwardenError
from ..model.ports import Provider

_T = TypeVar("_T")

PROVIDERS = {
    "local": "cronwarden.adapters.local:LocalProvider",
    "gcp": "cronwarden.adapters.gcp:GcpProvider",
    "azure": "cronwarden.adapters.azure:AzureProvider",
    "aws": "cronwarden.adapters.aws:AwsProvider",
    "postgres": "cronwarden.adapters.postgres:PostgresProvider",
    "redis": "cronwarden.adapters.redis:RedisProvider",
    "s3": "cronwarden.adapters.objectstore:S3Provider",
    "blob": "cronwarden.adapters.objectstore:BlobProvider",
    "gcs": "cronwarden.adapters.objectstore:GcsProvider",
}


def provider_from_env(name: str | None = None, **options: Any) -> Provider:
    """Build the provider named ``name`` (default ``$CRONWARDEN_PROVIDER`` or ``local``)."""
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
        extras = {"gcp": "gcp", "azure": "azure", "aws": "aws", "postgres": "postgres"}
        extra = {**extras, "redis": "redis", "s3": "aws", "blob": "azure", "gcs": "gcp"}.get(chosen)
        hint = f" (pip install 'cronwarden[{extra}]')" if extra else ""
        raise ConfigurationError(f"provider {chosen!r} is not available: {exc}{hint}") from exc
    cls = getattr(module, attr)
    factory = getattr(cls, "from_env", cls)
    provider: Provider = factory(**options)
    return provider


def load_module(target: str) -> ModuleType:
    """Import a job module from a dotted name (``app.jobs``) or a file path (``jobs.py``).

    A directory is neither: naming one raises a :class:`ConfigurationError` that says so and
    names the files inside it that may have been meant (``jobs.py``, ``__init__.py``)."""
    if target.endswith(".py") or os.sep in target or "/" in target:
        path = os.path.abspath(target)
        if os.path.isdir(path):
            raise _directory_error(target, path)
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
        module = _import_dotted(target)
    except ModuleNotFoundError as exc:
        if exc.name and target.split(".")[0] == exc.name.split(".")[0]:
            raise ConfigurationError(f"cannot import job module {target!r}: {exc}") from exc
        raise
    folder = os.path.abspath(target.replace(".", os.sep))
    if getattr(module, "__file__", None) is None and os.path.isdir(folder):
        # A folder without __init__.py imports as an empty namespace package: no jobs, no error.
        raise _directory_error(target, folder)
    return module


def _import_dotted(target: str) -> ModuleType:
    """Import ``target``; when its top-level package is not importable, look in the working
    directory too (as ``python -m`` does: ``cronwarden run --jobs jobs`` beside ``jobs.py``).
    The directory is added last, only then, so it never shadows an installed module."""
    try:
        return _run_user_code(lambda: importlib.import_module(target), target)
    except ModuleNotFoundError as exc:
        top = target.split(".")[0]
        here = os.getcwd()
        if exc.name != top or here in sys.path or "" in sys.path:
            raise
        sys.path.append(here)
        importlib.invalidate_caches()
        return _run_user_code(lambda: importlib.import_module(target), target)


def _directory_error(target: str, path: str) -> ConfigurationError:
    """The one line for a job module that names a directory: what it is, what is expected, and
    what inside it may have been meant."""
    shown = target.rstrip("/" + os.sep)
    meant = [
        os.path.join(shown, name)
        for name in ("jobs.py", "__init__.py")
        if os.path.isfile(os.path.join(path, name))
    ]
    hint = f"; did you mean {' or '.join(repr(m) for m in meant)}?" if meant else ""
    return ConfigurationError(
        f"job module {target!r} is a directory; expected a .py file (like jobs.py) "
        f"or a dotted module name (like app.jobs){hint}"
    )


def _run_user_code(load: Callable[[], _T], target: str) -> _T:
    """Run a job module's import; an error in it becomes a ConfigurationError naming the
    file and line at fault (cronwarden's own errors keep their message: they name the job)."""
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

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the cronwarden package
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
