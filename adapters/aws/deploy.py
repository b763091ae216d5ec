"""The AWS renderer of ``cronwarden deploy render`` (registered as ``aws`` in
:mod:`cronwarden.deploy.renderers`): a Terraform root module and the Lambda package.

Output (``<out>``)::

    README.md                  what was rendered, the per-job table, the commands to run
    versions.tf variables.tf main.tf outputs.tf terraform.tfvars.example
    modules/aws/{state,queue,functions,schedules,monitoring}   copied from deployments/
    function/                  handler.py, requirements.txt, the job module
    function.zip               the same, zipped reproducibly (install the requirements into
                               function/ and re-zip before a real deployment: see README.md)

What the root module creates: the DynamoDB table (TTL, point-in-time recovery, the ``by-kind``
index and the watcher's ``by-due-at`` / ``by-watch-due`` indexes), the run queue and its DLQ
(14 days, redrive policy with ``maxReceiveCount`` from the jobs' retry policies), the three
Lambda functions with one least-privilege role and log groups with retention, the worker's
event source mapping (partial batch responses, batch size 1), one EventBridge schedule per job
in UTC (see :mod:`.schedules` for why) with a retry policy and its own DLQ, the watcher's
schedule, and CloudWatch alarms on both DLQs to an SNS topic. Nothing secret is rendered:
credentials come from the roles.

Refused at render time: a job whose max runtime plus the margin exceeds Lambda's 900 s (run the
pull worker ``cronwarden run --provider aws`` on ECS/Fargate for such jobs), and crons AWS
cannot express (both day fields restricted).

A watcher on AWS for jobs in another cloud (``--provider gcp|azure --watcher-provider aws``):
``watcher/`` is a root module with only the watcher function, its schedule and alarms on its
alerts, errors and silence (:func:`watcher_root`). It reads GCP by workload identity
federation from its role (no key) and Azure as a service principal whose secret lives in
Secrets Manager, read at cold start by reference (:mod:`.secrets`).

A watcher in another cloud (``--watcher-provider gcp|azure``): the root module then runs no
watcher; it creates an IAM user (``modules/aws/external-reader``: the table and a peek at the
DLQ, nothing else) and no access key. The key is created outside Terraform and kept in the
watcher cloud's secret store; the watcher reads it by reference (Secret Manager secret
environment on GCP, Key Vault references on Azure), so it never enters Terraform.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from cronwarden.deploy import hcl
from cronwarden.deploy import renderers as rr
from cronwarden.deploy.package import JobSource, requirements
from cronwarden.deploy.spec import JobSpec, Plan
from cronwarden.jobs.definitions import Job
from cronwarden.model.durations import DurationLike, parse_duration
from cronwarden.model.errors import InvalidJobDefinition

from .functions import LAMBDA_MAX_TIMEOUT
from .schedules import aws_cron, aws_cron_of, tick_input
from .settings import ENV_DEAD_LETTER_QUEUE, ENV_QUEUE, ENV_REGION, ENV_TABLE, AwsSettings

MARGIN_SECONDS = 30  #: added to the longest max runtime for the worker's timeout (capped at 900)
MAX_RUNTIME = LAMBDA_MAX_TIMEOUT
MARKER = ".cronwarden-render"
MODULES = ("state", "queue", "functions", "schedules", "monitoring", "external-reader")
WATCHER_READS = "boto3>=1.34"  #: what a watcher in another cloud needs to read DynamoDB and SQS
#: what a watcher in another cloud reads from its own secret store: env name => variable
#: naming the secret (boto3's default chain reads these names)
WATCHER_SECRETS = {
    "AWS_ACCESS_KEY_ID": "aws_access_key_id_secret",
    "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key_secret",
}
E = hcl.Expr


@dataclass(frozen=True)
class AwsJob:
    """One job as the AWS deployment sees it."""

    name: str
    expression: str  #: ``cron(...)`` in UTC
    input: str  #: the schedule target's input
    max_runtime_seconds: int
    max_attempts: int
    spec: JobSpec


@dataclass(frozen=True)
class AwsRendered:
    out: Path
    plan: Plan
    roots: tuple[Path, ...]
    files: tuple[Path, ...]


def _seconds(value: DurationLike | None, what: str) -> int:
    delta = value if isinstance(value, timedelta) else parse_duration(value or 0, field=what)
    return max(0, int(delta.total_seconds()))


def aws_job(job: Job) -> AwsJob:
    """The :class:`AwsJob` of ``job``; raises :class:`InvalidJobDefinition` naming it."""
    runtime = _seconds(job.max_runtime, f"{job.name}: max_runtime")
    if runtime > MAX_RUNTIME:
        raise InvalidJobDefinition(
            f"job {job.name!r}: max_runtime {runtime}s is over the {MAX_RUNTIME}s a Lambda "
            "invocation can run; run it with the "
            "pull worker instead: `cronwarden run --provider aws --jobs <module>` on a "
            "long-running host (an ECS/Fargate service), with the same queue and table"
        )
    try:
        expression = aws_cron(job)
    except InvalidJobDefinition as exc:
        raise InvalidJobDefinition(f"job {job.name!r}: {exc}") from None
    spec = JobSpec(
        name=job.name,
        cron=job.schedule.cron,
        time_zone=job.schedule.timezone,
        ncrontab_utc="",
        max_runtime_seconds=runtime,
        max_attempts=job.retry.max_attempts,
        min_backoff_seconds=_seconds(job.retry.min_backoff, f"{job.name}: min_backoff"),
        max_backoff_seconds=_seconds(job.retry.max_backoff, f"{job.name}: max_backoff"),
        schedule_setting="",
        description=job.description,
    )
    return AwsJob(job.name, expression, tick_input(job), runtime, job.retry.max_attempts, spec)


def aws_job_of(spec: JobSpec) -> AwsJob:
    """The :class:`AwsJob` of a deployment plan's row; raises :class:`InvalidJobDefinition`
    naming the job when AWS cannot express its cron."""
    expression = aws_cron_of(spec.name, spec.cron, spec.time_zone)
    return AwsJob(
        spec.name,
        expression,
        tick_input(spec.name),
        spec.max_runtime_seconds,
        spec.max_attempts,
        spec,
    )


def names(prefix: str) -> dict[str, str]:
    return {
        "table": f"{prefix}-state",
        "queue": f"{prefix}-runs",
        "dead_letter_queue": f"{prefix}-runs-dlq",
        "schedules_dlq": f"{prefix}-schedules-dlq",
        "external_watcher": f"{prefix}-ext-watcher",
    }


def max_receive_count(jobs: list[AwsJob]) -> int:
    """The redrive policy's ``maxReceiveCount``: the most attempts any job allows, plus one
    receive of slack, so the engine's own dead-letter (with the reason) comes first and SQS only
    catches workers that die before they answer."""
    return min(1000, max(j.max_attempts for j in jobs) + 1)


def worker_timeout(jobs: list[AwsJob]) -> int:
    """The worker function's timeout: the longest max runtime plus the margin, at most 900 s."""
    return min(LAMBDA_MAX_TIMEOUT, max(j.max_runtime_seconds for j in jobs) + MARGIN_SECONDS)


