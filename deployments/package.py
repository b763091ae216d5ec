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

Each cloud's entry files come from its renderer (``CloudRenderer.package``); the entry modules
only import names the adapters provide (``cronwarden.adapters.gcp.functions.make_functions``,
``cronwarden.adapters.azure.functions.build_app``); rendering never imports them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from cronwarden.model.errors import ConfigurationError

from . import renderers
from ._moved import moved_names
from .spec import Plan

_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_RESERVED = {"main", "function_app", "cronwarden"}
_MOVED = {  #: deprecated names: each cloud's package files live with its renderer
    "AZURE_SETTLEMENT": "cronwarden.adapters.azure.deploy",
    "azure_function_app": "cronwarden.adapters.azure.deploy",
    "host_json": "cronwarden.adapters.azure.deploy",
    "gcp_main": "cronwarden.adapters.gcp.deploy",
}

__getattr__ = moved_names(__name__, _MOVED)


_SKIP_DIRS = {"__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
#: files never shipped in a function package: local environment files hold secrets (a
#: webhook URL, a connection string) that belong in the platform's settings, not the zip
_SKIP_FILES = (".env", ".env.*", "*.env", ".envrc", ".netrc", ".pypirc")


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
    pins: Sequence[str] = (),
) -> str:
    """``requirements.txt``: cronwarden with the provider's extra, pinned (or a vendored
    wheel), the cloud's own ``pins`` (e.g. the Azure Functions host's settlement package),
    then ``extra`` (the jobs' own requirements, verbatim)."""
    pin = f"./{wheel}[{provider}]" if wheel else f"cronwarden[{provider}]=={version}"
    text = f"# Rendered by `cronwarden deploy render` (--requirements adds the jobs' own).\n{pin}\n"
    text += "".join(f"{line}\n" for line in pins)
    if extra.strip():
        text += extra.rstrip("\n") + "\n"
    return text


def entry_module(source: JobSource, docstring: str, factory: str, binding: str) -> str:
    """An entry module: ``docstring``, the import of the adapter's ``factory`` (dotted path),
    the job module as ``jobs_module``, then ``binding`` (``{jobs}`` stands for the module)."""
    module, _, name = factory.rpartition(".")
    alias = "jobs_module"
    return (
        f'"""{docstring}"""\n\n'
        f"from {module} import {name}\n\n"
        f"import {source.import_name} as {alias}\n\n"
        f"{binding.format(jobs=alias)}\n"
    )


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
    shape = renderers.get(provider).package
    if shape is None:
        raise ConfigurationError(
            f"no function package is rendered for provider {provider!r} (its renderer has no "
            "package entry files)"
        )
    entry = shape(plan, source, worker)
    if source.is_package and folder.resolve().is_relative_to(source.path.resolve()):
        # copying the package into itself would copy the copy, without end
        raise ConfigurationError(
            f"the output folder {folder} lies inside the job package {source.path}: render "
            "outside it (--out)"
        )
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    wheel_name = None
    if wheel is not None:
        wheel_name = wheel.name
        shutil.copyfile(wheel, folder / wheel_name)
    files = {
        "requirements.txt": requirements(
            provider, version, wheel_name, extra_requirements, pins=entry.pins
        ),
        **entry.files,
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    if source.is_package:
        shutil.copytree(
            source.path,
            folder / source.path.name,
            ignore=shutil.ignore_patterns(*_SKIP_DIRS, *_SKIP_FILES, "*.pyc"),
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
    "JobSource",
    "entry_module",
    "job_source",
    "requirements",
    "write_package",
    "zip_folder",
]
