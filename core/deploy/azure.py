"""The Azure root module: which modules under ``modules/`` are composed, with what values.

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

from typing import Any

from .hcl import Attr, Block, Comment, Expr, Item

AZURERM_VERSION = ">= 4.0, < 5.0"
QUEUE = "cronwarden-runs"
WEBHOOK_ENV = "CRONWARDEN_WEBHOOK_URL"  #: what the watcher reads
WATCHER_SCHEDULE = "0 */5 * * * *"


def versions() -> list[Item]:
    return [
        Block(
            "terraform",
            body=[
                Attr("required_version", ">= 1.5"),
                Block(
                    "required_providers",
                    body=[
                        Attr("azurerm", {"source": "hashicorp/azurerm", "version": AZURERM_VERSION})
                    ],
                ),
            ],
        ),
        Block(
            "provider",
            ("azurerm",),
            [
                Attr("storage_use_azuread", True),
                Block("features", body=[]),
            ],
        ),
    ]


def _variable(name: str, type_: str, description: str, default: Any = ...) -> Block:
    body: list[Item] = [Attr("description", description), Attr("type", Expr(type_))]
    if default is not ...:
        body.append(Attr("default", default))
    return Block("variable", (name,), body)


def _webhook_variables() -> list[Item]:
    vault = Block(
        "variable",
        ("webhook_key_vault_id",),
        [
            Attr(
                "description",
                "Resource id of the Key Vault (Azure RBAC) holding the watcher's webhook URL, "
                f"referenced by the app setting {WEBHOOK_ENV}; empty: alerts go to the logs "
                "only. Put the secret in the vault outside Terraform (README.md): the URL is a "
                "credential and never enters the state.",
            ),
            Attr("type", Expr("string")),
            Attr("default", ""),
            Block(
                "validation",
                body=[
                    Attr(
                        "condition",
                        Expr(
                            'var.webhook_key_vault_id == "" || can(regex("^/subscriptions/[^/]+/'
                            'resourceGroups/[^/]+/providers/Microsoft.KeyVault/vaults/[^/]+$", '
                            "var.webhook_key_vault_id))"
                        ),
                    ),
                    Attr(
                        "error_message",
                        "webhook_key_vault_id is a vault's resource id (/subscriptions/<id>/"
                        "resourceGroups/<group>/providers/Microsoft.KeyVault/vaults/<name>), "
                        "not the URL itself.",
                    ),
                ],
            ),
        ],
    )
    name = _variable(
        "webhook_secret_name",
        "string",
        "Name of the Key Vault secret holding the watcher's webhook URL.",
        "cronwarden-webhook",
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
    sku: str, *, external_watcher: bool = False, watcher_only: bool = False
) -> list[Item]:
    items: list[Item] = [
        _variable("name", "string", "Prefix of every resource name.", "cronwarden"),
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
            "cronwarden",
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
        items += _webhook_variables()
    if external_watcher:
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


def _base() -> Block:
    return Block(
        "module",
        ("base",),
        [
            Attr("source", "./modules/azure/base"),
            Attr("name", Expr("var.name")),
            Attr("location", Expr("var.location")),
            Attr("resource_group_name", Expr("var.resource_group_name")),
            Attr("create_resource_group", Expr("var.create_resource_group")),
            Attr("storage_account_name", Expr("local.storage_account")),
            Attr("tags", Expr("var.tags")),
        ],
    )


def _app(settings: Expr, *, watcher: bool) -> Block:
    secrets: list[Item] = [Attr("key_vault_secret_settings", webhook_secret())] if watcher else []
    return Block(
        "module",
        ("app",),
        [
            Attr("source", "./modules/azure/function-app"),
            Attr("name", Expr("local.function_app")),
            Attr("resource_group_name", Expr("module.base.resource_group_name")),
            Attr("location", Expr("var.location")),
            Attr("sku_name", Expr("var.sku_name")),
            Attr("storage_account_name", Expr("module.base.storage_account_name")),
            Attr("storage_account_id", Expr("module.base.storage_account_id")),
            Attr("app_settings", settings),
            *secrets,
            Attr("tags", Expr("var.tags")),
        ],
    )


def app_settings(*, watcher_here: bool) -> dict[str, Any]:
    """cronwarden's app settings on Azure (configuration only, identity-based connections)."""
    return {
        "CRONWARDEN_PROVIDER": "azure",
        "CRONWARDEN_FUNCTIONS": "trigger,worker,watcher" if watcher_here else "trigger,worker",
        "CRONWARDEN_AZURE_TABLE_ACCOUNT_URL": Expr("module.base.table_endpoint"),
        "CRONWARDEN_AZURE_TABLE": Expr("module.base.table_name"),
        "CRONWARDEN_SERVICEBUS_NAMESPACE": Expr("local.servicebus_fqdn"),
        "CRONWARDEN_SERVICEBUS_QUEUE": QUEUE,
        "CRONWARDEN_SERVICEBUS_MAX_DELIVERIES": Expr(
            "tostring(module.settings.servicebus.max_delivery_count)"
        ),
        "ServiceBusConnection__fullyQualifiedNamespace": Expr("local.servicebus_fqdn"),
        "CRONWARDEN_WATCHER_SCHEDULE": Expr("var.watcher_schedule"),
    }