def notes(jobs: list[AwsJob]) -> tuple[str, ...]:
    return tuple(
        f"{j.name}: max_runtime {j.max_runtime_seconds}s leaves less than {MARGIN_SECONDS}s "
        f"before Lambda's {LAMBDA_MAX_TIMEOUT}s limit; a run that uses all of it may be cut "
        "before its completion commit (its lease then lets a redelivery finish the window)"
        for j in jobs
        if j.max_runtime_seconds + MARGIN_SECONDS > LAMBDA_MAX_TIMEOUT
    )


# -- HCL -----------------------------------------------------------------------------------------
def versions() -> list[hcl.Item]:
    return [
        hcl.Block(
            "terraform",
            (),
            [
                hcl.Attr("required_version", ">= 1.5"),
                hcl.Block(
                    "required_providers",
                    (),
                    [
                        hcl.Attr(
                            "aws",
                            {"source": "hashicorp/aws", "version": ">= 5.0, < 7.0"},
                        )
                    ],
                ),
            ],
        ),
        hcl.Block("provider", ("aws",), [hcl.Attr("region", E("var.region"))]),
    ]


def _variable(name: str, type_: str, description: str, default: Any = ...) -> hcl.Block:
    body: list[hcl.Item] = [hcl.Attr("description", description), hcl.Attr("type", E(type_))]
    if default is not ...:
        body.append(hcl.Attr("default", default))
    return hcl.Block("variable", (name,), body)


def on_ecs(jobs: list[AwsJob]) -> bool:
    """The worker runs on ECS/Fargate (the pull worker): some job's max runtime is over what a
    Lambda invocation can run."""
    return any(j.max_runtime_seconds > MAX_RUNTIME for j in jobs)


def ecs_variables() -> list[hcl.Item]:
    """The variables of the ECS/Fargate pull worker."""
    return [
        _variable(
            "worker_image",
            "string",
            "Container image of the pull worker, built from function/ (README.md).",
        ),
        _variable("worker_count", "number", "Running worker tasks.", 2),
        _variable("subnet_ids", "list(string)", "Private subnets of the worker tasks."),
        _variable(
            "security_group_ids",
            "list(string)",
            "Security groups of the worker tasks (egress to the AWS APIs only).",
        ),
    ]


def variables(ecs: bool = False) -> list[hcl.Item]:
    return [*_variables(), *(ecs_variables() if ecs else [])]


