"""The GCP root module: which modules under ``modules/`` are composed, with what values.

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
(see :func:`environment`). The watcher's webhook URL is a credential: it reaches the watcher
function as a Secret Manager secret environment variable (``webhook_secret``), never as a
Terraform value.
"""

from __future__ import annotations

from typing import Any

from .hcl import Attr, Block, Comment, Expr, Item
from .spec import MARGIN_SECONDS, Plan

WEBHOOK_ENV = "CRONWARDEN_WEBHOOK_URL"  #: what the watcher reads (cronwarden.adapters.gcp)

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


def environment(prefix: str) -> dict[str, Any]:
    """Environment of every cronwarden function on GCP (``GcpProvider.from_env``'s names)."""
    n = names(prefix)
    return {
        "CRONWARDEN_PROVIDER": "gcp",
        "CRONWARDEN_GCP_PROJECT": Expr("var.project"),
        "CRONWARDEN_GCP_TOPIC": n["topic"],
        "CRONWARDEN_GCP_SUBSCRIPTION": n["subscription"],
        "CRONWARDEN_GCP_DEAD_LETTER_TOPIC": n["dead_letter_topic"],
        "CRONWARDEN_GCP_DEAD_LETTER_SUBSCRIPTION": n["dead_letter_subscription"],
        "CRONWARDEN_GCP_MAX_DELIVERIES": Expr(
            "tostring(module.settings.pubsub.max_delivery_attempts)"
        ),
        "CRONWARDEN_GCP_ACK_DEADLINE": Expr(
            "tostring(module.settings.pubsub.ack_deadline_seconds)"
        ),
        "CRONWARDEN_GCP_CREATE_MISSING": "false",
        "CRONWARDEN_FIRESTORE_DATABASE": Expr("module.state.database"),
        "CRONWARDEN_FIRESTORE_PREFIX": "cw_",
    }


def trigger_environment(prefix: str) -> dict[str, str]:
    """What the trigger's environment changes: its explicit dead letters (``MalformedTick``)
    go to the tick dead-letter topic, like the broker's for its subscription."""
    n = names(prefix)
    return {
        "CRONWARDEN_GCP_DEAD_LETTER_TOPIC": n["tick_dead_letter_topic"],
        "CRONWARDEN_GCP_DEAD_LETTER_SUBSCRIPTION": n["tick_dead_letter_subscription"],
    }


def _webhook_variable() -> Block:
    """``webhook_secret``: the *id* of the secret holding the URL (a URL is refused, so the
    credential cannot land in tfvars or the state by mistake)."""
    return Block(
        "variable",
        ("webhook_secret",),
        [
            Attr(
                "description",
                "Secret Manager secret id (in var.project) holding the watcher's webhook URL, "
                f"exposed to the watcher as {WEBHOOK_ENV}; empty: alerts go to the logs only. "
                "Create the secret and its version outside Terraform (README.md): the URL is a "
                "credential and never enters the state.",
            ),
            Attr("type", Expr("string")),
            Attr("default", ""),
            Block(
                "validation",
                body=[
                    Attr(
                        "condition",
                        Expr('can(regex("^[A-Za-z0-9_-]{0,255}$", var.webhook_secret))'),
                    ),
                    Attr(
                        "error_message",
                        "webhook_secret is the id of a Secret Manager secret (e.g. "
                        "cronwarden-webhook), not the URL itself.",
                    ),
                ],
            ),
        ],
    )


def _webhook_secret() -> Expr:
    """The watcher's ``secret_environment``: the webhook secret when one is named (a ``for``
    expression, so both cases have one map type)."""
    return Expr(
        f"{{ for key, id in {{ {WEBHOOK_ENV} = var.webhook_secret }} : "
        'key => { secret = id, version = "latest" } if id != "" }'
    )


def versions() -> list[Item]:
    return [
        Block(
            "terraform",
            body=[
                Attr("required_version", ">= 1.5"),
                Block(
                    "required_providers",
                    body=[
                        Attr("google", {"source": "hashicorp/google", "version": GOOGLE_VERSION})
                    ],
                ),
            ],
        ),
        Block(
            "provider",
            ("google",),
            [Attr("project", Expr("var.project")), Attr("region", Expr("var.region"))],
        ),
    ]


def _variable(name: str, type_: str, description: str, default: Any = ...) -> Block:
    body: list[Item] = [Attr("description", description), Attr("type", Expr(type_))]
    if default is not ...:
        body.append(Attr("default", default))
    return Block("variable", (name,), body)