def main(plan_jobs: dict[str, dict[str, Any]], *, watcher_here: bool) -> list[Item]:
    """``main.tf`` for the jobs of a plan (``plan_jobs``: name => settings object)."""
    items: list[Item] = [
        Comment(
            "Rendered by `cronwarden deploy render --provider azure` from the job definitions.\n"
            "Re-render after changing a job; edit the modules under modules/ only to change the\n"
            "shape of the deployment."
        ),
        Block(
            "locals",
            body=[
                Attr("jobs", plan_jobs),
                *_names(),
                Attr("app_settings", app_settings(watcher_here=watcher_here)),
            ],
        ),
        Block(
            "module",
            ("settings",),
            [Attr("source", "./modules/common/settings"), Attr("jobs", Expr("local.jobs"))],
        ),
        _base(),
        Comment("Per job: CRONWARDEN_SCHEDULE_<JOB> = NCRONTAB in UTC (see README.md)."),
        _app(
            Expr("merge(local.app_settings, module.settings.schedule_settings)"),
            watcher=watcher_here,
        ),
        Block(
            "module",
            ("servicebus",),
            [
                Attr("source", "./modules/azure/servicebus"),
                Attr("name", Expr("local.servicebus")),
                Attr("resource_group_name", Expr("module.base.resource_group_name")),
                Attr("location", Expr("var.location")),
                Attr("queue_name", QUEUE),
                Attr("max_delivery_count", Expr("module.settings.servicebus.max_delivery_count")),
                Attr("lock_duration", Expr("module.settings.servicebus.lock_duration")),
                Attr("senders", {"app": Expr("module.app.principal_id")}),
                Attr("receivers", {"app": Expr("module.app.principal_id")}),
                Attr("tags", Expr("var.tags")),
            ],
        ),
        Block(
            "module",
            ("monitoring",),
            [
                Attr("source", "./modules/azure/monitoring"),
                Attr("name", Expr("local.function_app")),
                Attr("resource_group_name", Expr("module.base.resource_group_name")),
                Attr("namespace_id", Expr("module.servicebus.namespace_id")),
                Attr("queue_name", Expr("module.servicebus.queue_name")),
                Attr("alert_emails", Expr("var.alert_emails")),
                Attr("tags", Expr("var.tags")),
            ],
        ),
    ]
    if not watcher_here:
        items.append(
            Block(
                "module",
                ("external_watcher",),
                [
                    Attr("source", "./modules/azure/external-reader"),
                    Attr("name", Expr('"${var.name}-ext-watcher"')),
                    Attr("resource_group_name", Expr("module.base.resource_group_name")),
                    Attr("location", Expr("var.location")),
                    Attr(
                        "google_service_account_unique_id",
                        Expr("var.gcp_watcher_service_account_unique_id"),
                    ),
                    Attr("storage_account_id", Expr("module.base.storage_account_id")),
                    Attr("queue_id", Expr("module.servicebus.queue_id")),
                ],
            )
        )
    return items


def watcher_main(gcp_environment: dict[str, Any]) -> list[Item]:
    """``main.tf`` of a watcher-only Azure app watching jobs that run on GCP."""
    settings = {
        **gcp_environment,
        "CRONWARDEN_FUNCTIONS": "watcher",
        "CRONWARDEN_WATCHER_SCHEDULE": Expr("var.watcher_schedule"),
    }
    return [
        Comment(
            "Rendered by `cronwarden deploy render --watcher-provider azure`: the liveness\n"
            "watcher of jobs running on GCP, outside their failure domain. It reaches Firestore\n"
            "and the dead-letter subscription through workload identity federation (no key)."
        ),
        Block("locals", body=[*_names(), Attr("app_settings", settings)]),
        _base(),
        _app(Expr("local.app_settings"), watcher=True),
    ]


def outputs(*, watcher_only: bool = False, external_watcher: bool = False) -> list[Item]:
    items: list[Item] = [
        Block("output", ("function_app_name",), [Attr("value", Expr("module.app.name"))]),
        Block(
            "output",
            ("function_app_principal_id",),
            [Attr("value", Expr("module.app.principal_id"))],
        ),
        Block(
            "output",
            ("resource_group_name",),
            [Attr("value", Expr("module.base.resource_group_name"))],
        ),
    ]
    if not watcher_only:
        items.append(
            Block(
                "output",
                ("servicebus_namespace",),
                [Attr("value", Expr("local.servicebus_fqdn"))],
            )
        )
    if external_watcher:
        items += [
            Block(
                "output",
                ("external_watcher_client_id",),
                [Attr("value", Expr("module.external_watcher.client_id"))],
            ),
            Block(
                "output",
                ("external_watcher_tenant_id",),
                [Attr("value", Expr("module.external_watcher.tenant_id"))],
            ),
        ]
    return items


__all__ = ["app_settings", "main", "outputs", "variables", "versions", "watcher_main"]