def _variables() -> list[hcl.Item]:
    return [
        _variable("region", "string", "AWS region.", "us-east-1"),
        _variable(
            "package",
            "string",
            "The Lambda package zip (requirements installed into it: see README.md).",
            "function.zip",
        ),
        _variable("lambda_runtime", "string", "Lambda Python runtime.", "python3.11"),
        _variable("memory_mb", "number", "Memory of each function.", 512),
        _variable("log_retention_days", "number", "CloudWatch Logs retention.", 30),
        _variable("alert_email", "string", "Subscribed to the alerts topic when set.", ""),
        _variable(
            "webhook_secret_arn",
            "string",
            "Secrets Manager secret holding the watcher's webhook URL (optional).",
            "",
        ),
        _variable(
            "endpoint_url",
            "string",
            "One endpoint for every AWS API, for local stacks only (empty on AWS).",
            "",
        ),
    ]


def environment(prefix: str, jobs: list[AwsJob]) -> dict[str, Any]:
    """The functions' environment: :class:`AwsSettings` as rendered, region from Lambda."""
    n = names(prefix)
    settings = AwsSettings(
        table=n["table"],
        queue=n["queue"],
        dead_letter_queue=n["dead_letter_queue"],
        max_receive_count=max_receive_count(jobs),
        schedule_group=prefix,  # the schedules module's group; names are <prefix>-<job>
    )
    env: dict[str, Any] = {"CRONWARDEN_PROVIDER": "aws"}
    env.update({k: v for k, v in settings.to_env().items() if k != "CRONWARDEN_AWS_REGION"})
    env["CRONWARDEN_SQS_QUEUE_URL"] = E("module.queue.queue_url")
    env["CRONWARDEN_SQS_DEAD_LETTER_QUEUE_URL"] = E("module.queue.dead_letter_queue_url")
    return env


def main(
    prefix: str, jobs: list[AwsJob], *, watcher_here: bool = True, jobs_module: str = ""
) -> list[hcl.Item]:
    """``main.tf``; without ``watcher_here`` the watcher runs in another cloud: no watcher
    function nor schedule here, and the IAM user it reads the jobs' state as. When a job runs
    longer than Lambda allows (:func:`on_ecs`) the worker is the ECS/Fargate pull worker
    running ``jobs_module``, not a function."""
    n = names(prefix)
    timeout = worker_timeout(jobs)
    ecs = on_ecs(jobs)
    roles = [r for r in ("trigger", "worker", "watcher") if (r != "watcher" or watcher_here)]
    if ecs:
        roles.remove("worker")
    env = hcl.render([hcl.Attr("x", environment(prefix, jobs))]).strip()[len("x = ") :]
    return [
        hcl.Comment(
            "Rendered by `cronwarden deploy render --provider aws`; re-rendering replaces it."
        ),
        hcl.Block(
            "locals",
            (),
            [
                hcl.Attr(
                    "jobs",
                    {j.name: {"expression": j.expression, "input": j.input} for j in jobs},
                ),
                hcl.Attr(
                    "environment",
                    E(
                        f'merge({_indent(env)}, var.endpoint_url == "" ? {{}} : '
                        "{ CRONWARDEN_AWS_ENDPOINT_URL = var.endpoint_url })"
                    ),
                ),
            ],
        ),
        hcl.Block(
            "module",
            ("state",),
            [hcl.Attr("source", "./modules/aws/state"), hcl.Attr("table_name", n["table"])],
        ),
        hcl.Block(
            "module",
            ("queue",),
            [
                hcl.Attr("source", "./modules/aws/queue"),
                hcl.Attr("queue_name", n["queue"]),
                hcl.Attr("dead_letter_queue_name", n["dead_letter_queue"]),
                hcl.Attr("max_receive_count", max_receive_count(jobs)),
                hcl.Attr("visibility_timeout_seconds", timeout),
            ],
        ),
        hcl.Block(
            "module",
            ("functions",),
            [
                hcl.Attr("source", "./modules/aws/functions"),
                hcl.Attr("prefix", prefix),
                hcl.Attr("package", E("var.package")),
                hcl.Attr("runtime", E("var.lambda_runtime")),
                hcl.Attr("memory_mb", E("var.memory_mb")),
                hcl.Attr("worker_timeout_seconds", timeout),
                hcl.Attr("environment", E("local.environment")),
                hcl.Attr("table_arn", E("module.state.table_arn")),
                hcl.Attr("queue_arn", E("module.queue.queue_arn")),
                hcl.Attr("dead_letter_queue_arn", E("module.queue.dead_letter_queue_arn")),
                hcl.Attr("log_retention_days", E("var.log_retention_days")),
                *_watcher_functions(roles, watcher_here),
            ],
        ),
        hcl.Block(
            "module",
            ("schedules",),
            [
                hcl.Attr("source", "./modules/aws/schedules"),
                hcl.Attr("prefix", prefix),
                hcl.Attr("jobs", E("local.jobs")),
                hcl.Attr("trigger_arn", E('module.functions.function_arns["trigger"]')),
                *(
                    [hcl.Attr("watcher_arn", E('module.functions.function_arns["watcher"]'))]
                    if watcher_here
                    else [hcl.Attr("with_watcher", False)]
                ),
            ],
        ),
        hcl.Block(
            "module",
            ("monitoring",),
            [
                hcl.Attr("source", "./modules/aws/monitoring"),
                hcl.Attr("prefix", prefix),
                hcl.Attr("dead_letter_queues", [n["dead_letter_queue"], n["schedules_dlq"]]),
                hcl.Attr("alert_email", E("var.alert_email")),
            ],
        ),
        *([] if watcher_here else [_external_reader(n)]),
        *([_pull_worker(prefix, jobs_module)] if ecs else []),
    ]


