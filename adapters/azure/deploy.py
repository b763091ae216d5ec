"""The Azure renderer of ``cronwarden deploy render``: which Terraform modules under ``modules/``
the Azure root module composes, with what values (registered as ``azure`` in
:mod:`cronwarden.deploy.renderers`). The app settings it writes are named by the ``ENV_*``
constants below, the only place this renderer spells them.

Flow (DESIGN §4)::

    Timer trigger per job (NCRONTAB in UTC, app setting CRONWARDEN_SCHEDULE_<JOB>)
        ──► Service Bus queue <name>-runs (duplicate detection on the run key)
            ──► Service Bus trigger (identity connection ServiceBusConnection)
                ──► worker ──► Table Storage
    Timer trigger (watcher, CRONWARDEN_WATCHER_SCHEDULE) ──► liveness checks
    <name>-runs/$DeadLetterQueue ──► metric alert DeadletteredMessages > 0

Every connection is identity-based: the app's system-assigned identity holds the data-plane
roles; no key or connection string is rendered. The watcher's webhook URL (a credential) is an
app setting holding a Key Vault reference (``webhook_key_vault_id``, ``webhook_secret_name``),
resolved by the platform with the app's identity; its value never enters Terraform.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from cronwarden.deploy import builder as tf
from cronwarden.deploy import renderers as rr
from cronwarden.deploy.hcl import Attr, Block, Comment, Expr, Item
from cronwarden.deploy.package import JobSource, entry_module
from cronwarden.deploy.renderers import PROVIDER_ENV as ENV_PROVIDER
from cronwarden.deploy.spec import AZURE_SKU, Plan
from cronwarden.hosting import FUNCTIONS_ENV as ENV_FUNCTIONS
from cronwarden.hosting import WEBHOOK_ENV

from . import settings
from .ncrontab import utc_ncrontab

# --- the app settings the rendered app reads (AzureProvider.from_env, cronwarden.hosting) -----
ENV_TABLE_ACCOUNT_URL = settings.TABLE_ACCOUNT_URL_ENV
ENV_TABLE = settings.TABLE_ENV
ENV_SERVICEBUS_NAMESPACE = settings.SERVICEBUS_NAMESPACE_ENV
ENV_SERVICEBUS_QUEUE = settings.QUEUE_ENV
ENV_SERVICEBUS_MAX_DELIVERIES = settings.MAX_DELIVERIES_ENV
ENV_TRIGGER_CONNECTION = "ServiceBusConnection__fullyQualifiedNamespace"  #: the host's binding
ENV_WATCHER_SCHEDULE = settings.WATCHER_SCHEDULE_ENV
ENV_TENANT_ID = "AZURE_TENANT_ID"  #: azure-identity's own names (federated watcher)
ENV_CLIENT_ID = "AZURE_CLIENT_ID"
ENV_FEDERATION = settings.FEDERATION_ENV

SERVICEBUS_MAX_LOCK_SECONDS = 300
#: What the Azure worker settles messages through (``ServiceBusMessageActions``, the Functions
#: host's settlement API; installed, it makes ``build_app`` use the SDK-type binding); only
#: pre-releases exist, which the ``b`` in the bound admits.
AZURE_SETTLEMENT = "azurefunctions-extensions-bindings-servicebus>=1.0.0b2,<2"
AZURERM_VERSION = ">= 4.0, < 5.0"
DEFAULT_NAME = "cronwarden"  #: ``deploy render --name`` default: the prefix of every resource name
QUEUE = "cronwarden-runs"  #: the queue of the default name (``queue_name(prefix)`` in general)
WATCHER_SCHEDULE = "0 */5 * * * *"


def queue_name(prefix: str = DEFAULT_NAME) -> str:
    """The Service Bus queue of a deployment named ``prefix`` (the adapter's default for the
    default name)."""
    return f"{prefix}-runs"


def table_name(prefix: str = DEFAULT_NAME) -> str:
    """The state table of a deployment named ``prefix`` (letters and digits only)."""
    return re.sub(r"[^A-Za-z0-9]", "", prefix)


def versions() -> list[Item]:
    provider_body: list[Item] = [Attr("storage_use_azuread", True), Block("features", body=[])]
    return tf.versions("azurerm", "hashicorp/azurerm", AZURERM_VERSION, provider_body)


_variable = tf.variable


def _webhook_variables(prefix: str = DEFAULT_NAME) -> list[Item]:
    vault = tf.secret_reference_variable(
        "webhook_key_vault_id",
        "Resource id of the Key Vault (Azure RBAC) holding the watcher's webhook URL, "
        f"referenced by the app setting {WEBHOOK_ENV}; empty: alerts go to the logs "
        "only. Put the secret in the vault outside Terraform (README.md): the URL is a "
        "credential and never enters the state.",
        'var.webhook_key_vault_id == "" || can(regex("^/subscriptions/[^/]+/'
        'resourceGroups/[^/]+/providers/Microsoft.KeyVault/vaults/[^/]+$", '
        "var.webhook_key_vault_id))",
        "webhook_key_vault_id is a vault's resource id (/subscriptions/<id>/"
        "resourceGroups/<group>/providers/Microsoft.KeyVault/vaults/<name>), "
        "not the URL itself.",
    )
    name = _variable(
        "webhook_secret_name",
        "string",
        "Name of the Key Vault secret holding the watcher's webhook URL.",
        f"{prefix}-webhook",
    )
    return [vault, name]


def webhook_secret() -> Expr:
    """The app's ``key_vault_secret_settings``: the webhook reference when a vault is named (a
    ``for`` expression, so both cases have one map type)."""
    return Expr(
        f"{{ for setting, vault in {{ {WEBHOOK_ENV} = var.webhook_key_vault_id }} : "
        "setting => { key_vault_id = vault, secret_name = var.webhook_secret_name } "
        'if vault != "" }'
    )


def variables(
    sku: str,
    *,
    external_watcher: bool = False,
    watcher_only: bool = False,
    prefix: str = DEFAULT_NAME,
    watcher_provider: str = "gcp",
) -> list[Item]:
    items: list[Item] = [
        _variable("name", "string", "Prefix of every resource name.", prefix),
        _variable(
            "suffix",
            "string",
            "Short lowercase letters/digits making the global names unique (storage account, "
            "function app, Service Bus namespace).",
        ),
        _variable("location", "string", "Azure region.", "westeurope"),
        _variable(
            "resource_group_name",
            "string",
            "Resource group (created unless it exists).",
            prefix,
        ),
        _variable("create_resource_group", "bool", "Create the resource group.", True),
        _variable(
            "sku_name",
            "string",
            "Dedicated App Service plan SKU (B1, S1, P1v3, ...); Always On keeps timers firing.",
            sku,
        ),
        _variable(
            "watcher_schedule",
            "string",
            "How often the liveness watcher runs (NCRONTAB, UTC).",
            WATCHER_SCHEDULE,
        ),
        _variable("tags", "map(string)", "Tags on every resource that takes them.", {}),
    ]
    if not watcher_only:
        items.append(
            _variable("alert_emails", "list(string)", "Who is emailed about dead letters.", [])
        )
    if not external_watcher:  # the app runs the watcher: it may notify a webhook
        items += _webhook_variables(prefix)
    if external_watcher and watcher_provider == "aws":
        items.append(
            _variable(
                "aws_watcher_principal_id",
                "string",
                "Object id of the Entra ID service principal the AWS watcher signs in as "
                "(created outside Terraform: README.md).",
            )
        )
    elif external_watcher:
        items.append(
            _variable(
                "gcp_watcher_service_account_unique_id",
                "string",
                "Numeric unique id of the GCP watcher's service account (output of the watcher "
                "root module).",
            )
        )
    return items


def _names() -> list[Attr]:
    return [
        Attr("storage_account", Expr('"${replace(var.name, "-", "")}${var.suffix}"')),
        Attr("function_app", Expr('"${var.name}-${var.suffix}"')),
        Attr("servicebus", Expr('"${var.name}-${var.suffix}"')),
        Attr("servicebus_fqdn", Expr('"${var.name}-${var.suffix}.servicebus.windows.net"')),
    ]


def _module(label: str, kind: str, body: list[Item], *, tags: bool = True) -> Block:
    """A call of ``./modules/azure/<kind>``: ``body``, then the tags (unless turned off)."""
    tail: list[Item] = [Attr("tags", Expr("var.tags"))] if tags else []
    return tf.module(label, f"./modules/azure/{kind}", [*body, *tail])


def _in_group(first: dict[str, str], rest: dict[str, str]) -> list[Item]:
    """Expression attributes: ``first``, the base module's resource group, then ``rest``."""
    group = {"resource_group_name": "module.base.resource_group_name"}
    return tf.refs({**first, **group, **rest})


