"""The Kubernetes recipe for the Postgres provider: ``deploy render --provider postgres``.

Renders, into one folder:

* ``deployment.yaml``: a Deployment of N replicas of ``cronwarden run --provider postgres``.
  Every replica schedules and works the queue; the database makes each window run once (a double
  fire is one run key). The DSN comes from a Secret by reference (``secretKeyRef``), never as a
  value in a manifest.
* ``watcher-cronjob.yaml``: the liveness watcher as a CronJob (``cronwarden check`` every five
  minutes, ``concurrencyPolicy: Forbid``); a failed Job is the visible trace of an alert.
* ``kustomization.yaml``, a ``Dockerfile`` (cronwarden[postgres] and the job module; stop signal
  SIGINT so a replica finishes its runs before it exits) and a ``README.md`` with the steps.

The YAML is written by a small deterministic emitter (no YAML library at render time); the tests
validate every manifest against the Kubernetes JSON schemas of the ``kubernetes-validate``
package.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cronwarden.model.errors import ConfigurationError

from .package import _SKIP_DIRS, job_source

SECRET_KEY = "dsn"  # noqa: S105 - the key name inside the Secret, not a secret
WEBHOOK_KEY = "webhook-url"  #: optional key of the watcher's webhook URL in the same Secret
IMAGE_PLACEHOLDER = "registry.example.com/cronwarden-jobs:latest"
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")


@dataclass(frozen=True)
class KubernetesRendered:
    out: Path
    files: tuple[Path, ...]
    jobs: int


def render_kubernetes(
    jobs_target: str,
    out: Path | str,
    *,
    prefix: str = "cronwarden",
    replicas: int = 3,
    image: str | None = None,
    secret: str | None = None,
    schema: str = "cronwarden",
    workers: int = 2,
) -> KubernetesRendered:
    """Render the manifests for the jobs of ``jobs_target`` into ``out`` (see module docs)."""
    from cronwarden.adapters.postgres.settings import SCHEMA_PATTERN
    from cronwarden.jobs.config import load_module
    from cronwarden.jobs.definitions import JobSet

    if not _NAME.match(prefix):
        raise ConfigurationError(
            f"--name {prefix!r}: use lowercase letters, digits and '-' (a DNS label, at most "
            "40 characters)"
        )
    if not 1 <= replicas <= 100:
        raise ConfigurationError(f"--replicas {replicas}: choose 1..100")
    if not SCHEMA_PATTERN.match(schema):
        raise ConfigurationError(f"schema {schema!r}: lower-case letters, digits and _")
    module = load_module(jobs_target)
    jobs = JobSet.from_module(module)
    if not len(jobs):
        raise ConfigurationError(f"{jobs_target!r} defines no jobs")
    source = job_source(jobs_target, module)
    secret_name = secret or f"{prefix}-postgres"
    image_ref = image or IMAGE_PLACEHOLDER
    longest = max(int(job.max_runtime.total_seconds()) for job in jobs)
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    app = target / "app"
    if app.exists():
        shutil.rmtree(app)
    app.mkdir()
    if source.is_package:
        shutil.copytree(
            source.path,
            app / source.path.name,
            ignore=shutil.ignore_patterns(*_SKIP_DIRS, "*.pyc"),
        )
    else:
        shutil.copyfile(source.path, app / f"{source.import_name.split('.')[-1]}.py")
    job_ref = source.import_name if source.is_package else source.import_name.split(".")[-1]

    labels = {"app.kubernetes.io/name": "cronwarden", "app.kubernetes.io/instance": prefix}
    env = _env(secret_name, schema, job_ref)
    deployment = _deployment(prefix, labels, replicas, image_ref, env, workers, longest)
    cronjob = _cronjob(prefix, labels, image_ref, env, secret_name)
    files = {
        "deployment.yaml": to_yaml(deployment),
        "watcher-cronjob.yaml": to_yaml(cronjob),
        "kustomization.yaml": to_yaml(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": ["deployment.yaml", "watcher-cronjob.yaml"],
            }
        ),
        "Dockerfile": _dockerfile(),
        "README.md": _readme(prefix, replicas, secret_name, image_ref, len(jobs)),
    }
    for name, text in files.items():
        (target / name).write_text(text, encoding="utf-8")
    written = tuple(sorted(p for p in target.rglob("*") if p.is_file()))
    return KubernetesRendered(target, written, len(jobs))


def _env(secret: str, schema: str, job_ref: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "CRONWARDEN_POSTGRES_DSN",
            "valueFrom": {"secretKeyRef": {"name": secret, "key": SECRET_KEY}},
        },
        {"name": "CRONWARDEN_POSTGRES_SCHEMA", "value": schema},
        {"name": "CRONWARDEN_PROVIDER", "value": "postgres"},
        {"name": "CRONWARDEN_JOBS", "value": job_ref},
        {"name": "PYTHONPATH", "value": "/app"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]


def _container(name: str, image: str, args: list[str], env: list[dict[str, Any]]) -> Any:
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["cronwarden"],
        "args": args,
        "env": env,
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"memory": "512Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def _pod_security() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _deployment(
    prefix: str,
    labels: dict[str, str],
    replicas: int,
    image: str,
    env: list[dict[str, Any]],
    workers: int,
    longest_runtime: int,
) -> dict[str, Any]:
    pod_labels = {**labels, "app.kubernetes.io/component": "run"}
    container = _container("run", image, ["run", "--workers", str(workers)], env)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"{prefix}-run", "labels": pod_labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": pod_labels},
            # Replicas may overlap freely (the database decides who runs a window), so a
            # rolling update never needs to stop the old ones first.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
            },
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": _pod_security(),
                    # SIGINT (the image's stop signal) lets running jobs finish: give them
                    # their longest max runtime plus a margin before SIGKILL.
                    "terminationGracePeriodSeconds": longest_runtime + 30,
                    "containers": [container],
                },
            },
        },
    }


def _cronjob(
    prefix: str, labels: dict[str, str], image: str, env: list[dict[str, Any]], secret: str
) -> dict[str, Any]:
    pod_labels = {**labels, "app.kubernetes.io/component": "watcher"}
    webhook = {
        "name": "CRONWARDEN_WEBHOOK_URL",
        "valueFrom": {"secretKeyRef": {"name": secret, "key": WEBHOOK_KEY, "optional": True}},
    }
    container = _container("watcher", image, ["check"], [*env, webhook])
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": f"{prefix}-watcher", "labels": pod_labels},
        "spec": {
            "schedule": "*/5 * * * *",
            "timeZone": "Etc/UTC",
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 120,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 5,
            "jobTemplate": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "backoffLimit": 0,
                    "activeDeadlineSeconds": 240,
                    "template": {
                        "metadata": {"labels": pod_labels},
                        "spec": {
                            "restartPolicy": "Never",
                            "automountServiceAccountToken": False,
                            "securityContext": _pod_security(),
                            "containers": [container],
                        },
                    },
                },
            },
        },
    }


def _dockerfile() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        pin = f"=={version('cronwarden')}"
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        pin = ""
    return (
        "# The image every replica and the watcher run: cronwarden with the Postgres extra and\n"
        "# the job module (add your jobs' own requirements below).\n"
        "FROM python:3.11-slim\n"
        f'RUN pip install --no-cache-dir "cronwarden[postgres]{pin}"\n'
        "COPY app/ /app/\n"
        "USER 10001:10001\n"
        "# SIGINT stops `cronwarden run` cleanly: running jobs finish, nothing new starts.\n"
        "STOPSIGNAL SIGINT\n"
        'ENTRYPOINT ["cronwarden"]\n'
    )


def _readme(prefix: str, replicas: int, secret: str, image: str, jobs: int) -> str:
    return f"""# {prefix} on Kubernetes (Postgres provider)