def _pull_worker(prefix: str, jobs_module: str) -> hcl.Block:
    return hcl.Block(
        "module",
        ("pull_worker",),
        [
            hcl.Attr("source", "./modules/aws/pull-worker"),
            hcl.Attr("prefix", prefix),
            hcl.Attr("image", E("var.worker_image")),
            hcl.Attr("jobs_module", jobs_module),
            hcl.Attr("desired_count", E("var.worker_count")),
            hcl.Attr("subnet_ids", E("var.subnet_ids")),
            hcl.Attr("security_group_ids", E("var.security_group_ids")),
            hcl.Attr("environment", E("local.environment")),
            hcl.Attr("table_arn", E("module.state.table_arn")),
            hcl.Attr("queue_arn", E("module.queue.queue_arn")),
            hcl.Attr("dead_letter_queue_arn", E("module.queue.dead_letter_queue_arn")),
            hcl.Attr("log_retention_days", E("var.log_retention_days")),
        ],
    )


def _watcher_functions(roles: list[str], watcher_here: bool) -> list[hcl.Item]:
    functions: list[hcl.Item] = []
    if roles != ["trigger", "worker", "watcher"]:
        functions.append(hcl.Attr("functions", roles))
    if watcher_here:
        functions.append(hcl.Attr("webhook_secret_arn", E("var.webhook_secret_arn")))
    return functions


def _external_reader(n: dict[str, str]) -> hcl.Block:
    return hcl.Block(
        "module",
        ("external_watcher",),
        [
            hcl.Attr("source", "./modules/aws/external-reader"),
            hcl.Attr("name", n["external_watcher"]),
            hcl.Attr("table_arn", E("module.state.table_arn")),
            hcl.Attr("dead_letter_queue_arn", E("module.queue.dead_letter_queue_arn")),
        ],
    )


def _indent(text: str) -> str:
    return text.replace("\n", "\n  ")


def outputs(watcher_here: bool = True, ecs: bool = False) -> list[hcl.Item]:
    def out(name: str, value: str, description: str) -> hcl.Block:
        return hcl.Block(
            "output", (name,), [hcl.Attr("description", description), hcl.Attr("value", E(value))]
        )

    return [
        out("table_name", "module.state.table_name", "DynamoDB state table."),
        out("queue_url", "module.queue.queue_url", "Run request queue."),
        out("dead_letter_queue_url", "module.queue.dead_letter_queue_url", "Its DLQ."),
        out("function_arns", "module.functions.function_arns", "trigger, worker, watcher."),
        out("schedule_names", "module.schedules.schedule_names", "One per job."),
        out("alerts_topic_arn", "module.monitoring.alerts_topic_arn", "Dead-letter alarms."),
        *(
            [out("pull_worker_service", "module.pull_worker.service_name", "ECS pull worker.")]
            if ecs
            else []
        ),
        *(
            []
            if watcher_here
            else [
                out(
                    "external_watcher_user",
                    "module.external_watcher.user_name",
                    "IAM user of the watcher in the other cloud (create its key outside "
                    "Terraform: README.md).",
                )
            ]
        ),
    ]


# -- package and files ---------------------------------------------------------------------------
def handler_module(source: JobSource) -> str:
    return (
        '"""AWS Lambda entry points, rendered by `cronwarden deploy render --provider aws`.\n'
        "\n"
        "Handlers: handler.trigger (EventBridge Scheduler), handler.worker (SQS event source\n"
        "mapping, partial batch responses), handler.watcher (its own schedule).\n"
        '"""\n'
        "\n"
        "from cronwarden.adapters.aws.functions import make_handlers\n"
        "\n"
        f"import {source.import_name} as jobs_module\n"
        "\n"
        "trigger, worker, watcher = make_handlers(jobs_module)\n"
    )


