"""The GCP renderer of ``cronwarden deploy render``: which Terraform modules under ``modules/``
the GCP root module composes, with what values (registered as ``gcp`` in
:mod:`cronwarden.deploy.renderers`).

Flow (DESIGN §4)::

    Cloud Scheduler job (per job, in its time zone) ──► <name>-schedule topic
        ──► <name>-trigger push subscription (OIDC, DLQ) ──► trigger function
            ──► <name>-runs topic ──► <name>-worker push subscription (OIDC, DLQ, retry policy)
                ──► worker function ──► Firestore
    Cloud Scheduler (watcher, every 5 min, OIDC) ──► watcher function
    <name>-runs-dead-letter topic ──► <name>-worker-dead-letter subscription ──► alert policy
    <name>-schedule-dead-letter topic ──► <name>-trigger-dead-letter subscription ──► alert policy

Dead ticks have their own dead-letter topic: a tick is not a run request (redriving one to the
runs topic would only be dead-lettered again by the worker), and a lost tick is recovered by
catch-up, ``cronwarden trigger --window`` or ``cronwarden backfill``, not by redrive. So the run
dead-letter subscription holds only what ``cronwarden dlq redrive`` can fix.

Names follow the GCP adapter's defaults for the prefix ``cronwarden`` (``cronwarden-runs``,
``cronwarden-worker``, ``<topic>-dead-letter``); the functions get them as environment variables
(see :func:`environment`; their names are the ``ENV_*`` constants below, the only place this
renderer spells them). The watcher's webhook URL is a credential: it reaches the watcher
function as a Secret Manager secret environment variable (``webhook_secret``), never as a
Terraform value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cronwarden.deploy import builder as tf
from cronwarden.deploy import renderers as rr
from cronwarden.deploy.hcl import Attr, Block, Comment, Expr, Item
from cronwarden.deploy.package import JobSource, entry_module
from cronwarden.deploy.renderers import PROVIDER_ENV as ENV_PROVIDER
from cronwarden.deploy.spec import MARGIN_SECONDS, Plan
from cronwarden.hosting import WEBHOOK_ENV
from cronwarden.model.errors import InvalidJobDefinition

from . import settings

# --- the environment the rendered functions read (GcpProvider.from_env) -----------------------
ENV_PROJECT = settings.PROJECT_ENV
ENV_TOPIC = settings.TOPIC_ENV
ENV_SUBSCRIPTION = settings.SUBSCRIPTION_ENV
ENV_DEAD_LETTER_TOPIC = settings.DEAD_LETTER_TOPIC_ENV
ENV_DEAD_LETTER_SUBSCRIPTION = settings.DEAD_LETTER_SUBSCRIPTION_ENV
ENV_MAX_DELIVERIES = settings.MAX_DELIVERIES_ENV
ENV_ACK_DEADLINE = settings.ACK_DEADLINE_ENV
ENV_CREATE_MISSING = settings.CREATE_MISSING_ENV
ENV_FIRESTORE_DATABASE = settings.FIRESTORE_DATABASE_ENV
ENV_FIRESTORE_PREFIX = settings.FIRESTORE_PREFIX_ENV
ENV_WIF_PROVIDER = settings.WIF_PROVIDER_ENV  #: a reader outside GCP (federation)
ENV_SERVICE_ACCOUNT = settings.SERVICE_ACCOUNT_ENV
ENV_WIF_AUDIENCE = settings.WIF_AUDIENCE_ENV
FIRESTORE_PREFIX = "cw_"

PUBSUB_MIN_ATTEMPTS, PUBSUB_MAX_ATTEMPTS = 5, 100
PUBSUB_MAX_BACKOFF = 600
PUBSUB_MAX_ACK_DEADLINE = 600
#: the longest max runtime a push delivery carries: its ack deadline, less the margin
GCP_PUSH_MAX_RUNTIME = PUBSUB_MAX_ACK_DEADLINE - MARGIN_SECONDS

GOOGLE_VERSION = ">= 6.0, < 8.0"
APIS = (
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudscheduler.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "storage.googleapis.com",
    "artifactregistry.googleapis.com",
)
_APIS_READY = [Expr("google_project_service.apis")]


def names(prefix: str) -> dict[str, str]:
    """Resource names for a deployment named ``prefix``."""
    return {
        "schedule_topic": f"{prefix}-schedule",
        "trigger_subscription": f"{prefix}-trigger",
        "topic": f"{prefix}-runs",
        "subscription": f"{prefix}-worker",
        "dead_letter_topic": f"{prefix}-runs-dead-letter",
        "dead_letter_subscription": f"{prefix}-worker-dead-letter",
        "tick_dead_letter_topic": f"{prefix}-schedule-dead-letter",
        "tick_dead_letter_subscription": f"{prefix}-trigger-dead-letter",
        "trigger": f"{prefix}-trigger",
        "worker": f"{prefix}-worker",
        "watcher": f"{prefix}-watcher",
        "push_identity": f"{prefix}-push",
        "scheduler_identity": f"{prefix}-scheduler",
        "external_watcher": f"{prefix}-ext-watcher",
    }


def _queue_environment(prefix: str, project: Expr) -> dict[str, Any]:
    n = names(prefix)
    return {
        ENV_PROVIDER: "gcp",
        ENV_PROJECT: project,
        ENV_TOPIC: n["topic"],
        ENV_SUBSCRIPTION: n["subscription"],
        ENV_DEAD_LETTER_TOPIC: n["dead_letter_topic"],
        ENV_DEAD_LETTER_SUBSCRIPTION: n["dead_letter_subscription"],
    }


def environment(prefix: str) -> dict[str, Any]:
    """Environment of every cronwarden function on GCP (``GcpProvider.from_env``'s names)."""
    return {
        **_queue_environment(prefix, Expr("var.project")),
        ENV_MAX_DELIVERIES: Expr("tostring(module.settings.pubsub.max_delivery_attempts)"),
        ENV_ACK_DEADLINE: Expr("tostring(module.settings.pubsub.ack_deadline_seconds)"),
        ENV_CREATE_MISSING: "false",
        ENV_FIRESTORE_DATABASE: Expr("module.state.database"),
        ENV_FIRESTORE_PREFIX: FIRESTORE_PREFIX,
    }


def trigger_environment(prefix: str) -> dict[str, str]:
    """What the trigger's environment changes: its explicit dead letters (``MalformedTick``)
    go to the tick dead-letter topic, like the broker's for its subscription."""
    n = names(prefix)
    return {
        ENV_DEAD_LETTER_TOPIC: n["tick_dead_letter_topic"],
        ENV_DEAD_LETTER_SUBSCRIPTION: n["tick_dead_letter_subscription"],
    }


def external_watcher_environment(prefix: str) -> dict[str, Any]:
    """Environment of a watcher on Azure that watches the jobs running on GCP: it reaches
    Firestore and the dead-letter subscription by workload identity federation."""
    return {
        **_queue_environment(prefix, Expr("var.gcp_project")),
        ENV_FIRESTORE_DATABASE: Expr("var.gcp_firestore_database"),
        ENV_FIRESTORE_PREFIX: FIRESTORE_PREFIX,
        ENV_WIF_PROVIDER: Expr("var.gcp_workload_identity_provider"),
        ENV_SERVICE_ACCOUNT: Expr("var.gcp_watcher_service_account"),
        ENV_WIF_AUDIENCE: Expr("var.gcp_watcher_audience"),
    }


def external_watcher_variables() -> list[Item]:
    """The variables :func:`external_watcher_environment` references."""
    return [
        tf.variable("gcp_project", "string", "GCP project running the jobs."),
        tf.variable(
            "gcp_firestore_database", "string", "Firestore database id of the jobs.", "(default)"
        ),
        tf.variable(
            "gcp_workload_identity_provider",
            "string",
            "Workload identity provider trusting this app (output external_watcher_provider "
            "of the GCP root module).",
        ),
        tf.variable(
            "gcp_watcher_service_account",
            "string",
            "Service account the watcher impersonates (output external_watcher_service_account).",
        ),
        tf.variable(
            "gcp_watcher_audience",
            "string",
            "Audience of the Entra ID token presented to GCP.",
            "api://cronwarden-watcher",
        ),
    ]


def _webhook_variable() -> Block:
    """``webhook_secret``: the *id* of the secret holding the URL (a URL is refused, so the
    credential cannot land in tfvars or the state by mistake)."""
    return tf.secret_reference_variable(
        "webhook_secret",
        "Secret Manager secret id (in var.project) holding the watcher's webhook URL, "
        f"exposed to the watcher as {WEBHOOK_ENV}; empty: alerts go to the logs only. "
        "Create the secret and its version outside Terraform (README.md): the URL is a "
        "credential and never enters the state.",
        'can(regex("^[A-Za-z0-9_-]{0,255}$", var.webhook_secret))',
        "webhook_secret is the id of a Secret Manager secret (e.g. "
        "cronwarden-webhook), not the URL itself.",
    )


def _webhook_secret() -> Expr:
    """The watcher's ``secret_environment``: the webhook secret when one is named (a ``for``
    expression, so both cases have one map type)."""
    return Expr(
        f"{{ for key, id in {{ {WEBHOOK_ENV} = var.webhook_secret }} : "
        'key => { secret = id, version = "latest" } if id != "" }'
    )


def versions() -> list[Item]:
    return tf.versions(
        "google",
        "hashicorp/google",
        GOOGLE_VERSION,
        tf.refs({"project": "var.project", "region": "var.region"}),
    )


_variable = tf.variable
_LABELS = _variable("labels", "map(string)", "Labels on every resource that takes them.", {})
_WATCHER_SCHEDULE = _variable(
    "watcher_schedule", "string", "How often the liveness watcher runs (cron, UTC).", "*/5 * * * *"
)


def variables(
    external_watcher: bool, watcher_provider: str = "azure", prefix: str = ""
) -> list[Item]:
    items: list[Item] = [
        _variable("project", "string", "GCP project id."),
        _variable(
            "region", "string", "Region of the functions and scheduler jobs.", "europe-west1"
        ),
        _variable("firestore_location", "string", "Firestore location (e.g. eur3, nam5).", "eur3"),
        _variable("firestore_database", "string", "Firestore database id.", "(default)"),
        _variable(
            "create_firestore_database",
            "bool",
            "Create the Firestore database (false if it exists).",
            True,
        ),
        _variable(
            "notification_channels",
            "list(string)",
            "Cloud Monitoring notification channels for the dead-letter alert.",
            [],
        ),
        _WATCHER_SCHEDULE,
        _LABELS,
    ]
    if not external_watcher:
        items.append(_webhook_variable())
    if external_watcher and watcher_provider == "aws":
        items += aws_watcher_variables(prefix or "cronwarden")
    elif external_watcher:
        items += [
            _variable("azure_tenant_id", "string", "Entra ID tenant of the external watcher."),
            _variable(
                "azure_watcher_principal_id",
                "string",
                "Object id of the Azure watcher app's managed identity (output of the watcher "
                "root module).",
            ),
            _variable(
                "azure_watcher_audience",
                "string",
                "Audience of the Entra ID token the Azure watcher presents.",
                "api://cronwarden-watcher",
            ),
        ]
    return items


def aws_watcher_variables(prefix: str) -> list[Item]:
    """The variables of the access a watcher on AWS gets (``modules/gcp/aws-reader``)."""
    return [
        _variable("aws_account_id", "string", "12-digit AWS account running the watcher."),
        _variable(
            "aws_watcher_role_name",
            "string",
            "Execution role of the AWS watcher function (output watcher_role_name of the "
            "watcher root module).",
            f"{prefix}-functions",
        ),
    ]


def _external_reader(prefix: str, watcher_provider: str) -> Block:
    """The access of the watcher in another cloud: workload identity federation, no key."""
    n = names(prefix)
    if watcher_provider == "aws":
        kind = "aws-reader"
        refs = {
            "aws_account_id": "var.aws_account_id",
            "aws_role_name": "var.aws_watcher_role_name",
            "dead_letter_subscription": "module.dead_letter.subscription_name",
        }
    else:
        kind = "external-reader"
        refs = {
            "azure_tenant_id": "var.azure_tenant_id",
            "azure_principal_id": "var.azure_watcher_principal_id",
            "audience": "var.azure_watcher_audience",
            "dead_letter_subscription": "module.dead_letter.subscription_name",
        }
    return _module(
        "external_watcher",
        kind,
        [
            Attr("project_number", Expr("data.google_project.this.number")),
            Attr("name", n["external_watcher"]),
            *tf.refs(refs),
        ],
        labels=False,
        after_apis=False,
    )


def _module(
    label: str, kind: str, body: list[Item], *, labels: bool = True, after_apis: bool = True
) -> Block:
    """A call of ``./modules/gcp/<kind>`` in ``var.project``: ``body``, then the labels and the
    dependency on the enabled APIs (each unless turned off)."""
    tail: list[Item] = [Attr("labels", Expr("var.labels"))] if labels else []
    if after_apis:
        tail.append(Attr("depends_on", _APIS_READY))
    return tf.module(
        label, f"./modules/gcp/{kind}", [Attr("project", Expr("var.project")), *body, *tail]
    )


def _fn(
    prefix: str,
    role: str,
    timeout: Any,
    invokers: dict[str, Any],
    desc: str,
    *,
    environment: str = "local.environment",
    secrets: Expr | None = None,
) -> Block:
    extra: list[Item] = [] if secrets is None else [Attr("secret_environment", secrets)]
    body: list[Item] = [
        Attr("region", Expr("var.region")),
        Attr("name", names(prefix)[role]),
        Attr("description", desc),
        Attr("entry_point", role),
        Attr("source_bucket", Expr("google_storage_bucket.source.name")),
        Attr("source_object", Expr("google_storage_bucket_object.source.name")),
        Attr("timeout_seconds", timeout),
        Attr("environment", Expr(environment)),
        *extra,
        Attr("invokers", invokers),
    ]
    return _module(role, "function", body)


def _apis() -> Block:
    return Block(
        "resource",
        ("google_project_service", "apis"),
        [
            Attr("for_each", Expr("toset(local.apis)")),
            Attr("project", Expr("var.project")),
            Attr("service", Expr("each.value")),
            Attr("disable_on_destroy", False),
        ],
    )


def _watcher_schedule(prefix: str) -> Block:
    """The Cloud Scheduler job invoking the watcher function (OIDC)."""
    body: list[Item] = [
        Attr("region", Expr("var.region")),
        Attr("name", names(prefix)["watcher"]),
        *tf.refs(
            {
                "schedule": "var.watcher_schedule",
                "uri": "module.watcher.uri",
                "invoker_email": "google_service_account.scheduler.email",
            }
        ),
    ]
    return _module("watcher_schedule", "watcher", body, labels=False)


def _watcher_fn(prefix: str, description: str, secrets: Expr | None = None) -> Block:
    return _fn(
        prefix,
        "watcher",
        120,
        {"scheduler": Expr("google_service_account.scheduler.member")},
        description,
        secrets=secrets or _webhook_secret(),
    )


def main(
    prefix: str,
    plan: Plan,
    index_config: dict[str, Any],
    *,
    watcher_here: bool,
    worker: str = "push",
    watcher_provider: str = "azure",
) -> list[Item]:
    """``main.tf``: the whole deployment for the jobs of ``plan``.

    Without ``watcher_here`` the watcher runs on ``watcher_provider`` (``azure`` or ``aws``)
    and this module renders its access (workload identity federation from that cloud).

    ``worker="pull"``: no worker function; the worker subscription is a pull subscription read
    by the pull worker (``python -m cronwarden.adapters.gcp.serve``) that the user hosts, as
    the rendered service account ``pull_worker`` (README.md).
    """
    n = names(prefix)
    pull = worker == "pull"
    worker_member = Expr(
        "google_service_account.pull_worker.member"
        if pull
        else "module.worker.service_account_member"
    )
    jobs = {spec.name: spec.terraform() for spec in plan.jobs}
    descriptions = {spec.name: spec.description for spec in plan.jobs}
    agent = Expr(
        '"service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"'
    )
    more_locals: list[Item] = [
        Attr("descriptions", descriptions),
        Attr("apis", list(APIS)),
        Attr("package", Expr('"${path.module}/function.zip"')),
        Attr("pubsub_service_agent", agent),
        Attr("environment", environment(prefix)),
        Attr("trigger_environment", trigger_environment(prefix)),
    ]
    items: list[Item] = [
        *tf.jobs_preamble("gcp", jobs, more_locals),
        Block("data", ("google_project", "this"), [Attr("project_id", Expr("var.project"))]),
        _apis(),
        *_source_bucket(prefix),
        Comment("Identity of Pub/Sub pushes (OIDC) and of the watcher's scheduler job."),
        _service_account("push", n["push_identity"], "cronwarden Pub/Sub push (OIDC)"),
        _service_account(
            "scheduler", n["scheduler_identity"], "cronwarden watcher schedule (OIDC)"
        ),
        Comment(
            "The Pub/Sub service agent mints the OIDC tokens of push subscriptions (needed in\n"
            "projects created before April 2021, harmless after)."
        ),
        Block(
            "resource",
            ("google_service_account_iam_member", "push_token_creator"),
            [
                Attr("service_account_id", Expr("google_service_account.push.name")),
                Attr("role", "roles/iam.serviceAccountTokenCreator"),
                Attr("member", Expr('"serviceAccount:${local.pubsub_service_agent}"')),
            ],
        ),
        _fn(
            prefix,
            "trigger",
            60,
            {"pubsub": Expr("google_service_account.push.member")},
            "cronwarden trigger: schedule tick -> run requests",
            environment="merge(local.environment, local.trigger_environment)",
        ),
        _pull_worker(prefix)
        if pull
        else _fn(
            prefix,
            "worker",
            Expr("module.settings.function_timeout_seconds"),
            {"pubsub": Expr("google_service_account.push.member")},
            "cronwarden worker: runs one window of a job",
        ),
    ]
    if watcher_here:
        items.append(_watcher_fn(prefix, "cronwarden liveness watcher"))
    readers: dict[str, Any] = {}
    if watcher_here:
        readers["watcher"] = Expr("module.watcher.service_account_member")
    items += [
        _dead_letter(
            "dead_letter",
            n["dead_letter_topic"],
            n["dead_letter_subscription"],
            [Attr("publishers", {"worker": worker_member}), Attr("readers", readers)],
        ),
        Comment(
            "Dead ticks: the trigger's subscription dead-letters here, and the trigger publishes\n"
            "malformed ticks here itself (MalformedTick). Not redriven: a lost tick is recovered\n"
            "by catch-up, `cronwarden trigger --window` or `cronwarden backfill` (README.md)."
        ),
        _dead_letter(
            "tick_dead_letter",
            n["tick_dead_letter_topic"],
            n["tick_dead_letter_subscription"],
            [Attr("publishers", {"trigger": Expr("module.trigger.service_account_member")})],
        ),
        _push(
            "schedule",
            n["schedule_topic"],
            n["trigger_subscription"],
            "trigger",
            max_attempts=5,
            ack=60 + MARGIN_SECONDS,
            backoff=("10s", "60s"),
            publishers={},
            dead_letter="tick_dead_letter",
        ),
        _push(
            "runs",
            n["topic"],
            n["subscription"],
            "worker",
            max_attempts=Expr("module.settings.pubsub.max_delivery_attempts"),
            ack=Expr("module.settings.pubsub.ack_deadline_seconds"),
            backoff=(
                Expr("module.settings.pubsub.minimum_backoff"),
                Expr("module.settings.pubsub.maximum_backoff"),
            ),
            publishers={
                "trigger": Expr("module.trigger.service_account_member"),
                "worker": worker_member,
            },
            subscribers={"worker": worker_member} if pull else None,
        ),
        Block(
            "resource",
            ("google_project_iam_member", "firestore"),
            [
                Attr(
                    "for_each",
                    {
                        role: worker_member
                        if role == "worker"
                        else Expr(f"module.{role}.service_account_member")
                        for role in (
                            ("trigger", "worker", "watcher")
                            if watcher_here
                            else ("trigger", "worker")
                        )
                    },
                ),
                Attr("project", Expr("var.project")),
                Attr("role", "roles/datastore.user"),
                Attr("member", Expr("each.value")),
            ],
        ),
        tf.module(
            "job",
            "./modules/gcp/job",
            [
                Attr("for_each", Expr("module.settings.jobs")),
                Attr("project", Expr("var.project")),
                Attr("region", Expr("var.region")),
                Attr("name", Expr("each.key")),
                Attr("scheduler_name", Expr(f'"{prefix}-${{each.key}}"')),
                *tf.refs(
                    {
                        "cron": "each.value.cron",
                        "time_zone": "each.value.time_zone",
                        "topic_id": "module.schedule.topic_id",
                        "description": "local.descriptions[each.key]",
                    }
                ),
                Attr("depends_on", _APIS_READY),
            ],
        ),
    ]
    if watcher_here:
        items.append(_watcher_schedule(prefix))
    else:
        items.append(_external_reader(prefix, watcher_provider))
    items += [
        _module(
            "state",
            "state",
            [
                *tf.refs(
                    {
                        "location": "var.firestore_location",
                        "database": "var.firestore_database",
                        "create_database": "var.create_firestore_database",
                    }
                ),
                Attr("indexes", firestore_indexes(index_config)),
                Attr("field_overrides", firestore_fields(index_config)),
            ],
            labels=False,
        ),
        _monitoring("monitoring", "module.dead_letter.subscription_name"),
        _monitoring(
            "tick_monitoring",
            "module.tick_dead_letter.subscription_name",
            _tick_alert(n["tick_dead_letter_subscription"]),
        ),
    ]
    return items


def _dead_letter(label: str, topic: str, subscription: str, access: list[Item]) -> Block:
    """A dead-letter topic and the subscription that keeps its messages."""
    body: list[Item] = [
        Attr("topic_name", topic),
        Attr("subscription_name", subscription),
        Attr("pubsub_service_agent", Expr("local.pubsub_service_agent")),
        *access,
    ]
    return _module(label, "dead-letter", body)


def _monitoring(label: str, subscription: str, documentation: str | None = None) -> Block:
    """The alert on messages in a dead-letter ``subscription`` (an expression)."""
    doc: list[Item] = [] if documentation is None else [Attr("documentation", documentation)]
    body: list[Item] = [
        Attr("dead_letter_subscription", Expr(subscription)),
        Attr("notification_channels", Expr("var.notification_channels")),
        *doc,
    ]
    return _module(label, "monitoring", body, labels=False)


def _tick_alert(subscription: str) -> str:
    """The tick dead-letter alert's documentation: what happened, how to recover."""
    return (
        "Schedule ticks were dead-lettered: the trigger failed on every attempt (Pub/Sub or "
        "Firestore trouble), or a tick was malformed (reason MalformedTick: check the Cloud "
        "Scheduler job's message). Do not redrive them: a tick is not a run request. Recover a "
        "lost window with the job's catch-up policy (its next tick), `cronwarden trigger JOB "
        "--window WINDOW --no-wait --provider gcp` or `cronwarden backfill`. Read them with "
        f"`{ENV_DEAD_LETTER_SUBSCRIPTION}={subscription} cronwarden dlq list "
        f"--provider gcp`, then clear them with `gcloud pubsub subscriptions seek {subscription} "
        '--time="$(date -u +%Y-%m-%dT%H:%M:%SZ)"`.'
    )


def _source_bucket(prefix: str) -> list[Item]:
    """The private bucket holding the function package, and the package (named by its hash)."""
    return [
        Block(
            "resource",
            ("google_storage_bucket", "source"),
            [
                Comment(
                    "checkov:skip=CKV_GCP_62:The bucket holds only the function package; "
                    "Cloud Audit Logs record access."
                ),
                Attr("name", Expr('"${var.project}-' + prefix + '-source"')),
                Attr("project", Expr("var.project")),
                Attr("location", Expr("var.region")),
                Attr("uniform_bucket_level_access", True),
                Attr("public_access_prevention", "enforced"),
                Attr("labels", Expr("var.labels")),
                Block("versioning", body=[Attr("enabled", True)]),
            ],
        ),
        Block(
            "resource",
            ("google_storage_bucket_object", "source"),
            [
                Attr("name", Expr('"function-${filemd5(local.package)}.zip"')),
                Attr("bucket", Expr("google_storage_bucket.source.name")),
                Attr("source", Expr("local.package")),
            ],
        ),
    ]


def _pull_worker(prefix: str) -> Block:
    """The pull worker's identity (it runs outside Terraform, on the user's host): subscriber
    on the worker subscription, publisher on the run and dead-letter topics, Firestore user."""
    return Block(
        "resource",
        ("google_service_account", "pull_worker"),
        [
            Comment(
                "The pull worker (python -m cronwarden.adapters.gcp.serve) runs as this account\n"
                "on a host you run (GKE, a VM, a Cloud Run worker pool): see README.md."
            ),
            Attr("project", Expr("var.project")),
            Attr("account_id", names(prefix)["worker"]),
            Attr("display_name", "cronwarden pull worker"),
            Attr("description", "Runs the cronwarden pull worker (least privilege)."),
        ],
    )


def _service_account(label: str, account_id: str, display: str) -> Block:
    return Block(
        "resource",
        ("google_service_account", label),
        [
            Attr("project", Expr("var.project")),
            Attr("account_id", account_id),
            Attr("display_name", display),
        ],
    )


def _push(
    label: str,
    topic: str,
    subscription: str,
    target: str,
    *,
    max_attempts: Any,
    ack: Any,
    backoff: tuple[Any, Any],
    publishers: dict[str, Any],
    dead_letter: str = "dead_letter",
    subscribers: dict[str, Any] | None = None,
) -> Block:
    """A topic and its subscription; pushed to ``module.<target>`` unless ``subscribers`` is
    given (then a pull subscription they read)."""
    push: list[Item] = [
        Attr("push_endpoint", Expr(f"module.{target}.uri")),
        Attr("push_service_account_email", Expr("google_service_account.push.email")),
    ]
    pull: list[Item] = [Attr("subscribers", subscribers)] if subscribers is not None else []
    body: list[Item] = [
        Attr("topic_name", topic),
        Attr("subscription_name", subscription),
        *(pull or push),
        Attr("dead_letter_topic_id", Expr(f"module.{dead_letter}.topic_id")),
        Attr("max_delivery_attempts", max_attempts),
        Attr("ack_deadline_seconds", ack),
        Attr("minimum_backoff", backoff[0]),
        Attr("maximum_backoff", backoff[1]),
        Attr("pubsub_service_agent", Expr("local.pubsub_service_agent")),
        Attr("publishers", publishers),
    ]
    return _module(label, "push", body)


def firestore_indexes(config: dict[str, Any]) -> list[dict[str, Any]]:
    """``firestore.indexes.json`` composite indexes as the state module's ``indexes``."""
    return [
        {
            "collection": index["collectionGroup"],
            "fields": [
                {"field_path": f["fieldPath"], "order": f["order"]} for f in index["fields"]
            ],
        }
        for index in config.get("indexes", [])
    ]


def firestore_fields(config: dict[str, Any]) -> list[dict[str, Any]]:
    """``firestore.indexes.json`` field overrides as the state module's ``field_overrides``."""
    return [
        {
            "collection": item["collectionGroup"],
            "field": item["fieldPath"],
            "ttl": bool(item.get("ttl", False)),
            # an ascending single-field index ("": exempt from indexing)
            "order": str(item["indexes"][0]["order"]) if item.get("indexes") else "",
        }
        for item in config.get("fieldOverrides", [])
    ]


def outputs(watcher_here: bool, worker: str = "push", watcher_provider: str = "") -> list[Item]:
    items: list[Item] = (
        [
            tf.output("pull_worker_service_account", "google_service_account.pull_worker.email"),
            Block(
                "output",
                ("pull_worker_environment",),
                [
                    Attr("description", "The pull worker's environment (configuration only)."),
                    Attr("value", Expr("local.environment")),
                ],
            ),
        ]
        if worker == "pull"
        else [tf.output("worker_url", "module.worker.uri")]
    )
    items += tf.outputs(
        {
            "trigger_url": "module.trigger.uri",
            "dead_letter_subscription": "module.dead_letter.subscription_name",
            "project_number": "data.google_project.this.number",
        }
    )
    if not watcher_here:
        items += tf.outputs(
            {
                "external_watcher_service_account": "module.external_watcher.service_account_email",
                "external_watcher_provider": "module.external_watcher.provider_name",
            }
        )
    if not watcher_here and watcher_provider == "aws":
        items += tf.outputs(
            {"external_watcher_credential_config": "module.external_watcher.credential_config"}
        )
    return items


def watcher_variables(watched: Sequence[Item]) -> list[Item]:
    """Variables of the watcher-only GCP root module (``watched``: those of the jobs' cloud)."""
    return [
        _variable("project", "string", "GCP project id of the watcher."),
        _variable("region", "string", "Region of the watcher function.", "europe-west1"),
        _WATCHER_SCHEDULE,
        *watched,
        _LABELS,
        _webhook_variable(),
    ]


def watcher_main(
    prefix: str,
    watched_environment: dict[str, Any],
    secrets: Mapping[str, str] | None = None,
    cloud: str = "azure",
) -> list[Item]:
    """``main.tf`` of a watcher-only GCP deployment watching jobs that run on another cloud
    (``watched_environment``: what the watcher needs to reach them; ``secrets``: environment
    name => the variable naming the Secret Manager secret holding its value)."""
    n = names(prefix)
    about = (
        ": the liveness watcher\n"
        "of jobs running on Azure, outside their failure domain. It reaches Table Storage and\n"
        "the dead-letter queue through workload identity federation (no key)."
    )
    if secrets:
        about = (
            f": the liveness watcher\nof jobs running on {cloud.upper()}, outside their failure "
            "domain. It reads their credential from\nSecret Manager by reference (the value "
            "never enters Terraform)."
        )
    title = _TITLES.get(cloud, cloud)
    description = f"cronwarden liveness watcher (jobs on {title})"
    watcher = _watcher_fn(prefix, description, _with_secrets(secrets) if secrets else None)
    return [
        tf.header("cronwarden deploy render --watcher-provider gcp", about),
        Block(
            "locals",
            body=[
                Attr("apis", list(APIS)),
                Attr("package", Expr('"${path.module}/function.zip"')),
                Attr("environment", watched_environment),
            ],
        ),
        _apis(),
        *_source_bucket(prefix),
        _service_account(
            "scheduler", n["scheduler_identity"], "cronwarden watcher schedule (OIDC)"
        ),
        watcher,
        _watcher_schedule(prefix),
    ]


_TITLES = {"azure": "Azure", "aws": "AWS"}


def _with_secrets(secrets: Mapping[str, str]) -> Expr:
    """The webhook secret (when named) and ``secrets`` (env => variable naming the secret)."""
    entries = ", ".join(
        f'{env} = {{ secret = var.{variable}, version = "latest" }}'
        for env, variable in secrets.items()
    )
    return Expr(f"merge({_webhook_secret().text}, {{ {entries} }})")


def watcher_outputs() -> list[Item]:
    return tf.outputs(
        {
            "watcher_url": "module.watcher.uri",
            "watcher_service_account_unique_id": "module.watcher.service_account_unique_id",
        }
    )


def index_config() -> dict[str, Any]:
    """Firestore indexes/TTL of the GCP adapter (``firestore.indexes.json`` shape)."""
    from .indexes import index_config as adapter_index_config

    config: dict[str, Any] = adapter_index_config()
    return config


def jobs_root(options: rr.RootOptions) -> rr.TfFiles:
    """The root module running the jobs (and the watcher when ``options.watcher_here``)."""
    main_tf = main(
        options.prefix,
        options.plan,
        index_config(),
        watcher_here=options.watcher_here,
        worker=options.worker,
        watcher_provider=options.watcher_provider or "azure",
    )
    variables_tf = variables(
        options.external_watcher, options.watcher_provider or "azure", options.prefix
    )
    return rr.tf_files(
        versions(),
        variables_tf,
        main_tf,
        outputs(options.watcher_here, options.worker, options.watcher_provider),
    )


def watcher_root(prefix: str, watched: rr.Watched) -> rr.TfFiles:
    """The root module running only the watcher of jobs on another cloud."""
    main_tf = watcher_main(prefix, watched.environment, watched.secret_environment, watched.cloud)
    return rr.tf_files(versions(), watcher_variables(watched.variables), main_tf, watcher_outputs())


#: what a watcher on AWS needs to read Firestore and the dead-letter subscription
WATCHER_READS = ("google-cloud-firestore>=2.16", "google-cloud-pubsub>=2.23", "google-auth>=2.29")


def aws_watcher_environment(prefix: str) -> dict[str, Any]:
    """Environment of a watcher on AWS (a Lambda function) watching the jobs on GCP: it reaches
    Firestore and the dead-letter subscription by workload identity federation from its role
    (``CRONWARDEN_GCP_WIF_SOURCE=aws``: no audience, no key)."""
    env = external_watcher_environment(prefix)
    del env[ENV_WIF_AUDIENCE]
    env[settings.WIF_SOURCE_ENV] = "aws"
    return env


def aws_watcher_inputs() -> list[Item]:
    """The variables :func:`aws_watcher_environment` references (in the AWS watcher root)."""
    return [
        v
        for v in external_watcher_variables()
        if not (isinstance(v, Block) and v.labels == ("gcp_watcher_audience",))
    ]


def watched_from(prefix: str, host: str) -> rr.Watched | None:
    """A watcher on AWS federates differently from the Azure one (the defaults)."""
    if host != "aws":
        return None
    return rr.Watched(
        aws_watcher_inputs(),
        aws_watcher_environment(prefix),
        cloud="gcp",
        requirements=WATCHER_READS,
    )


def check_job(job: rr.JobLimits) -> list[str]:
    """GCP's limits: a push delivery's ack deadline bounds the runtime; Pub/Sub clamps the
    delivery attempts and the retry backoff (notes)."""
    if job.worker == "push" and job.runtime > GCP_PUSH_MAX_RUNTIME:
        raise InvalidJobDefinition(
            f"job {job.name!r}: max_runtime {job.runtime}s is over the {GCP_PUSH_MAX_RUNTIME}s "
            "a Pub/Sub push delivery can carry on GCP (its ack deadline is at most "
            f"{PUBSUB_MAX_ACK_DEADLINE}s and cannot be extended); render with --gcp-worker "
            "pull to run the pull worker `python -m cronwarden.adapters.gcp.serve` (GKE, a "
            "VM or a Cloud Run worker pool) instead (docs/deploy-gcp.md)"
        )
    notes: list[str] = []
    if job.attempts < PUBSUB_MIN_ATTEMPTS:
        notes.append(
            f"{job.name}: Pub/Sub dead-letter policies need at least "
            f"{PUBSUB_MIN_ATTEMPTS} delivery attempts; the subscription uses "
            f"{PUBSUB_MIN_ATTEMPTS} and the engine dead-letters after {job.attempts}"
        )
    if job.max_backoff > PUBSUB_MAX_BACKOFF:
        notes.append(
            f"{job.name}: Pub/Sub retry backoff is capped at {PUBSUB_MAX_BACKOFF}s "
            f"(retry.max_backoff is {job.max_backoff}s)"
        )
    return notes


def gcp_main(source: JobSource) -> str:
    """``main.py`` for functions-framework: three HTTP targets."""
    return entry_module(
        source,
        "Cloud Functions (2nd gen) entry points, rendered by `cronwarden deploy render`.\n"
        "\n"
        "Targets (functions-framework, HTTP):\n"
        "  trigger  pushed from the schedule topic (one Cloud Scheduler job per cronwarden job)\n"
        "  worker   pushed from the run-request topic (our own subscription, with a DLQ policy)\n"
        "  watcher  called by its own Cloud Scheduler job (liveness)\n",
        "cronwarden.adapters.gcp.functions.make_functions",
        "trigger, worker, watcher = make_functions({jobs})",
    )


def package_files(plan: Plan, source: JobSource, runs_worker: bool) -> rr.PackageFiles:
    """The package's entry module (every function of the deployment is a target of it)."""
    return rr.PackageFiles({"main.py": gcp_main(source)})


RENDERER = rr.CloudRenderer(
    "gcp",
    jobs_root,
    watcher_root,
    watcher_host="azure",
    watcher_variables=external_watcher_variables,
    watcher_environment=external_watcher_environment,
    check_job=check_job,
    package=package_files,
    watcher_hosts=("aws",),
    watched_from=watched_from,
    watcher_requirements=WATCHER_READS,  # a watcher elsewhere reads this cloud with these
)

__all__ = ["RENDERER", "WEBHOOK_ENV"]
