"""`cronwarden deploy render --provider postgres`: Kubernetes manifests for the Postgres provider,
validated offline against the Kubernetes JSON schemas shipped by the ``kubernetes-validate``
package (strict: unknown fields are errors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from cronwarden.cli import main
from cronwarden.deploy.kubernetes import render_kubernetes, to_yaml
from cronwarden.jobs.config import load_jobs

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "nightly_export.py")
K8S_VERSION = "1.30.0"  #: oldest minor still supported upstream that has CronJob timeZone GA


def _load(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def test_rendered_manifests_are_valid_kubernetes(tmp_path: Path) -> None:
    result = render_kubernetes(EXAMPLE, tmp_path / "k8s", replicas=4, image="ghcr.io/acme/j:1")
    names = {p.relative_to(result.out).as_posix() for p in result.files}
    assert {"deployment.yaml", "watcher-cronjob.yaml", "kustomization.yaml", "Dockerfile"} <= names
    assert "app/nightly_export.py" in names
    for manifest in ("deployment.yaml", "watcher-cronjob.yaml"):
        for doc in _load(result.out / manifest):
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)  # raises when invalid

    (deployment,) = _load(result.out / "deployment.yaml")
    spec = deployment["spec"]
    assert spec["replicas"] == 4
    (container,) = spec["template"]["spec"]["containers"]
    assert container["image"] == "ghcr.io/acme/j:1"
    assert container["command"] == ["cronwarden"] and container["args"][0] == "run"
    env = {e["name"]: e for e in container["env"]}
    assert env["CRONWARDEN_PROVIDER"]["value"] == "postgres"
    assert env["CRONWARDEN_JOBS"]["value"] == "nightly_export"
    dsn = env["CRONWARDEN_POSTGRES_DSN"]
    assert "value" not in dsn  # by reference only
    assert dsn["valueFrom"]["secretKeyRef"] == {"name": "cronwarden-postgres", "key": "dsn"}
    # SIGINT lets runs finish: the grace covers the longest max runtime
    longest = max(job.max_runtime.total_seconds() for job in load_jobs(EXAMPLE))
    assert spec["template"]["spec"]["terminationGracePeriodSeconds"] >= longest

    (cronjob,) = _load(result.out / "watcher-cronjob.yaml")
    assert cronjob["kind"] == "CronJob"
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["args"] == ["check"]
    assert pod["restartPolicy"] == "Never"
    assert "STOPSIGNAL SIGINT" in (result.out / "Dockerfile").read_text()
    kustomization = yaml.safe_load((result.out / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["deployment.yaml", "watcher-cronjob.yaml"]


def test_an_invalid_manifest_is_caught_by_the_validator() -> None:
    """The check can fail: a Deployment with a misspelt field is refused."""
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"replicas": "three", "selector": {}, "template": {}},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.mark.parametrize(
    "value",
    [
        {"a": "yes", "b": "1", "c": "*/5 * * * *", "d": "", "e": True, "f": 3, "g": None},
        {"list": [{"k": "v", "n": [1, 2]}, "x", [], {}], "q": "a: b", "u": "ü ✓ #x"},
    ],
)
def test_yaml_emitter_round_trips(value: dict[str, Any]) -> None:
    assert yaml.safe_load(to_yaml(value)) == value


def test_cli_renders_and_refuses_options_of_the_clouds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "k8s"
    with pytest.raises(SystemExit) as ok:
        main(["deploy", "render", "--provider", "postgres", "--jobs", EXAMPLE, "--out", str(out)])
    assert ok.value.code in (0, None)
    assert "3 replica(s)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:
        main(
            [
                "deploy",
                "render",
                "--provider",
                "postgres",
                "--jobs",
                EXAMPLE,
                "--out",
                str(out),
                "--gcp-worker",
                "pull",
            ]
        )
    assert bad.value.code == 2
    assert "apply to gcp and azure only" in capsys.readouterr().err