def _base(prefix: str = DEFAULT_NAME) -> Block:
    table: list[Item] = [] if prefix == DEFAULT_NAME else [Attr("table_name", table_name(prefix))]
    body = table + tf.refs(
        {
            "name": "var.name",
            "location": "var.location",
            "resource_group_name": "var.resource_group_name",
            "create_resource_group": "var.create_resource_group",
            "storage_account_name": "local.storage_account",
        }
    )
    return _module("base", "base", body)


def _app(settings: Expr, *, watcher: bool, vault_secrets: Expr | None = None) -> Block:
    references = vault_secrets if vault_secrets is not None else webhook_secret()
    secrets: list[Item] = [Attr("key_vault_secret_settings", references)] if watcher else []
    body: list[Item] = [
        *_in_group(
            {"name": "local.function_app"},
            {
                "location": "var.location",
                "sku_name": "var.sku_name",
                "storage_account_name": "module.base.storage_account_name",
                "storage_account_id": "module.base.storage_account_id",
            },
        ),
        Attr("app_settings", settings),
        *secrets,
    ]
    return _module("app", "function-app", body)


def app_settings(*, watcher_here: bool, prefix: str = DEFAULT_NAME) -> dict[str, Any]:
    """cronwarden's app settings on Azure (configuration only, identity-based connections)."""
    return {
        ENV_PROVIDER: "azure",
        ENV_FUNCTIONS: "trigger,worker,watcher" if watcher_here else "trigger,worker",
        ENV_TABLE_ACCOUNT_URL: Expr("module.base.table_endpoint"),
        ENV_TABLE: Expr("module.base.table_name"),
        ENV_SERVICEBUS_NAMESPACE: Expr("local.servicebus_fqdn"),
        ENV_SERVICEBUS_QUEUE: queue_name(prefix),
        ENV_SERVICEBUS_MAX_DELIVERIES: Expr(
            "tostring(module.settings.servicebus.max_delivery_count)"
        ),
        ENV_TRIGGER_CONNECTION: Expr("local.servicebus_fqdn"),
        ENV_WATCHER_SCHEDULE: Expr("var.watcher_schedule"),
    }


