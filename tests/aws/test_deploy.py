"""``cronwarden deploy render --provider aws``: the root module, the package, the refusals; the
rendered module validated offline with the mirrored AWS provider, and (slow) applied against
moto: init, validate, apply, a second plan with no changes, destroy."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from cronwarden.adapters.aws.store import DUE_INDEXES, INDEX
from cronwarden.cli import main as cli_main
from cronwarden.emulators.aws import MotoServer
from cronwarden.emulators.aws.terraform import find_mirror, moto_override, write_cli_config
from tests.support.procs import ROOT

EXAMPLE = ROOT / "examples" / "nightly_export.py"
QUARTER = ROOT / "examples" / "quarter_hourly.py"
TERRAFORM = shutil.which("terraform")


def _render(out: Path, target: Path = EXAMPLE, *extra: str) -> str:
    from cronwarden.deploy.cli import deploy

    result = CliRunner().invoke(
        deploy,
        ["render", "--provider", "aws", "--jobs", str(target), "--out", str(out), *extra],
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_render_writes_the_root_module_and_the_lambda_package(tmp_path: Path) -> None:
    output = _render(tmp_path / "out", EXAMPLE, "--name", "cwx")
    out = tmp_path / "out"
    assert "rendered" in output and "1 job(s)" in output
    for name in ("versions.tf", "variables.tf", "main.tf", "outputs.tf", "README.md"):
        assert (out / name).is_file(), name
    for module in ("state", "queue", "functions", "schedules", "monitoring"):
        assert (out / "modules" / "aws" / module / "main.tf").is_file()
    main = (out / "main.tf").read_text()
    assert 'expression = "cron(0 0,1 * * ? *)"' in main  # 02:00 Berlin in UTC, both offsets
    assert "<aws.scheduler.scheduled-time>" in main
    assert "max_receive_count          = 6" in main  # 5 attempts + 1
    assert "visibility_timeout_seconds = 900" in main
    handler = (out / "function" / "handler.py").read_text()
    assert "make_handlers(jobs_module)" in handler and "import nightly_export" in handler
    assert "cronwarden[aws]==" in (out / "function" / "requirements.txt").read_text()
    with zipfile.ZipFile(out / "function.zip") as archive:
        assert {"handler.py", "nightly_export.py", "requirements.txt"} <= set(archive.namelist())
    assert (out / "function" / "nightly_export.py").read_bytes() == EXAMPLE.read_bytes()
    for path in out.rglob("*.tf"):  # nothing secret is rendered
        text = path.read_text().lower()
        assert "secret_key" not in text and "access_key" not in text


def _long_jobs(tmp_path: Path) -> Path:
    jobs = tmp_path / "long_jobs.py"
    jobs.write_text(
        "import cronwarden\n"
        "@cronwarden.job('long', cron='0 3 * * *', max_runtime='20m')\n"
        "def long(ctx): pass\n"
        "@cronwarden.job('short', cron='*/15 * * * *', max_runtime='1m')\n"
        "def short(ctx): pass\n"
    )
    return jobs


def test_a_job_longer_than_lambda_allows_runs_on_the_ecs_pull_worker(tmp_path: Path) -> None:
    from cronwarden.adapters.aws.deploy import render

    result = render(str(_long_jobs(tmp_path)), tmp_path / "out")
    assert any("ECS/Fargate" in note and note.startswith("long:") for note in result.plan.notes)
    main = " ".join((result.out / "main.tf").read_text().split())
    assert 'module "pull_worker"' in main and 'jobs_module = "long_jobs"' in main
    assert 'functions = ["trigger", "watcher"]' in main  # no Lambda worker, no event source
    worker = (result.out / "modules/aws/pull-worker/main.tf").read_text()
    assert '"cronwarden.hosting.pull"' in worker and 'launch_type     = "FARGATE"' in worker
    assert 'variable "worker_image"' in (result.out / "variables.tf").read_text()
    assert "cronwarden.hosting.pull --jobs long_jobs" in (result.out / "README.md").read_text()


def test_the_ecs_worker_module_is_valid_for_the_aws_provider(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _render(out, _long_jobs(tmp_path))
    env = _terraform(out, tmp_path)
    _tf(out, env, "fmt", "-check", "-recursive")
    _tf(out, env, "init", "-input=false", "-backend=false")
    assert "Success" in _tf(out, env, "validate")


def test_aws_is_a_registered_renderer_and_plans_like_the_others() -> None:
    from cronwarden.deploy import renderers
    from cronwarden.deploy.spec import plan
    from cronwarden.jobs import JobSet
    from cronwarden.jobs.config import load_module

    assert "aws" in renderers.names()
    jobs = JobSet.from_module(load_module(str(EXAMPLE)))
    the_plan = plan(jobs, ["aws"])
    assert [j.name for j in the_plan.jobs] == ["nightly-export"]
    assert any("Lambda's 900s limit" in note for note in the_plan.notes)


@pytest.mark.parametrize("host", ["gcp", "azure"])
def test_a_watcher_in_another_cloud_reads_the_aws_jobs_by_reference(
    tmp_path: Path, host: str
) -> None:
    from cronwarden.deploy.render import render

    result = render("aws", str(QUARTER), tmp_path / "out", watcher_provider=host)
    out = result.out
    assert result.roots == (out, out / "watcher")
    main = " ".join((out / "main.tf").read_text().split())
    assert 'module "external_watcher"' in main and "./modules/aws/external-reader" in main
    assert 'functions = ["trigger", "worker"]' in main  # no watcher function on AWS
    assert "with_watcher = false" in main
    reader = (out / "modules/aws/external-reader/main.tf").read_text()
    assert "aws_iam_access_key" not in reader  # no key in Terraform (nor in the state)
    assert "create-access-key" in (out / "README.md").read_text()
    watcher = (out / "watcher" / "main.tf").read_text()
    assert 'CRONWARDEN_PROVIDER              = "aws"' in watcher
    assert 'CRONWARDEN_DYNAMODB_TABLE        = "cronwarden-state"' in watcher
    assert "of jobs running on AWS" in watcher
    # the key reaches the watcher by reference only: secret names, never values
    if host == "gcp":
        assert "AWS_SECRET_ACCESS_KEY = { secret = var.aws_secret_access_key_secret" in watcher
    else:
        assert (
            "AWS_SECRET_ACCESS_KEY = { key_vault_id = var.watched_credentials_key_vault_id, "
            "secret_name = var.aws_secret_access_key_secret }"
        ) in watcher
    variables = (out / "watcher" / "variables.tf").read_text()
    assert 'variable "aws_secret_access_key_secret"' in variables
    requirements = (out / "watcher" / "function" / "requirements.txt").read_text()
    assert f"cronwarden[{host}]==" in requirements and "boto3>=" in requirements


@pytest.mark.parametrize("jobs_cloud", ["gcp", "azure"])
def test_a_watcher_on_aws_watches_jobs_elsewhere_without_a_secret_in_terraform(
    tmp_path: Path, jobs_cloud: str
) -> None:
    """``--provider gcp|azure --watcher-provider aws``: ``watcher/`` is a valid AWS root module
    with only the watcher function, its schedule and alarms; the jobs' side renders the access
    (GCP: a workload identity pool trusting the watcher's role; Azure: role assignments of a
    service principal whose secret is only referenced by ARN)."""
    from cronwarden.deploy.render import render

    result = render(jobs_cloud, str(QUARTER), tmp_path / "out", watcher_provider="aws")
    out, watcher = result.out, result.out / "watcher"
    assert result.roots == (out, watcher)
    main = " ".join((watcher / "main.tf").read_text().split())
    assert 'functions = ["watcher"]' in main and "with_jobs = false" in main
    assert 'watcher_function_name = "cronwarden-watcher"' in main  # errors/silence alarms
    assert f'CRONWARDEN_PROVIDER = "{jobs_cloud}"' in main
    assert "table_arn" not in main and "queue_arn" not in main  # no AWS state here
    assert "make_handlers(jobs_module)" in (watcher / "function" / "handler.py").read_text()
    jobs_main = " ".join((out / "main.tf").read_text().split())
    if jobs_cloud == "gcp":
        assert 'CRONWARDEN_GCP_WIF_SOURCE = "aws"' in main and "secret_arns = []" in main
        assert "CRONWARDEN_AWS_SECRET_ENVIRONMENT" not in main
        assert 'source = "./modules/gcp/aws-reader"' in jobs_main
        reader = (out / "modules/gcp/aws-reader/main.tf").read_text()
        assert "aws {" in reader and "attribute.aws_role ==" in reader
        assert "google_service_account_key" not in reader
        assert "external_watcher_credential_config" in (out / "outputs.tf").read_text()
        assert 'variable "gcp_watcher_audience"' not in (watcher / "variables.tf").read_text()
    else:
        assert "secret_arns = [var.azure_client_secret_arn]" in main
        assert (
            "CRONWARDEN_AWS_SECRET_ENVIRONMENT = jsonencode({ AZURE_CLIENT_SECRET = "
            "var.azure_client_secret_arn })"
        ) in main
        assert 'source = "./modules/azure/external-principal"' in jobs_main
        assert "gcp_watcher" not in (out / "variables.tf").read_text()
        assert "secretsmanager create-secret" in (watcher / "README.md").read_text()
    for path in out.rglob("*.tf"):  # nothing secret nor secret-creating is rendered
        text = path.read_text()
        for word in ("aws_iam_access_key", "azuread_application_password", '_key" {'):
            assert word not in text, (path, word)
    env = _terraform(watcher, tmp_path)
    _tf(watcher, env, "fmt", "-check", "-recursive")
    _tf(watcher, env, "init", "-input=false", "-backend=false")
    assert "Success" in _tf(watcher, env, "validate")


def _terraform(folder: Path, tmp_path: Path) -> dict[str, str]:
    mirror = find_mirror()
    assert TERRAFORM and mirror, "terraform and the offline AWS provider mirror are needed"
    config = write_cli_config(tmp_path / "cli.tfrc", mirror)
    return {
        **os.environ,
        "TF_CLI_CONFIG_FILE": str(config),
        "CHECKPOINT_DISABLE": "1",
        "TF_IN_AUTOMATION": "1",
    }


def _tf(folder: Path, env: dict[str, str], *args: str, ok: tuple[int, ...] = (0,)) -> str:
    done = subprocess.run(
        ["terraform", *args, "-no-color"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in ok, f"terraform {args[0]}:\n{done.stdout[-3000:]}{done.stderr}"
    return done.stdout


@pytest.mark.parametrize("watcher", [None, "gcp"])
def test_rendered_module_is_formatted_and_valid(tmp_path: Path, watcher: str | None) -> None:
    out = tmp_path / "out"
    _render(out, EXAMPLE, *(["--watcher-provider", watcher] if watcher else []))
    env = _terraform(out, tmp_path)
    _tf(out, env, "fmt", "-check", "-recursive")
    _tf(out, env, "init", "-input=false", "-backend=false")
    assert "Success" in _tf(out, env, "validate")


@pytest.mark.slow
@pytest.mark.aws
def test_terraform_apply_plan_destroy_against_moto(tmp_path: Path, moto_server: MotoServer) -> None:
    out = tmp_path / "out"
    _render(out, EXAMPLE, "--name", "cwapply")
    (out / "moto_override.tf").write_text(moto_override(moto_server.endpoint))
    env = _terraform(out, tmp_path)
    var = f"-var=endpoint_url={moto_server.endpoint}"
    _tf(out, env, "init", "-input=false")
    _tf(out, env, "validate")
    started = time.monotonic()
    _tf(out, env, "apply", "-auto-approve", "-input=false", var)
    print(f"terraform apply against moto: {time.monotonic() - started:.1f}s")
    # What was applied is what the adapter expects.
    dynamodb, sqs = moto_server.client("dynamodb"), moto_server.client("sqs")
    table = dynamodb.describe_table(TableName="cwapply-state")["Table"]
    indexes = {i["IndexName"] for i in table["GlobalSecondaryIndexes"]}
    assert indexes == {INDEX, *DUE_INDEXES.values()}  # by-kind, and the watcher's due indexes
    ttl = dynamodb.describe_time_to_live(TableName="cwapply-state")["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "ttl"
    url = sqs.get_queue_url(QueueName="cwapply-runs")["QueueUrl"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (
        '"maxReceiveCount": 6' in attrs["RedrivePolicy"]
        or '"maxReceiveCount":6' in attrs["RedrivePolicy"]
    )
    assert attrs["MessageRetentionPeriod"] == "1209600"
    scheduler = moto_server.client("scheduler")
    schedule = scheduler.get_schedule(Name="cwapply-nightly-export", GroupName="cwapply")
    assert schedule["ScheduleExpression"] == "cron(0 0,1 * * ? *)"
    assert schedule["Target"]["DeadLetterConfig"]["Arn"].endswith(":cwapply-schedules-dlq")
    # A second plan shows no changes.
    _tf(out, env, "plan", "-detailed-exitcode", "-input=false", var)
    _tf(out, env, "destroy", "-auto-approve", "-input=false", var)
    assert "cwapply-state" not in dynamodb.list_tables()["TableNames"]


def test_cli_lists_aws_among_the_deploy_providers() -> None:
    with pytest.raises(SystemExit) as info:
        cli_main(["deploy", "render", "--help"])
    assert info.value.code == 0