{jobs} job(s), {replicas} replica(s) of `cronwarden run`, and the watcher as a CronJob. Every
replica schedules and works the queue; PostgreSQL makes each window run once.

1. Build and push the image (edit the `Dockerfile` to add your jobs' requirements):

       docker build -t {image} . && docker push {image}

2. Create the Secret with the DSN (never put it in a manifest; a managed secret store that
   syncs into this Secret works the same):

       kubectl create secret generic {secret} \\
         --from-literal={SECRET_KEY}='postgresql://cronwarden:PASSWORD@HOST:5432/cronwarden'
       # optional: the watcher's webhook, key {WEBHOOK_KEY}

3. Apply: `kubectl apply -k .` (the schema is created on the first operation; several replicas
   starting at once migrate it once, under an advisory lock).

Scale with `kubectl scale deployment/{prefix}-run --replicas=N`. `cronwarden status` /
`dlq list` / `dlq redrive` work from any pod: `kubectl exec deploy/{prefix}-run -- cronwarden
status`.
"""


def to_yaml(value: Any) -> str:
    """``value`` (dicts, lists, str, int, bool, None) as block-style YAML, keys in given order.
    Strings are quoted where YAML would read them as something else."""
    lines: list[str] = []
    _emit(value, 0, lines)
    return "\n".join(lines) + "\n"


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    text = str(value)
    plain = re.fullmatch(r"[A-Za-z_/][A-Za-z0-9_./-]*", text) is not None
    reserved = text.lower() in {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}
    return text if plain and not reserved else json.dumps(text)


def _emit(value: Any, indent: int, lines: list[str]) -> None:
    pad = " " * indent
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(item, Mapping | list) and item:
                lines.append(f"{pad}{_scalar(key)}:")
                _emit(item, indent + 2, lines)
            else:
                lines.append(f"{pad}{_scalar(key)}: {_inline(item)}")
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for item in value:
            if isinstance(item, Mapping) and item:
                first = True
                sub: list[str] = []
                _emit(item, indent + 2, sub)
                for line in sub:
                    lines.append((f"{pad}- " + line[indent + 2 :]) if first else line)
                    first = False
            elif isinstance(item, list) and item:
                lines.append(f"{pad}-")
                _emit(item, indent + 2, lines)
            else:
                lines.append(f"{pad}- {_inline(item)}")
    else:
        lines.append(f"{pad}{_scalar(value)}")


def _inline(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)
