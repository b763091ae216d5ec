"""The offline checks: everything rendered passes; deliberate mistakes are caught."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cronwarden.deploy import files
from cronwarden.deploy.check import (
    check_body,
    check_fmt,
    check_modules,
    check_references,
    check_schema,
    check_secrets,
    check_validate,
    parse,
    run_checks,
)
from cronwarden.deploy.render import Rendered
from cronwarden.deploy.schema import BlockSchema, Schemas, parse_resource_code

from .conftest import CASES, terraform_or_skip


def _copy(rendered: Rendered, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(rendered.out, target)
    return target


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_output_passes_every_check(
    case: str, rendered: dict[str, Rendered], schemas: Schemas
) -> None:
    terraform_or_skip()
    report = run_checks(rendered[case].out, schemas=schemas)
    assert report.ok, "\n".join(report.lines())
    assert set(report.findings) == {
        "parse",
        "fmt",
        "validate",
        "schema",
        "modules",
        "references",
        "secrets",
    }


def test_the_shipped_modules_pass(schemas: Schemas) -> None:
    terraform_or_skip()
    report = run_checks(files.terraform_modules(), schemas=schemas)
    assert report.ok, "\n".join(report.lines())


def test_unknown_argument_fails_the_schema_check(
    rendered: dict[str, Rendered], schemas: Schemas, tmp_path: Path
) -> None:
    root = _copy(rendered["gcp-quarter-hourly"], tmp_path)
    push = root / "modules/gcp/push/main.tf"
    _replace(
        push,
        "  ack_deadline_seconds       = var.ack_deadline_seconds\n",
        "  ack_deadline_seconds       = var.ack_deadline_seconds\n  ack_deadline = 10\n",
    )
    _replace(
        push,
        "    max_delivery_attempts = var.max_delivery_attempts\n",
        "    max_delivery_attempts = var.max_delivery_attempts\n    max_attempts = 5\n",
    )
    parsed, errors = parse(root)
    assert not errors
    findings = check_schema(parsed, root, schemas)
    assert findings == [
        "modules/gcp/push/main.tf: resource google_pubsub_subscription.this: unknown argument "
        "'ack_deadline' (did you mean 'ack_deadline_seconds'?)",
        "modules/gcp/push/main.tf: resource google_pubsub_subscription.this.dead_letter_policy: "
        "unknown argument 'max_attempts' (did you mean 'max_delivery_attempts'?)",
    ]


def test_azure_mistakes_fail_the_schema_check(
    rendered: dict[str, Rendered], schemas: Schemas, tmp_path: Path
) -> None:
    root = _copy(rendered["azure-nightly"], tmp_path)
    queue = root / "modules/azure/servicebus/main.tf"
    _replace(
        queue,
        "  lock_duration                           = var.lock_duration\n",
        "  lock_duration_seconds = 300\n",
    )
    _replace(
        queue,
        'resource "azurerm_servicebus_queue" "this" {\n  name',
        'resource "azurerm_servicebus_queue" "this" {\n  timeouts = {}\n  nam',
    )
    app = root / "modules/azure/function-app/main.tf"
    _replace(app, '  identity {\n    type = "SystemAssigned"\n  }\n', "  identity = {}\n")
    _replace(
        app, 'resource "azurerm_service_plan" "this"', 'resource "azurerm_service_plans" "this"'
    )
    parsed, _ = parse(root)
    findings = "\n".join(check_schema(parsed, root, schemas))
    assert "unknown argument 'lock_duration_seconds' (did you mean 'lock_duration'?)" in findings
    assert "required argument 'name' is missing" in findings  # 'nam' instead of 'name'
    assert "'timeouts' is a block: write `timeouts { ... }`" in findings
    assert "'identity' is a block" in findings
    assert "unknown resource type 'azurerm_service_plans'" in findings


def test_module_calls_are_checked(rendered: dict[str, Rendered], tmp_path: Path) -> None:
    root = _copy(rendered["gcp-quarter-hourly"], tmp_path)
    main = root / "main.tf"
    _replace(
        main,
        "  invoker_email = google_service_account.scheduler.email",
        "  invoker_mail = google_service_account.scheduler.email",
    )
    _replace(main, "= module.dead_letter.topic_id", "= module.dead_letter.topic")
    parsed, _ = parse(root)
    assert check_modules(parsed, root) == [
        "main.tf: module watcher_schedule: required variable 'invoker_email' is missing",
        "main.tf: module watcher_schedule: unknown variable 'invoker_mail' "
        "(did you mean 'invoker_email'?)",
        "main.tf: module.dead_letter.topic: module 'dead_letter' has no output 'topic' "
        "(did you mean 'topic_id'?)",
    ]


def test_references_are_checked(rendered: dict[str, Rendered], tmp_path: Path) -> None:
    root = _copy(rendered["gcp-quarter-hourly"], tmp_path)
    _replace(
        root / "main.tf", "google_service_account.push.name", "google_service_account.pusher.name"
    )
    _replace(
        root / "main.tf",
        "location                    = var.region",
        "location                    = var.regoin",
    )
    _replace(root / "main.tf", "toset(local.apis)", "toset(local.api)")
    _replace(
        root / "main.tf", "data.google_project.this.number}@", "data.google_project.that.number}@"
    )
    parsed, _ = parse(root)
    assert check_references(parsed, root) == [
        "main.tf: data.google_project.that is not declared",
        "main.tf: google_service_account.pusher is not declared",
        "main.tf: local.api is not declared",
        "main.tf: var.regoin is not declared",
    ]


def test_fmt_and_validate_catch_mistakes(rendered: dict[str, Rendered], tmp_path: Path) -> None:
    terraform_or_skip()
    root = _copy(rendered["azure-nightly"], tmp_path)
    _replace(
        root / "main.tf",
        '  source = "./modules/common/settings"',
        '  source    = "./modules/common/settings"',
    )
    assert check_fmt(root) == ["main.tf: not in `terraform fmt` format"]
    settings = root / "modules/common/settings/main.tf"
    _replace(settings, "value       = var.jobs\n", "value       = var.job\n")
    parsed, _ = parse(root)
    findings, validated = check_validate(parsed, root)
    assert validated == 1  # common/settings: the only provider-free module
    assert len(findings) == 1 and "Reference to undeclared input variable" in findings[0]
    assert not (settings.parent / ".terraform").exists()  # validated in a scratch copy


def test_settings_module_rejects_out_of_range_values(tmp_path: Path) -> None:
    """The provider-free module's own variable validation, through `terraform validate`."""
    binary = terraform_or_skip()
    import subprocess

    work = tmp_path / "m"
    shutil.copytree(files.terraform_modules() / "common/settings", work / "settings")
    (work / "main.tf").write_text(
        'module "s" {\n'
        '  source = "./settings"\n'
        "  jobs = {\n"
        '    "Bad_Name" = {\n'
        '      cron = "0 2 * *", time_zone = "UTC", ncrontab_utc = "", max_runtime_seconds = 60,\n'
        "      max_attempts = 500, min_backoff_seconds = 5, max_backoff_seconds = 1,\n"
        '      schedule_setting = "X"\n'
        "    }\n"
        "  }\n"
        "}\n"
    )
    env = {"CHECKPOINT_DISABLE": "1", "TF_CLI_CONFIG_FILE": "/dev/null", "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [binary, "init", "-backend=false"], cwd=work, env=env, check=True, capture_output=True
    )
    done = subprocess.run(
        [binary, "plan", "-input=false", "-no-color"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    for words in ("Job names use", "5 fields", "between 1 and 100", "min_backoff <= max_backoff"):
        assert words in done.stderr, done.stderr


def test_secrets_are_reported(rendered: dict[str, Rendered], tmp_path: Path) -> None:
    root = _copy(rendered["azure-nightly"], tmp_path)
    assert check_secrets(root) == []
    _replace(
        root / "main.tf",
        'CRONWARDEN_PROVIDER                           = "azure"',
        'CRONWARDEN_PROVIDER = "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc"',
    )
    assert check_secrets(root) == ["main.tf: looks like a secret: AccountKey=..."]


def test_index_credentials_and_environment_files_are_reported_without_the_secret(
    tmp_path: Path,
) -> None:
    (tmp_path / "function" / "pkg").mkdir(parents=True)
    (tmp_path / "function" / "requirements.txt").write_text(
        "--extra-index-url https://deploy:tok3nSecret@pypi.example/simple\ncronwarden==1.0\n"
    )
    (tmp_path / "function" / "pkg" / ".env").write_text("X=1\n")
    (tmp_path / "README.md").write_text("DSN: postgresql://cronwarden:PASSWORD@HOST:5432/db\n")
    found = check_secrets(tmp_path)
    assert found == [
        "function/pkg/.env: an environment file (secrets): remove it",
        "function/requirements.txt: looks like a secret: ://deploy:***@...",
    ]
    assert "tok3nSecret" not in "".join(found)


def test_check_body_handles_dynamic_blocks() -> None:
    schema = BlockSchema({"name": True}, {"fields": BlockSchema({"order": False})})
    body = {
        "name": "x",
        "dynamic": [
            {
                '"fields"': {
                    "for_each": "${x}",
                    "content": [{"order": 1, "oops": 2, "__is_block__": True}],
                }
            }
        ],
    }
    assert check_body(body, schema, "r", top=True) == ["r.fields: unknown argument 'oops'"]
    assert check_body({"count": 1}, schema, "r", top=True) == [
        "r: required argument 'name' is missing"
    ]


def test_parse_resource_code_reads_the_generated_shape() -> None:
    js = """
function fooBarRetryToHclTerraform(struct) {
    const attrs = {
        max_tries: {
            value: cdktf.numberToHclTerraform(struct.maxTries),
            isBlock: false,
            type: "simple",
            storageClassType: "number",
        },
    };
    return attrs;
}
class FooBar extends cdktf.TerraformResource {
    synthesizeHclAttributes() {
        const attrs = {
            name: {
                value: cdktf.stringToHclTerraform(this._name),
                isBlock: false,
                type: "simple",
                storageClassType: "string",
            },
            retry: {
                value: fooBarRetryToHclTerraform(this._retry.internalValue),
                isBlock: true,
                type: "list",
                storageClassType: "FooBarRetryList",
            },
        };
        return attrs;
    }
}
FooBar.tfResourceType = "foo_bar";
"""
    dts = """
export interface FooBarConfig extends cdktf.TerraformMetaArguments {
    readonly name: string;
    readonly retry?: FooBarRetry;
}
export interface FooBarRetry {
    readonly maxTries?: number;
}
"""
    schema = parse_resource_code(js, dts)["foo_bar"]
    assert schema.attributes == {"name": True}
    assert schema.blocks["retry"].attributes == {"max_tries": False}


def test_schema_pins_are_the_lock_files() -> None:
    import json

    from cronwarden.deploy.schema import lock_digest, pinned_versions

    manifest = json.loads((files.schema_manifests() / "package.json").read_text())
    assert pinned_versions() == manifest["dependencies"]
    assert len(lock_digest()) == 16 and lock_digest() == lock_digest()


def test_every_checkov_skip_gives_its_reason() -> None:
    import re

    skip = re.compile(r"checkov:skip=([A-Z0-9_]+)(?::(.*))?")
    sources = [
        *files.terraform_modules().rglob("*.tf"),
        Path(__file__).parents[2] / "adapters/gcp/deploy.py",
    ]
    found = 0
    for path in sources:
        for match in skip.finditer(path.read_text()):
            found += 1
            reason = (match.group(2) or "").strip().strip('"')
            assert len(reason) > 20, f"{path}: {match.group(1)} has no reason"
    assert found >= 10