def variables(external_watcher: bool) -> list[Item]:
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
        _variable(
            "watcher_schedule",
            "string",
            "How often the liveness watcher runs (cron, UTC).",
            "*/5 * * * *",
        ),
        _variable("labels", "map(string)", "Labels on every resource that takes them.", {}),
    ]
    if not external_watcher:
        items.append(_webhook_variable())
    if external_watcher:
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
    n = names(prefix)
    extra: list[Item] = [] if secrets is None else [Attr("secret_environment", secrets)]
    return Block(
        "module",
        (role,),
        [
            Attr("source", "./modules/gcp/function"),
            Attr("project", Expr("var.project")),
            Attr("region", Expr("var.region")),
            Attr("name", n[role]),
            Attr("description", desc),
            Attr("entry_point", role),
            Attr("source_bucket", Expr("google_storage_bucket.source.name")),
            Attr("source_object", Expr("google_storage_bucket_object.source.name")),
            Attr("timeout_seconds", timeout),
            Attr("environment", Expr(environment)),
            *extra,
            Attr("invokers", invokers),
            Attr("labels", Expr("var.labels")),
            Attr("depends_on", [Expr("google_project_service.apis")]),
        ],
    )


def main(
    prefix: str,
    plan: Plan,
    index_config: dict[str, Any],
    *,
    watcher_here: bool,
    worker: str = "push",
) -> list[Item]:
    """``main.tf``: the whole deployment for the jobs of ``plan``.

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
    items: list[Item] = [
        Comment(
            "Rendered by `cronwarden deploy render --provider gcp` from the job definitions.\n"
            "Re-render after changing a job; edit the modules under modules/ only to change the\n"
            "shape of the deployment."
        ),
        Block(
            "locals",
            body=[
                Attr("jobs", jobs),
                Attr("descriptions", descriptions),
                Attr("apis", list(APIS)),
                Attr("package", Expr('"${path.module}/function.zip"')),
                Attr("pubsub_service_agent", agent),
                Attr("environment", environment(prefix)),
                Attr("trigger_environment", trigger_environment(prefix)),
            ],
        ),
        Block(
            "module",
            ("settings",),
            [Attr("source", "./modules/common/settings"), Attr("jobs", Expr("local.jobs"))],
        ),
        Block("data", ("google_project", "this"), [Attr("project_id", Expr("var.project"))]),
        Block(
            "resource",
            ("google_project_service", "apis"),
            [
                Attr("for_each", Expr("toset(local.apis)")),
                Attr("project", Expr("var.project")),
                Attr("service", Expr("each.value")),
                Attr("disable_on_destroy", False),
            ],
        ),
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
        items.append(
            _fn(
                prefix,
                "watcher",
                120,
                {"scheduler": Expr("google_service_account.scheduler.member")},
                "cronwarden liveness watcher",
                secrets=_webhook_secret(),
            )
        )
    readers: dict[str, Any] = {}
    if watcher_here:
        readers["watcher"] = Expr("module.watcher.service_account_member")
    items += [
        Block(
            "module",
            ("dead_letter",),
            [
                Attr("source", "./modules/gcp/dead-letter"),
                Attr("project", Expr("var.project")),
                Attr("topic_name", n["dead_letter_topic"]),
                Attr("subscription_name", n["dead_letter_subscription"]),
                Attr("pubsub_service_agent", Expr("local.pubsub_service_agent")),
                Attr("publishers", {"worker": worker_member}),
                Attr("readers", readers),
                Attr("labels", Expr("var.labels")),
                Attr("depends_on", [Expr("google_project_service.apis")]),
            ],
        ),
        Comment(
            "Dead ticks: the trigger's subscription dead-letters here, and the trigger publishes\n"
            "malformed ticks here itself (MalformedTick). Not redriven: a lost tick is recovered\n"
            "by catch-up, `cronwarden trigger --window` or `cronwarden backfill` (README.md)."
        ),
        Block(
            "module",
            ("tick_dead_letter",),
            [
                Attr("source", "./modules/gcp/dead-letter"),
                Attr("project", Expr("var.project")),
                Attr("topic_name", n["tick_dead_letter_topic"]),
                Attr("subscription_name", n["tick_dead_letter_subscription"]),
                Attr("pubsub_service_agent", Expr("local.pubsub_service_agent")),
                Attr("publishers", {"trigger": Expr("module.trigger.service_account_member")}),
                Attr("labels", Expr("var.labels")),
                Attr("depends_on", [Expr("google_project_service.apis")]),
            ],
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
        Block(
            "module",
            ("job",),
            [
                Attr("source", "./modules/gcp/job"),
                Attr("for_each", Expr("module.settings.jobs")),
                Attr("project", Expr("var.project")),
                Attr("region", Expr("var.region")),
                Attr("name", Expr("each.key")),
                Attr("scheduler_name", Expr(f'"{prefix}-${{each.key}}"')),
                Attr("cron", Expr("each.value.cron")),
                Attr("time_zone", Expr("each.value.time_zone")),
                Attr("topic_id", Expr("module.schedule.topic_id")),
                Attr("description", Expr("local.descriptions[each.key]")),
                Attr("depends_on", [Expr("google_project_service.apis")]),
            ],
        ),
    ]
    if watcher_here:
        items.append(
            Block(
                "module",
                ("watcher_schedule",),
                [
                    Attr("source", "./modules/gcp/watcher"),
                    Attr("project", Expr("var.project")),
                    Attr("region", Expr("var.region")),
                    Attr("name", n["watcher"]),
                    Attr("schedule", Expr("var.watcher_schedule")),
                    Attr("uri", Expr("module.watcher.uri")),
                    Attr("invoker_email", Expr("google_service_account.scheduler.email")),
                    Attr("depends_on", [Expr("google_project_service.apis")]),
                ],
            )
        )
    else:
        items.append(
            Block(
                "module",
                ("external_watcher",),
                [
                    Attr("source", "./modules/gcp/external-reader"),
                    Attr("project", Expr("var.project")),
                    Attr("project_number", Expr("data.google_project.this.number")),
                    Attr("name", n["external_watcher"]),
                    Attr("azure_tenant_id", Expr("var.azure_tenant_id")),
                    Attr("azure_principal_id", Expr("var.azure_watcher_principal_id")),
                    Attr("audience", Expr("var.azure_watcher_audience")),
                    Attr("dead_letter_subscription", Expr("module.dead_letter.subscription_name")),
                ],
            )
        )
    items += [
        Block(
            "module",
            ("state",),
            [
                Attr("source", "./modules/gcp/state"),
                Attr("project", Expr("var.project")),
                Attr("location", Expr("var.firestore_location")),
                Attr("database", Expr("var.firestore_database")),
                Attr("create_database", Expr("var.create_firestore_database")),
                Attr("indexes", firestore_indexes(index_config)),
                Attr("field_overrides", firestore_fields(index_config)),
                Attr("depends_on", [Expr("google_project_service.apis")]),
            ],
        ),
        Block(
            "module",
            ("monitoring",),
            [
                Attr("source", "./modules/gcp/monitoring"),
                Attr("project", Expr("var.project")),
                Attr("dead_letter_subscription", Expr("module.dead_letter.subscription_name")),
                Attr("notification_channels", Expr("var.notification_channels")),
                Attr("depends_on", [Expr("google_project_service.apis")]),
            ],
        ),
        Block(
            "module",
            ("tick_monitoring",),
            [
                Attr("source", "./modules/gcp/monitoring"),
                Attr("project", Expr("var.project")),
                Attr(
                    "dead_letter_subscription",
                    Expr("module.tick_dead_letter.subscription_name"),
                ),
                Attr("notification_channels", Expr("var.notification_channels")),
                Attr("documentation", _tick_alert(n["tick_dead_letter_subscription"])),
                Attr("depends_on", [Expr("google_project_service.apis")]),
            ],
        ),
    ]
    return items


def _tick_alert(subscription: str) -> str:
    """The tick dead-letter alert's documentation: what happened, how to recover."""
    return (
        "Schedule ticks were dead-lettered: the trigger failed on every attempt (Pub/Sub or "
        "Firestore trouble), or a tick was malformed (reason MalformedTick: check the Cloud "
        "Scheduler job's message). Do not redrive them: a tick is not a run request. Recover a "
        "lost window with the job's catch-up policy (its next tick), `cronwarden trigger JOB "
        "--window WINDOW --no-wait --provider gcp` or `cronwarden backfill`. Read them with "
        f"`CRONWARDEN_GCP_DEAD_LETTER_SUBSCRIPTION={subscription} cronwarden dlq list "
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
    return Block(
        "module",
        (label,),
        [
            Attr("source", "./modules/gcp/push"),
            Attr("project", Expr("var.project")),
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
            Attr("labels", Expr("var.labels")),
            Attr("depends_on", [Expr("google_project_service.apis")]),
        ],
    )


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
        }
        for item in config.get("fieldOverrides", [])
    ]