def external_watcher_environment(prefix: str) -> dict[str, Any]:
    """Environment of a watcher on GCP that watches the jobs running on Azure: it reaches
    Table Storage and the dead-letter queue by workload identity federation."""
    return {
        ENV_PROVIDER: "azure",
        ENV_FUNCTIONS: "watcher",
        ENV_TABLE_ACCOUNT_URL: Expr(
            '"https://${var.azure_storage_account}.table.core.windows.net/"'
        ),
        ENV_TABLE: table_name(prefix),
        ENV_SERVICEBUS_NAMESPACE: Expr("var.azure_servicebus_namespace"),
        ENV_SERVICEBUS_QUEUE: queue_name(prefix),
        ENV_TENANT_ID: Expr("var.azure_tenant_id"),
        ENV_CLIENT_ID: Expr("var.azure_watcher_client_id"),
        ENV_FEDERATION: "google",
    }


def external_watcher_variables() -> list[Item]:
    """The variables :func:`external_watcher_environment` references."""
    return [
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
    ]


AWS_SECRET_VARIABLE = "azure_client_secret_arn"  # noqa: S105 - a variable name
#: what a watcher on AWS reads from Secrets Manager: azure-identity's EnvironmentCredential name
AWS_WATCHER_SECRETS = {"AZURE_CLIENT_SECRET": AWS_SECRET_VARIABLE}
#: what a watcher on AWS needs to read Table Storage and the dead-letter queue
WATCHER_READS = ("azure-data-tables>=12.5", "azure-servicebus>=7.12", "azure-identity>=1.15")


