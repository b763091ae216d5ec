"""The function source package: the user's job module, cronwarden pinned, and the entry module.

Layout of ``<out>/function/`` (zipped to ``<out>/function.zip``, byte-for-byte reproducible):

GCP (functions-framework)::

    main.py            trigger, worker, watcher = make_functions(<jobs module>)
    requirements.txt   cronwarden[gcp]==<version>
    <jobs module>      the user's module file (or its top-level package)

Azure (azure-functions v2 programming model)::

    function_app.py    app = build_app(<jobs module>)
    host.json          functionTimeout from the longest max runtime, extension bundle v4,
                       Service Bus: the worker settles messages itself (autoCompleteMessages
                       false), the host renews the lock for the whole run
    requirements.txt   cronwarden[azure]==<version>, and where the app runs the worker the
                       host's message-actions package (azurefunctions-extensions-bindings-
                       servicebus): the worker settles through it
    <jobs module>

The entry modules only import names the adapters provide (``cronwarden.adapters.gcp.functions
.make_functions``, ``cronwarden.adapters.azure.functions.build_app``); rendering never imports
them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from cronwarden.errors import ConfigurationError

from .spec import Plan

_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
#: What the Azure worker settles messages through (``ServiceBusMessageActions``, the Functions
#: host's settlement API; installed, it makes ``build_app`` use the SDK-type binding); only
#: pre-releases exist, which the ``b`` in the bound admits.
AZURE_SETTLEMENT = "azurefunctions-extensions-bindings-servicebus>=1.0.0b2,<2"
_RESERVED = {"main", "function_app", "cronwarden"}
_PACKAGED = ("gcp", "azure")  #: the providers write_package knows the entry files of
_SKIP_DIRS = {"__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


@dataclass(frozen=True)
class JobSource:
    """Where the job module lives and how the entry module imports it."""

    import_name: str  #: what ``main.py`` / ``function_app.py`` imports
    path: Path  #: the file, or the top-level package directory, to copy

    @property
    def is_package(self) -> bool:
        return self.path.is_dir()


def job_source(target: str, module: ModuleType) -> JobSource:
    """Locate the source of the job module loaded from ``target`` (a .py path or dotted name)."""
    if target.endswith(".py") or os.sep in target or "/" in target:
        path = Path(target).resolve()
        name = path.stem
        if not name.isidentifier():
            raise ConfigurationError(
                f"job module file {path.name!r}: the name must be a valid Python module name"
            )
        source = JobSource(name, path)
    else:
        top = target.split(".")[0]
        top_module = sys.modules.get(top)
        file = getattr(top_module, "__file__", None) or getattr(module, "__file__", None)
        if not file:
            raise ConfigurationError(f"cannot find the source file of job module {target!r}")
        location = Path(file).resolve()
        path = location.parent if location.name == "__init__.py" else location
        source = JobSource(target, path)
    if source.import_name.split(".")[0] in _RESERVED:
        raise ConfigurationError(
            f"rename job module {source.import_name!r}: main, function_app and cronwarden are "
            "taken by the function package"
        )
    return source


def requirements(
    provider: str,
    version: str,
    wheel: str | None = None,
    extra: str = "",
    *,
    settlement: bool = False,
) -> str:
    """``requirements.txt``: cronwarden with the provider's extra, pinned (or a vendored
    wheel), the Functions host's settlement package when ``settlement`` (an Azure app running
    the worker), then ``extra`` (the jobs' own requirements, verbatim)."""
    pin = f"./{wheel}[{provider}]" if wheel else f"cronwarden[{provider}]=={version}"
    text = f"# Rendered by `cronwarden deploy render` (--requirements adds the jobs' own).\n{pin}\n"
    if settlement:
        text += f"{AZURE_SETTLEMENT}\n"
    if extra.strip():
        text += extra.rstrip("\n") + "\n"
    return text


def gcp_main(source: JobSource) -> str:
    """``main.py`` for functions-framework: three HTTP targets."""
    alias = "jobs_module"
    return (
        '"""Cloud Functions (2nd gen) entry points, rendered by `cronwarden deploy render`.\n'
        "\n"
        "Targets (functions-framework, HTTP):\n"
        "  trigger  pushed from the schedule topic (one Cloud Scheduler job per cronwarden job)\n"
        "  worker   pushed from the run-request topic (our own subscription, with a DLQ policy)\n"
        "  watcher  called by its own Cloud Scheduler job (liveness)\n"
        '"""\n'
        "\n"
        "from cronwarden.adapters.gcp.functions import make_functions\n"
        "\n"
        f"import {source.import_name} as {alias}\n"
        "\n"
        f"trigger, worker, watcher = make_functions({alias})\n"
    )


def azure_function_app(source: JobSource) -> str:
    """``function_app.py`` for the azure-functions v2 programming model."""
    alias = "jobs_module"
    return (
        '"""Azure Functions app, rendered by `cronwarden deploy render`.\n'
        "\n"
        "Timer triggers read each job's schedule from the app setting\n"
        "CRONWARDEN_SCHEDULE_<JOB_NAME_UPPER_UNDERSCORED> (NCRONTAB, UTC); the worker is\n"
        "triggered by the Service Bus queue CRONWARDEN_SERVICEBUS_QUEUE through the\n"
        "identity-based connection ServiceBusConnection__fullyQualifiedNamespace.\n"
        '"""\n'
        "\n"
        "from cronwarden.adapters.azure.functions import build_app\n"
        "\n"
        f"import {source.import_name} as {alias}\n"
        "\n"
        f"app = build_app({alias})\n"
    )


def host_json(plan: Plan) -> str:
    """``host.json``: the host timeout covers the longest run; lock renewal covers it too.

    ``autoCompleteMessages`` is false, as on the worker's trigger (``build_app``): the worker
    settles every message itself (complete, scheduled retry copy, dead-letter with the reason)
    through the host's message actions; a host that also completed it would race the worker.
    ``maxAutoLockRenewalDuration``: the host renews the message lock while the worker runs, up
    to the host timeout (the queue's lock lasts at most 5 minutes); the worker also renews it
    on every lease renewal.
    """
    timeout = plan.host_timeout()
    doc = {
        "version": "2.0",
        "functionTimeout": timeout,
        "extensionBundle": {
            "id": "Microsoft.Azure.Functions.ExtensionBundle",
            "version": "[4.*, 5.0.0)",
        },
        "extensions": {
            "serviceBus": {
                "prefetchCount": 0,
                "maxConcurrentCalls": 4,
                "autoCompleteMessages": False,
                "maxAutoLockRenewalDuration": timeout,
            }
        },
        "logging": {
            "applicationInsights": {"samplingSettings": {"isEnabled": False}},
        },
    }
    return json.dumps(doc, indent=2) + "\n"


def write_package(
    folder: Path,
    provider: str,
    plan: Plan,
    source: JobSource,
    version: str,
    wheel: Path | None = None,
    extra_requirements: str = "",
    *,
    worker: bool = True,
) -> list[Path]:
    """Write the function package into ``folder`` (emptied first); return the files written.

    ``worker``: the package's app runs the worker (false for a watcher-only app)."""
    if provider not in _PACKAGED:
        raise ConfigurationError(
            f"no function package is rendered for provider {provider!r} (its entry module and "
            "host files belong in cronwarden.deploy.package)"
        )
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    wheel_name = None
    if wheel is not None:
        wheel_name = wheel.name
        shutil.copyfile(wheel, folder / wheel_name)
    settlement = provider == "azure" and worker
    files = {
        "requirements.txt": requirements(
            provider, version, wheel_name, extra_requirements, settlement=settlement
        )
    }
    if provider == "gcp":
        files["main.py"] = gcp_main(source)
    else:
        files["function_app.py"] = azure_function_app(source)
        files["host.json"] = host_json(plan)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    if source.is_package:
        shutil.copytree(
            source.path,
            folder / source.path.name,
            ignore=shutil.ignore_patterns(*_SKIP_DIRS, "*.pyc"),
        )
    else:
        shutil.copyfile(source.path, folder / f"{source.import_name}.py")
    return sorted(p for p in folder.rglob("*") if p.is_file())


def zip_folder(folder: Path, target: Path) -> str:
    """Zip ``folder``'s files (sorted, fixed timestamps: reproducible); return the SHA-256."""
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(path.relative_to(folder).as_posix(), _ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    return hashlib.sha256(target.read_bytes()).hexdigest()


__all__ = [
    "AZURE_SETTLEMENT",
    "JobSource",
    "azure_function_app",
    "gcp_main",
    "host_json",
    "job_source",
    "requirements",
    "write_package",
    "zip_folder",
]