def write_package(
    folder: Path, source: JobSource, version: str, wheel: Path | None, extra: str
) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    wheel_name = None
    if wheel is not None:
        wheel_name = wheel.name
        shutil.copyfile(wheel, folder / wheel_name)
    (folder / "requirements.txt").write_text(
        requirements("aws", version, wheel_name, extra), encoding="utf-8"
    )
    (folder / "handler.py").write_text(handler_module(source), encoding="utf-8")
    if source.is_package:
        shutil.copytree(
            source.path,
            folder / source.path.name,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
    else:
        shutil.copyfile(source.path, folder / f"{source.import_name}.py")


def readme(prefix: str, jobs: list[AwsJob]) -> str:
    n = names(prefix)
    rows = "\n".join(
        f"| `{j.name}` | `{j.spec.cron}` ({j.spec.time_zone}) | `{j.expression}` UTC | "
        f"{j.max_runtime_seconds} s | {j.max_attempts} |"
        for j in jobs
    )
    return f"""# cronwarden on AWS ({prefix})

Rendered by `cronwarden deploy render --provider aws`. Re-rendering replaces the generated files.

| job | cron (zone) | EventBridge schedule | max runtime | attempts |
|---|---|---|---|---|
{rows}

Schedules run in UTC and fire at every UTC instant a local fire time can map to; the trigger
enqueues each window exactly once (DST-correct). The SQS redrive policy dead-letters after
{max_receive_count(jobs)} receives; the worker dead-letters exhausted runs itself, with the reason.

## Deploy

```sh
pip install --target function -r function/requirements.txt   # Lambda installs nothing itself
(cd function && zip -qr ../function.zip .)
terraform init && terraform apply
```

Operate: `cronwarden status|dlq list|dlq redrive --provider aws` with
`CRONWARDEN_DYNAMODB_TABLE={n["table"]}` and `CRONWARDEN_SQS_QUEUE={n["queue"]}`.
"""


def render(
    jobs_target: str,
    out: Path | str,
    *,
    watcher_provider: str | None = None,
    prefix: str = "cronwarden",
    wheel: Path | str | None = None,
    requirements_file: Path | str | None = None,
) -> AwsRendered:
    """Render the AWS deployment of the jobs in ``jobs_target`` into ``out`` (the driver
    :func:`cronwarden.deploy.render.render` with ``--provider aws``)."""
    from cronwarden.deploy.render import render as render_any

    result = render_any(
        "aws",
        jobs_target,
        out,
        watcher_provider=watcher_provider,
        prefix=prefix,
        wheel=wheel,
        requirements=requirements_file,
    )
    return AwsRendered(result.out, result.plan, result.roots, result.files)


# -- the registered renderer ---------------------------------------------------------------------
def check_job(job: rr.JobLimits) -> list[str]:
    """Lambda's limit: a run must fit in one invocation (900 s). A longer job makes the worker
    the ECS/Fargate pull worker (a note); a thin margin before the limit is a note too."""
    if job.runtime > MAX_RUNTIME:
        return [
            f"{job.name}: max_runtime {job.runtime}s is over the {MAX_RUNTIME}s a Lambda "
            "invocation can run; the worker is rendered as an ECS/Fargate service running the "
            "pull worker (`python -m cronwarden.hosting.pull`) for every job of this deployment"
        ]
    if job.runtime + MARGIN_SECONDS <= LAMBDA_MAX_TIMEOUT:
        return []
    return [
        f"{job.name}: max_runtime {job.runtime}s leaves less than {MARGIN_SECONDS}s "
        f"before Lambda's {LAMBDA_MAX_TIMEOUT}s limit; a run that uses all of it may be cut "
        "before its completion commit (its lease then lets a redelivery finish the window)"
    ]


def _plan_jobs(plan: Plan) -> list[AwsJob]:
    return [aws_job_of(spec) for spec in plan.jobs]


def jobs_root(options: rr.RootOptions) -> rr.TfFiles:
    """The root module running the jobs (and the watcher when ``options.watcher_here``)."""
    jobs = _plan_jobs(options.plan)
    watcher_here = not options.external_watcher
    ecs = on_ecs(jobs)
    module = options.source.import_name if options.source is not None else ""
    return rr.tf_files(
        versions(),
        variables(ecs),
        main(options.prefix, jobs, watcher_here=watcher_here, jobs_module=module),
        outputs(watcher_here, ecs),
    )


WATCHER_EXPRESSION = "rate(5 minutes)"


def watcher_variables(watched: rr.Watched) -> list[hcl.Item]:
    """Variables of the watcher-only AWS root module (then those of the jobs' cloud)."""
    keep = {"region", "package", "lambda_runtime", "memory_mb", "log_retention_days"}
    base = [v for v in _variables() if isinstance(v, hcl.Block) and v.labels[0] in keep]
    return [
        *base,
        _variable(
            "alert_email",
            "string",
            "Subscribed to the alerts topic (the watcher's alerts, errors and silence) when set.",
            "",
        ),
        _variable(
            "webhook_secret_arn",
            "string",
            "Secrets Manager secret holding the watcher's webhook URL (optional).",
            "",
        ),
        _variable(
            "watcher_expression",
            "string",
            "How often the watcher runs (EventBridge Scheduler expression).",
            WATCHER_EXPRESSION,
        ),
        _variable(
            "endpoint_url",
            "string",
            "One endpoint for every AWS API, for local stacks only (empty on AWS).",
            "",
        ),
        *watched.variables,
    ]


def watcher_environment(watched: rr.Watched) -> hcl.Expr:
    """The watcher's environment: the jobs' cloud's settings, the references of the secrets it
    reads at cold start (:data:`cronwarden.adapters.aws.secrets.SECRET_ENVIRONMENT_ENV`: ARNs
    only) and the local endpoint when one is set."""
    from .secrets import SECRET_ENVIRONMENT_ENV

    env = dict(watched.environment)
    if watched.secret_environment:
        refs = ", ".join(f"{k} = var.{v}" for k, v in watched.secret_environment.items())
        env[SECRET_ENVIRONMENT_ENV] = E(f"jsonencode({{ {refs} }})")
    text = hcl.render([hcl.Attr("x", env)]).strip()[len("x = ") :]
    return E(
        f'merge({_indent(text)}, var.endpoint_url == "" ? {{}} : '
        "{ CRONWARDEN_AWS_ENDPOINT_URL = var.endpoint_url })"
    )


def watcher_main(prefix: str, watched: rr.Watched) -> list[hcl.Item]:
    """``main.tf`` of a watcher-only AWS deployment: the watcher function (EventBridge
    Scheduler every ``var.watcher_expression``) reading the jobs' cloud, and alarms on its
    alerts, errors and silence. No table, no queue, no job schedule here."""
    cloud = {"gcp": "GCP", "azure": "Azure"}.get(watched.cloud, watched.cloud)
    how = (
        "It reads their credential\nfrom Secrets Manager at cold start, by reference (the "
        "value never enters Terraform)."
        if watched.secret_environment
        else "It reaches them\nthrough workload identity federation from its own role (no key)."
    )
    secrets = [E(f"var.{v}") for v in watched.secret_environment.values()]
    return [
        hcl.Comment(
            "Rendered by `cronwarden deploy render --watcher-provider aws`: the liveness\n"
            f"watcher of jobs running on {cloud}, outside their failure domain. {how}"
        ),
        hcl.Block("locals", (), [hcl.Attr("environment", watcher_environment(watched))]),
        hcl.Block(
            "module",
            ("functions",),
            [
                hcl.Attr("source", "./modules/aws/functions"),
                hcl.Attr("prefix", prefix),
                hcl.Attr("functions", ["watcher"]),
                hcl.Attr("package", E("var.package")),
                hcl.Attr("runtime", E("var.lambda_runtime")),
                hcl.Attr("memory_mb", E("var.memory_mb")),
                hcl.Attr("worker_timeout_seconds", 60),
                hcl.Attr("environment", E("local.environment")),
                hcl.Attr("secret_arns", secrets),
                hcl.Attr("webhook_secret_arn", E("var.webhook_secret_arn")),
                hcl.Attr("log_retention_days", E("var.log_retention_days")),
            ],
        ),
        hcl.Block(
            "module",
            ("schedules",),
            [
                hcl.Attr("source", "./modules/aws/schedules"),
                hcl.Attr("prefix", prefix),
                hcl.Attr("jobs", {}),
                hcl.Attr("with_jobs", False),
                hcl.Attr("watcher_arn", E('module.functions.function_arns["watcher"]')),
                hcl.Attr("watcher_expression", E("var.watcher_expression")),
            ],
        ),
        hcl.Block(
            "module",
            ("monitoring",),
            [
                hcl.Attr("source", "./modules/aws/monitoring"),
                hcl.Attr("prefix", prefix),
                hcl.Attr("dead_letter_queues", [names(prefix)["schedules_dlq"]]),
                hcl.Attr("alert_email", E("var.alert_email")),
                hcl.Attr("watcher_function_name", f"{prefix}-watcher"),
                hcl.Attr("watcher_log_group", E('module.functions.log_group_names["watcher"]')),
            ],
        ),
    ]


def watcher_outputs() -> list[hcl.Item]:
    def out(name: str, value: str, description: str) -> hcl.Block:
        return hcl.Block(
            "output", (name,), [hcl.Attr("description", description), hcl.Attr("value", E(value))]
        )

    return [
        out("watcher_function_arn", 'module.functions.function_arns["watcher"]', "The watcher."),
        out(
            "watcher_role_name",
            "module.functions.role_name",
            "Its execution role (what the jobs' cloud trusts).",
        ),
        out("watcher_role_arn", "module.functions.role_arn", "The same, as an ARN."),
        out("alerts_topic_arn", "module.monitoring.alerts_topic_arn", "Watcher alarms."),
    ]


def watcher_root(prefix: str, watched: rr.Watched) -> rr.TfFiles:
    """The root module running only the watcher of jobs on another cloud (``watched``): a
    Lambda function on its own EventBridge schedule, with alarms on its alerts, errors and
    silence to an SNS topic."""
    return rr.tf_files(
        versions(), watcher_variables(watched), watcher_main(prefix, watched), watcher_outputs()
    )


def external_watcher_environment(prefix: str) -> dict[str, Any]:
    """Environment of a watcher in another cloud watching the jobs on AWS (configuration only;
    the key comes from :data:`WATCHER_SECRETS` by reference)."""
    n = names(prefix)
    return {
        "CRONWARDEN_PROVIDER": "aws",
        ENV_REGION: E("var.aws_region"),
        ENV_TABLE: n["table"],
        ENV_QUEUE: n["queue"],
        ENV_DEAD_LETTER_QUEUE: n["dead_letter_queue"],
    }


def external_watcher_variables() -> list[hcl.Item]:
    """The variables :func:`external_watcher_environment` and :data:`WATCHER_SECRETS` use."""
    return [
        _variable("aws_region", "string", "AWS region of the jobs.", "us-east-1"),
        _variable(
            "aws_access_key_id_secret",
            "string",
            "Name of the secret (in this cloud's secret store) holding the access key id of "
            "the jobs' external_watcher_user (README.md).",
            "cronwarden-aws-access-key-id",
        ),
        _variable(
            "aws_secret_access_key_secret",
            "string",
            "Name of the secret holding that key's secret access key.",
            "cronwarden-aws-secret-access-key",
        ),
    ]


def package_files(plan: Plan, source: JobSource, runs_worker: bool) -> rr.PackageFiles:
    """The Lambda package's entry module (handler.trigger, handler.worker, handler.watcher)."""
    return rr.PackageFiles({"handler.py": handler_module(source)})


_EXTERNAL_WATCHER = """
## Watcher in the other cloud

The liveness watcher is rendered into `watcher/`; this module runs no watcher. It creates the
IAM user `{user}` (read and write the table, peek the run DLQ; nothing else) and **no access
key**: a key in Terraform would land in the state. Create one and keep it only in the watcher
cloud's secret store, which the watcher reads by reference:

```sh
aws iam create-access-key --user-name {user} > key.json   # then store both fields, delete key.json
```

GCP: Secret Manager secrets `cronwarden-aws-access-key-id` and `cronwarden-aws-secret-access-key`
(the watcher function's secret environment). Azure: secrets of those names in the Key Vault
named by `aws_credentials_key_vault_id` (Key Vault references). Rotate by creating a second
key, updating the secrets, then deleting the first.
"""


_PULL_WORKER = """
## Pull worker on ECS/Fargate

A job runs longer than a Lambda invocation can (900 s), so the worker is not a function: the
ECS service `{prefix}-pull-worker` (`modules/aws/pull-worker`) runs
`python -m cronwarden.hosting.pull --jobs {module}` in `var.worker_count` Fargate tasks, in the
private subnets you name (`subnet_ids`, `security_group_ids`: egress to the AWS APIs). A received
run request stays invisible for the whole lease (the worker extends its visibility while the run
renews) and is settled as the Lambda worker would; SIGTERM asks running handlers to stop and
their requests are retried. Build the image from `function/` and push it before applying:

```sh
cat > Dockerfile <<'DOCKER'
FROM python:3.11-slim
COPY function/ /app
WORKDIR /app
RUN pip install --no-cache-dir -r requirements.txt
CMD ["python", "-m", "cronwarden.hosting.pull", "--jobs", "{module}", "--threads", "2"]
DOCKER
docker build -t "$REPO:$(git rev-parse --short HEAD)" . && docker push "$REPO:..."
echo 'worker_image = "<that image>"' >> terraform.tfvars
```

The trigger and the watcher stay Lambda functions.
"""


_WATCHER_ONLY = """# cronwarden liveness watcher on AWS ({prefix}), watching jobs on {cloud}

Rendered by `cronwarden deploy render --watcher-provider aws`. The Lambda function
`{prefix}-watcher` runs every `var.watcher_expression` (EventBridge Scheduler; default
`{expression}`), reads the jobs' status records and dead-letter depth on {cloud}, and alerts
(logs, the webhook of `webhook_secret_arn`). CloudWatch alarms page the SNS topic
`{prefix}-alerts` when it raises an alert, when it fails (it cannot read {cloud}: the jobs are
unwatched) and when it is not invoked for 15 minutes.
{access}
## Deploy

```sh
pip install --target function -r function/requirements.txt   # Lambda installs nothing itself
(cd function && zip -qr ../function.zip .)
terraform init && terraform apply
```
"""

_GCP_ACCESS = """
## Access to GCP: workload identity federation (no key)

The GCP root module (`..`) creates a workload identity pool with an AWS provider trusting
`aws_account_id`, and lets only this function's role (`watcher_role_name`, default
`{prefix}-functions`) impersonate a read-only service account. The function signs an STS
`GetCallerIdentity` request with its role's short-lived credentials (the Lambda environment's
`AWS_ACCESS_KEY_ID`, `AWS_SESSION_TOKEN`, `AWS_REGION`), Google STS exchanges it: no key exists
anywhere. Apply the GCP root first, then set here:

```hcl
gcp_project                    = "<project>"
gcp_workload_identity_provider = "<output external_watcher_provider>"
gcp_watcher_service_account    = "<output external_watcher_service_account>"
```

(`external_watcher_credential_config` is the same configuration as a credential file, for
`gcloud`/other tools.)
"""

_AZURE_ACCESS = """
## Access to Azure: a service principal, its secret in Secrets Manager (by reference)

A Lambda role has no OIDC token that Entra ID could federate, so the watcher signs in as a
service principal. Create it and its secret outside Terraform (a secret created by Terraform
would be in the state) and keep the secret only in AWS Secrets Manager:

```sh
az ad sp create-for-rbac --name {prefix}-aws-watcher --years 1 > sp.json   # no role here
aws secretsmanager create-secret --name {prefix}/azure-watcher-secret \
    --secret-string "$(jq -r .password sp.json)" && rm sp.json
```

The Azure root module (`..`) gives that principal (`aws_watcher_principal_id`: `az ad sp show
--id <appId> --query id`) Storage Table Data Contributor on the storage account and Service Bus
Data Receiver on the queue, nothing else. Here set `azure_tenant_id`, `azure_watcher_client_id`
(the appId), `azure_storage_account`, `azure_servicebus_namespace` and
`azure_client_secret_arn` (the secret's ARN: the only thing Terraform sees). The function's role
may read that one secret; it is read at cold start into `AZURE_CLIENT_SECRET`. Rotate with
`az ad app credential reset --append`, `aws secretsmanager put-secret-value`, then delete the old
credential (running functions pick the new one up at their next cold start).
"""


def readme_of(plan: Plan, source: JobSource, options: rr.RootOptions) -> str:
    """README.md of the AWS root module."""
    if options.watcher_only and options.watched is not None:
        cloud = options.watched.name
        access = {"gcp": _GCP_ACCESS, "azure": _AZURE_ACCESS}.get(cloud, "")
        return _WATCHER_ONLY.format(
            prefix=options.prefix,
            cloud={"gcp": "GCP", "azure": "Azure"}.get(cloud, cloud),
            expression=WATCHER_EXPRESSION,
            access=access.format(prefix=options.prefix),
        )
    jobs = _plan_jobs(plan)
    text = readme(options.prefix, jobs)
    if on_ecs(jobs):
        text += _PULL_WORKER.format(prefix=options.prefix, module=source.import_name)
    if options.external_watcher:
        text += _EXTERNAL_WATCHER.format(user=names(options.prefix)["external_watcher"])
    return text


def tfvars_example(options: rr.RootOptions) -> str:
    text = 'region = "us-east-1"\n# alert_email = "oncall@example.com"\n'
    if options.watcher_only and options.watched is not None:
        if options.watched.name == "gcp":
            text += (
                'gcp_project = "my-project"\n'
                'gcp_workload_identity_provider = "projects/123/locations/global/'
                'workloadIdentityPools/cronwarden-ext-watcher/providers/aws"\n'
                'gcp_watcher_service_account = "cronwarden-ext-watcher@my-project.iam.'
                'gserviceaccount.com"\n'
            )
        elif options.watched.name == "azure":
            text += (
                'azure_tenant_id = "00000000-0000-0000-0000-000000000000"\n'
                'azure_watcher_client_id = "00000000-0000-0000-0000-000000000000"\n'
                'azure_storage_account = "cronwardenxyz"\n'
                'azure_servicebus_namespace = "cronwarden-xyz.servicebus.windows.net"\n'
                'azure_client_secret_arn = "arn:aws:secretsmanager:us-east-1:123456789012:'
                'secret:cronwarden/azure-watcher-secret-AbCdEf"\n'
            )
    return text


RENDERER = rr.CloudRenderer(
    "aws",
    jobs_root,
    watcher_root,
    watcher_host="gcp",
    watcher_variables=external_watcher_variables,
    watcher_environment=external_watcher_environment,
    check_job=check_job,
    check_schedule=aws_cron_of,
    package=package_files,
    watcher_hosts=("azure",),
    watcher_secrets=lambda: dict(WATCHER_SECRETS),
    watcher_requirements=(WATCHER_READS,),
    readme=readme_of,
    tfvars_example=tfvars_example,
)


__all__ = [
    "MAX_RUNTIME",
    "RENDERER",
    "AwsJob",
    "AwsRendered",
    "aws_job",
    "aws_job_of",
    "max_receive_count",
    "render",
]