def aws_watcher_environment(prefix: str) -> dict[str, Any]:
    """Environment of a watcher on AWS (a Lambda function) watching the jobs on Azure: it signs
    in as a service principal (``AZURE_TENANT_ID``, ``AZURE_CLIENT_ID`` here; the client secret
    read from Secrets Manager at cold start, :data:`AWS_WATCHER_SECRETS`)."""
    env = external_watcher_environment(prefix)
    del env[ENV_FEDERATION], env[ENV_FUNCTIONS]
    return env


def aws_watcher_inputs() -> list[Item]:
    """The variables :func:`aws_watcher_environment` and :data:`AWS_WATCHER_SECRETS` use."""
    return [
        _variable("azure_tenant_id", "string", "Entra ID tenant of the jobs' subscription."),
        _variable(
            "azure_watcher_client_id",
            "string",
            "Application (client) id of the watcher's service principal (README.md).",
        ),
        _variable("azure_storage_account", "string", "Storage account holding the job records."),
        _variable(
            "azure_servicebus_namespace",
            "string",
            "Fully qualified Service Bus namespace (<name>.servicebus.windows.net).",
        ),
        Block(
            "variable",
            (AWS_SECRET_VARIABLE,),
            [
                Attr(
                    "description",
                    "ARN of the Secrets Manager secret holding the service principal's client "
                    "secret (created outside Terraform: README.md).",
                ),
                Attr("type", Expr("string")),
                Block(
                    "validation",
                    (),
                    [
                        Attr(
                            "condition",
                            Expr(
                                f'can(regex("^arn:aws[a-z-]*:secretsmanager:", '
                                f"var.{AWS_SECRET_VARIABLE}))"
                            ),
                        ),
                        Attr(
                            "error_message",
                            f"{AWS_SECRET_VARIABLE} is the ARN of a Secrets Manager secret, "
                            "not the secret itself.",
                        ),
                    ],
                ),
            ],
        ),
    ]


def watched_from(prefix: str, host: str) -> rr.Watched | None:
    """A watcher on AWS signs in with a service principal secret kept in Secrets Manager."""
    if host != "aws":
        return None
    return rr.Watched(
        aws_watcher_inputs(),
        aws_watcher_environment(prefix),
        dict(AWS_WATCHER_SECRETS),
        "azure",
        WATCHER_READS,
    )


def _external_reader(watcher_provider: str) -> Block:
    """The access of the watcher in another cloud (GCP: federation; AWS: a service principal)."""
    if watcher_provider == "aws":
        return _module(
            "external_watcher",
            "external-principal",
            tf.refs(
                {
                    "principal_id": "var.aws_watcher_principal_id",
                    "storage_account_id": "module.base.storage_account_id",
                    "queue_id": "module.servicebus.queue_id",
                }
            ),
            tags=False,
        )
    return _module(
        "external_watcher",
        "external-reader",
        _in_group(
            {"name": '"${var.name}-ext-watcher"'},
            {
                "location": "var.location",
                "google_service_account_unique_id": ("var.gcp_watcher_service_account_unique_id"),
                "storage_account_id": "module.base.storage_account_id",
                "queue_id": "module.servicebus.queue_id",
            },
        ),
        tags=False,
    )