def outputs(watcher_here: bool, worker: str = "push") -> list[Item]:
    items: list[Item] = (
        [
            Block(
                "output",
                ("pull_worker_service_account",),
                [Attr("value", Expr("google_service_account.pull_worker.email"))],
            ),
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
        else [Block("output", ("worker_url",), [Attr("value", Expr("module.worker.uri"))])]
    )
    items += [
        Block("output", ("trigger_url",), [Attr("value", Expr("module.trigger.uri"))]),
        Block(
            "output",
            ("dead_letter_subscription",),
            [Attr("value", Expr("module.dead_letter.subscription_name"))],
        ),
        Block(
            "output",
            ("project_number",),
            [Attr("value", Expr("data.google_project.this.number"))],
        ),
    ]
    if not watcher_here:
        items += [
            Block(
                "output",
                ("external_watcher_service_account",),
                [Attr("value", Expr("module.external_watcher.service_account_email"))],
            ),
            Block(
                "output",
                ("external_watcher_provider",),
                [Attr("value", Expr("module.external_watcher.provider_name"))],
            ),
        ]
    return items


__all__ = [
    "environment",
    "firestore_fields",
    "firestore_indexes",
    "main",
    "names",
    "outputs",
    "trigger_environment",
]


def watcher_environment(prefix: str) -> dict[str, Any]:
    """Environment of a watcher on GCP that watches jobs running on Azure."""
    return {
        "CRONWARDEN_PROVIDER": "azure",
        "CRONWARDEN_FUNCTIONS": "watcher",
        "CRONWARDEN_AZURE_TABLE_ACCOUNT_URL": Expr(
            '"https://${var.azure_storage_account}.table.core.windows.net/"'
        ),
        "CRONWARDEN_AZURE_TABLE": "cronwarden",
        "CRONWARDEN_SERVICEBUS_NAMESPACE": Expr("var.azure_servicebus_namespace"),
        "CRONWARDEN_SERVICEBUS_QUEUE": "cronwarden-runs",
        "AZURE_TENANT_ID": Expr("var.azure_tenant_id"),
        "AZURE_CLIENT_ID": Expr("var.azure_watcher_client_id"),
        "CRONWARDEN_AZURE_FEDERATION": "google",
    }


def watcher_variables() -> list[Item]:
    """Variables of the watcher-only GCP root module (jobs on Azure)."""
    return [
        _variable("project", "string", "GCP project id of the watcher."),
        _variable("region", "string", "Region of the watcher function.", "europe-west1"),
        _variable(
            "watcher_schedule",
            "string",
            "How often the liveness watcher runs (cron, UTC).",
            "*/5 * * * *",
        ),
        _variable("azure_tenant_id", "string", "Entra ID tenant of the jobs' subscription."),
        _variable(
            "azure_watcher_client_id",
            "string",
            "Client id of the federated identity (output external_watcher_client_id of the "
            "Azure root module).",
        ),
        _variable("azure_storage_account", "string", "Storage account holding the job records."),
        _variable(
            "azure_servicebus_namespace",
            "string",
            "Fully qualified Service Bus namespace (<name>.servicebus.windows.net).",
        ),
        _variable("labels", "map(string)", "Labels on every resource that takes them.", {}),
        _webhook_variable(),
    ]


def watcher_main(prefix: str) -> list[Item]:
    """``main.tf`` of a watcher-only GCP deployment watching jobs that run on Azure."""
    n = names(prefix)
    return [
        Comment(
            "Rendered by `cronwarden deploy render --watcher-provider gcp`: the liveness watcher\n"
            "of jobs running on Azure, outside their failure domain. It reaches Table Storage and\n"
            "the dead-letter queue through workload identity federation (no key)."
        ),
        Block(
            "locals",
            body=[
                Attr("apis", list(APIS)),
                Attr("package", Expr('"${path.module}/function.zip"')),
                Attr("environment", watcher_environment(prefix)),
            ],
        ),
        Block(
            "resource",
            ("google_project_service", "apis"),
            [
                Attr("for_each", Expr("toset(local.apis)")),
                Attr("project", Expr("var.project")),
                Attr("service", Expr("each.value")),
                Attr("disable_on_destroy", False),
            ],
        ),
        *_source_bucket(prefix),
        _service_account(
            "scheduler", n["scheduler_identity"], "cronwarden watcher schedule (OIDC)"
        ),
        _fn(
            prefix,
            "watcher",
            120,
            {"scheduler": Expr("google_service_account.scheduler.member")},
            "cronwarden liveness watcher (jobs on Azure)",
            secrets=_webhook_secret(),
        ),
        Block(
            "module",
            ("watcher_schedule",),
            [
                Attr("source", "./modules/gcp/watcher"),
                Attr("project", Expr("var.project")),
                Attr("region", Expr("var.region")),
                Attr("name", n["watcher"]),
                Attr("schedule", Expr("var.watcher_schedule")),
                Attr("uri", Expr("module.watcher.uri")),
                Attr("invoker_email", Expr("google_service_account.scheduler.email")),
                Attr("depends_on", [Expr("google_project_service.apis")]),
            ],
        ),
    ]


def watcher_outputs() -> list[Item]:
    return [
        Block("output", ("watcher_url",), [Attr("value", Expr("module.watcher.uri"))]),
        Block(
            "output",
            ("watcher_service_account_unique_id",),
            [Attr("value", Expr("module.watcher.service_account_unique_id"))],
        ),
    ]