def main(
    plan_jobs: dict[str, dict[str, Any]],
    *,
    watcher_here: bool,
    prefix: str = DEFAULT_NAME,
    watcher_provider: str = "gcp",
) -> list[Item]:
    """``main.tf`` for the jobs of a plan (``plan_jobs``: name => settings object); without
    ``watcher_here`` the access of the watcher on ``watcher_provider`` (gcp or aws)."""
    settings = app_settings(watcher_here=watcher_here, prefix=prefix)
    more_locals = [*_names(), Attr("app_settings", settings)]
    items: list[Item] = [
        *tf.jobs_preamble("azure", plan_jobs, more_locals),
        _base(prefix),
        Comment("Per job: CRONWARDEN_SCHEDULE_<JOB> = NCRONTAB in UTC (see README.md)."),
        _app(
            Expr("merge(local.app_settings, module.settings.schedule_settings)"),
            watcher=watcher_here,
        ),
        _module(
            "servicebus",
            "servicebus",
            [
                *_in_group({"name": "local.servicebus"}, {"location": "var.location"}),
                Attr("queue_name", queue_name(prefix)),
                *tf.refs(
                    {
                        "max_delivery_count": "module.settings.servicebus.max_delivery_count",
                        "lock_duration": "module.settings.servicebus.lock_duration",
                    }
                ),
                Attr("senders", {"app": Expr("module.app.principal_id")}),
                Attr("receivers", {"app": Expr("module.app.principal_id")}),
            ],
        ),
        _module(
            "monitoring",
            "monitoring",
            _in_group(
                {"name": "local.function_app"},
                {
                    "namespace_id": "module.servicebus.namespace_id",
                    "queue_name": "module.servicebus.queue_name",
                    "alert_emails": "var.alert_emails",
                },
            ),
        ),
    ]
    if not watcher_here:
        items.append(_external_reader(watcher_provider))
    return items


def watcher_variables(watched: Sequence[Item], prefix: str = DEFAULT_NAME) -> list[Item]:
    """Variables of the watcher-only Azure root module (``watched``: those of the jobs' cloud)."""
    return [*variables(AZURE_SKU, watcher_only=True, prefix=prefix), *watched]


WATCHED_VAULT = "watched_credentials_key_vault_id"  #: the vault of a watched cloud's credential


def watcher_main(
    watched_environment: dict[str, Any],
    secrets: Mapping[str, str] | None = None,
    cloud: str = "gcp",
) -> list[Item]:
    """``main.tf`` of a watcher-only Azure app watching jobs that run on another cloud
    (``watched_environment``: what the watcher needs to reach them; ``secrets``: app setting
    => the variable naming the Key Vault secret holding its value, in the vault
    ``var.watched_credentials_key_vault_id``)."""
    settings = {
        **watched_environment,
        ENV_FUNCTIONS: "watcher",
        ENV_WATCHER_SCHEDULE: Expr("var.watcher_schedule"),
    }
    about = (
        ": the liveness\n"
        "watcher of jobs running on GCP, outside their failure domain. It reaches Firestore\n"
        "and the dead-letter subscription through workload identity federation (no key)."
    )
    vault_secrets = None
    if secrets:
        about = (
            f": the liveness\nwatcher of jobs running on {cloud.upper()}, outside their failure "
            "domain. It reads their credential\nthrough Key Vault references (the value never "
            "enters Terraform)."
        )
        entries = ", ".join(
            f"{name} = {{ key_vault_id = var.{WATCHED_VAULT}, secret_name = var.{variable} }}"
            for name, variable in secrets.items()
        )
        vault_secrets = Expr(f"merge({webhook_secret().text}, {{ {entries} }})")
    return [
        tf.header("cronwarden deploy render --watcher-provider azure", about),
        Block("locals", body=[*_names(), Attr("app_settings", settings)]),
        _base(),
        _app(Expr("local.app_settings"), watcher=True, vault_secrets=vault_secrets),
    ]


def outputs(
    *, watcher_only: bool = False, external_watcher: bool = False, federated: bool = True
) -> list[Item]:
    values = {
        "function_app_name": "module.app.name",
        "function_app_principal_id": "module.app.principal_id",
        "resource_group_name": "module.base.resource_group_name",
    }
    if not watcher_only:
        values["servicebus_namespace"] = "local.servicebus_fqdn"
    if external_watcher and federated:
        values["external_watcher_client_id"] = "module.external_watcher.client_id"
        values["external_watcher_tenant_id"] = "module.external_watcher.tenant_id"
    return tf.outputs(values)


def jobs_root(options: rr.RootOptions) -> rr.TfFiles:
    """The root module running the jobs (and the watcher when ``options.watcher_here``)."""
    external = options.external_watcher
    jobs = {spec.name: spec.terraform() for spec in options.plan.jobs}
    prefix = options.prefix
    watcher_provider = options.watcher_provider or "gcp"
    main_tf = main(
        jobs, watcher_here=options.watcher_here, prefix=prefix, watcher_provider=watcher_provider
    )
    variables_tf = variables(
        AZURE_SKU, external_watcher=external, prefix=prefix, watcher_provider=watcher_provider
    )
    federated = watcher_provider != "aws"
    return rr.tf_files(
        versions(), variables_tf, main_tf, outputs(external_watcher=external, federated=federated)
    )


def watcher_root(prefix: str, watched: rr.Watched) -> rr.TfFiles:
    """The root module (an app) running only the watcher of jobs on another cloud."""
    vault: list[Item] = []
    if watched.secret_environment:
        vault = [
            _variable(
                WATCHED_VAULT,
                "string",
                "Resource id of the Key Vault (Azure RBAC) holding the watched cloud's "
                "credential (README.md).",
            )
        ]
    variables_tf = watcher_variables([*watched.variables, *vault], prefix)
    main_tf = watcher_main(watched.environment, watched.secret_environment, watched.cloud)
    return rr.tf_files(versions(), variables_tf, main_tf, outputs(watcher_only=True))


def check_job(job: rr.JobLimits) -> list[str]:
    """Azure runs every job (a dedicated plan with Always On); a long run outlives the
    Service Bus lock, which the worker renews (a note)."""
    if job.runtime <= SERVICEBUS_MAX_LOCK_SECONDS:
        return []
    return [
        f"{job.name}: Service Bus locks last at most 5 minutes; the worker renews the "
        f"lock for this {job.runtime}s max runtime"
    ]


def azure_function_app(source: JobSource) -> str:
    """``function_app.py`` for the azure-functions v2 programming model."""
    return entry_module(
        source,
        "Azure Functions app, rendered by `cronwarden deploy render`.\n"
        "\n"
        "Timer triggers read each job's schedule from the app setting\n"
        "CRONWARDEN_SCHEDULE_<JOB_NAME_UPPER_UNDERSCORED> (NCRONTAB, UTC); the worker is\n"
        f"triggered by the Service Bus queue {ENV_SERVICEBUS_QUEUE} through the\n"
        f"identity-based connection {ENV_TRIGGER_CONNECTION}.\n",
        "cronwarden.adapters.azure.functions.build_app",
        "app = build_app({jobs})",
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


def package_files(plan: Plan, source: JobSource, runs_worker: bool) -> rr.PackageFiles:
    """The app's entry module and host.json; where the app runs the worker, the host's
    settlement package (the worker settles messages through it)."""
    files = {"function_app.py": azure_function_app(source), "host.json": host_json(plan)}
    return rr.PackageFiles(files, (AZURE_SETTLEMENT,) if runs_worker else ())


RENDERER = rr.CloudRenderer(
    "azure",
    jobs_root,
    watcher_root,
    watcher_host="gcp",
    watcher_hosts=("aws",),
    watched_from=watched_from,
    watcher_variables=external_watcher_variables,
    watcher_environment=external_watcher_environment,
    check_job=check_job,
    timer_schedule=utc_ncrontab,
    package=package_files,
    watcher_requirements=WATCHER_READS,  # a watcher elsewhere reads this cloud with these
)

__all__ = ["RENDERER", "WEBHOOK_ENV"]
