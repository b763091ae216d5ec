"""The README.md and terraform.tfvars.example of a rendered root module."""

from __future__ import annotations

from cronwarden.model.errors import ConfigurationError

from .package import JobSource
from .spec import Plan


def _job_table(plan: Plan, provider: str) -> list[str]:
    if provider == "azure":
        rows = [
            "| job | cron (time zone) | timer app setting | NCRONTAB (UTC) | max runtime "
            "| attempts |",
            "|---|---|---|---|---|---|",
        ]
        rows += [
            f"| {j.name} | `{j.cron}` ({j.time_zone}) | `{j.schedule_setting}` | "
            f"`{j.ncrontab_utc}` | {j.max_runtime_seconds}s | {j.max_attempts} |"
            for j in plan.jobs
        ]
    else:
        rows = [
            "| job | Cloud Scheduler cron | time zone | max runtime | attempts | backoff |",
            "|---|---|---|---|---|---|",
        ]
        rows += [
            f"| {j.name} | `{j.cron}` | {j.time_zone} | {j.max_runtime_seconds}s | "
            f"{j.max_attempts} | {j.min_backoff_seconds}s..{j.max_backoff_seconds}s |"
            for j in plan.jobs
        ]
    return rows


_GCP_STEPS = """\
```bash
cp terraform.tfvars.example terraform.tfvars   # set project (and region, firestore_location)
terraform init
terraform apply                                 # uploads function.zip, creates everything
cronwarden deploy check .                       # optional: the offline checks again
```"""

_AZURE_STEPS = """\
```bash
cp terraform.tfvars.example terraform.tfvars   # set suffix (and location)
terraform init
terraform apply
az functionapp deployment source config-zip --build-remote true \\
  --resource-group "$(terraform output -raw resource_group_name)" \\
  --name "$(terraform output -raw function_app_name)" --src function.zip
```"""

_AZURE_TIMERS = """\
Azure timers run in UTC here (`WEBSITE_TIME_ZONE` is app-wide and not on every plan). Each
job's NCRONTAB fires at every UTC instant its local fire time maps to across the time zone's
offsets (e.g. `0 2 * * *` in Europe/Berlin fires at 00:00 and 01:00 UTC); the trigger floors each
tick to the job's window in its own time zone, so the tick that is not a window start maps to
the previous window, which already ran, and is logged as a duplicate. On the spring-forward day a
job scheduled inside the skipped hour runs at the next tick."""


_GCP_WEBHOOK = """\
The watcher posts alerts to `$CRONWARDEN_WEBHOOK_URL` when it is set (a Slack-compatible
webhook). The URL is a credential: it lives in Secret Manager, and Terraform only names the
secret, so the value never enters `terraform.tfvars` or the state:

```bash
read -rs WEBHOOK_URL   # paste the URL; it stays out of the shell history
printf '%s' "$WEBHOOK_URL" | gcloud secrets create cronwarden-webhook --data-file=- \\
  --replication-policy=automatic --project=YOUR_PROJECT
echo 'webhook_secret = "cronwarden-webhook"' >> terraform.tfvars && terraform apply
```

The watcher function gets it as a secret environment variable (version `latest`, read when an
instance starts); only the watcher's service account may read it (`secretAccessor` on that
secret). To rotate: `gcloud secrets versions add cronwarden-webhook --data-file=-`; new
instances read the new version (redeploy the watcher to switch at once)."""

_AZURE_WEBHOOK = """\
The watcher posts alerts to `CRONWARDEN_WEBHOOK_URL` when it is set (a Slack-compatible
webhook). The URL is a credential: it lives in a Key Vault (Azure RBAC authorization) and the
app setting is a Key Vault reference, resolved by the platform with the app's identity, so the
value never enters `terraform.tfvars` or the state:

```bash
read -rs WEBHOOK_URL   # paste the URL; it stays out of the shell history
az keyvault secret set --vault-name "$VAULT" --name {prefix}-webhook \\
  --value "$WEBHOOK_URL" -o none
VAULT_ID=$(az keyvault show --name "$VAULT" --query id -o tsv)
echo "webhook_key_vault_id = \\"$VAULT_ID\\"" >> terraform.tfvars && terraform apply
```

The app setting becomes `@Microsoft.KeyVault(VaultName=<vault>;SecretName={prefix}-webhook)`
(`webhook_secret_name` to change the name) and the app's identity gets Key Vault Secrets User on
that secret only. A new secret version is picked up within 24 hours, or at once with
`az functionapp restart`; if the reference shows an access error right after the first apply,
the role assignment was still propagating: restart the app."""

_GCP_DEAD_LETTERS = """\
- `{runs}`: run requests the worker could not complete (attempts exhausted, malformed, unknown
  job). Fix the cause, then `cronwarden dlq redrive --provider gcp`.
- `{ticks}`: schedule ticks the trigger could not turn into run requests (it failed on every
  attempt, or the tick was malformed: reason `MalformedTick`). **Do not redrive them**: a tick is
  not a run request, and a re-published tick would carry a new publish time, i.e. the wrong
  window. A lost window is recovered by the job's catch-up policy at its next tick, by
  `cronwarden trigger JOB --window WINDOW --no-wait --provider gcp`, or by `cronwarden backfill`.
  Read them with `CRONWARDEN_GCP_DEAD_LETTER_SUBSCRIPTION={ticks} cronwarden dlq list
  --provider gcp`, then clear them with
  `gcloud pubsub subscriptions seek {ticks} --time="$(date -u +%Y-%m-%dT%H:%M:%SZ)"`.

Each has a Cloud Monitoring alert (`notification_channels`)."""


_GCP_PULL = """\
Rendered with `--gcp-worker pull`: there is no worker function. Run requests wait on the pull
subscription `{subscription}` (same dead-letter and retry policies as a push subscription)
for the pull worker, which you host: a long-running process with CPU always allocated, on GKE,
a VM or a Cloud Run worker pool (it serves no HTTP port, so not a Cloud Run service). A pulled
delivery stays invisible for the whole lease (the worker re-extends it past Pub/Sub's 600 s), so
runs may last longer than a push delivery allows. It runs the same package as the functions:

```bash
terraform output -raw pull_worker_service_account   # run the host as this service account
terraform output -json pull_worker_environment      # its environment (configuration only)
cd function && pip install -r requirements.txt
python -m cronwarden.adapters.gcp.serve --jobs {module} --threads 2
```

A container image for it: `FROM python:3.11-slim`, `COPY function/ /app`, `WORKDIR /app`,
`RUN pip install --no-cache-dir -r requirements.txt`,
`CMD ["python", "-m", "cronwarden.adapters.gcp.serve", "--jobs", "{module}", "--threads", "2"]`.
The service account may pull and settle (subscriber on the subscription), publish run requests
and dead letters, and use Firestore; nothing else. SIGTERM stops it cleanly (running handlers
are asked to stop cooperatively and their deliveries are retried). Run two or more replicas for
availability: a delivery is leased to one worker at a time, and the run record dedupes
redeliveries."""


_CLOUDS = {"gcp": "Google Cloud", "azure": "Azure"}  #: the providers this README knows


def _cloud_name(provider: str) -> str:
    try:
        return _CLOUDS[provider]
    except KeyError:
        raise ConfigurationError(
            f"no README is rendered for provider {provider!r} (its steps belong in "
            "cronwarden.deploy.readme)"
        ) from None


def root_readme(
    provider: str,
    plan: Plan,
    source: JobSource,
    *,
    prefix: str,
    watcher_here: bool,
    watcher_only: bool,
    gcp_worker: str = "push",
    watcher_provider: str = "",
) -> str:
    """README.md of one rendered root module (``watcher_provider``: where the watcher runs)."""
    cloud = _cloud_name(provider)
    lines = [f"# cronwarden deployment: {cloud}", ""]
    if watcher_only:
        lines += [
            "This root module runs only the **liveness watcher**, outside the failure domain of",
            "the jobs it watches (they run in the other cloud; see `../README.md`). Apply the",
            "jobs' root module first, then this one, then set the jobs' root module variables",
            "that name this watcher's identity and apply it again.",
            "",
        ]
    lines += [
        f"Rendered by `cronwarden deploy render` from the job module `{source.import_name}`",
        f"(deployment name `{prefix}`). Do not edit the generated files: change the jobs and",
        "render again (Terraform state and `terraform.tfvars` are kept).",
        "",
        "## Jobs",
        "",
        *_job_table(plan, provider),
        "",
    ]
    if plan.notes:
        lines += ["## Notes", "", *(f"- {note}" for note in plan.notes), ""]
    lines += ["## Deploy", "", _GCP_STEPS if provider == "gcp" else _AZURE_STEPS, ""]
    if provider == "azure" and not watcher_only:
        lines += ["## Schedules and time zones", "", _AZURE_TIMERS, ""]
    if provider == "gcp" and gcp_worker == "pull":
        lines += [
            "## Pull worker",
            "",
            _GCP_PULL.format(module=source.import_name, subscription=f"{prefix}-worker"),
            "",
        ]
    if provider == "gcp" and not watcher_only:
        lines += [
            "## Dead letters",
            "",
            _GCP_DEAD_LETTERS.format(
                runs=f"{prefix}-worker-dead-letter", ticks=f"{prefix}-trigger-dead-letter"
            ),
            "",
        ]
    if watcher_here:
        webhook = _GCP_WEBHOOK if provider == "gcp" else _AZURE_WEBHOOK.format(prefix=prefix)
        lines += ["## Alert webhook (optional)", "", webhook, ""]
    if not watcher_here and watcher_provider == "aws" and not watcher_only:
        lines += ["## Watcher on AWS", "", _AWS_WATCHER[provider], ""]
    elif not watcher_here:
        lines += [
            "## Watcher in the other cloud",
            "",
            "The liveness watcher is rendered into `watcher/`. This module grants it access",
            "through workload identity federation (no key crosses clouds); see",
            "`docs/switching-providers.md` in cronwarden for the order of applies.",
            "",
        ]
    lines += [
        "## Function package",
        "",
        "`function/` (zipped as `function.zip`) holds the entry module, `requirements.txt`",
        "pinning cronwarden, and your job module (a module file, or its whole top-level",
        "package). Your jobs' own dependencies come from `--requirements FILE` at render time",
        "(edits inside `function/` are replaced by the next render); `--wheel` vendors a",
        "cronwarden wheel instead of the released pin. No secret is ever rendered: the",
        "functions authenticate with their own identities.",
        "",
    ]
    return "\n".join(lines)


_AWS_WATCHER = {
    "gcp": (
        "The liveness watcher is a Lambda function rendered into `watcher/`. This module\n"
        "grants it access through workload identity federation from its execution role (a\n"
        "pool with an AWS provider trusting `aws_account_id`, bound to the role\n"
        "`aws_watcher_role_name` only): no key exists anywhere. Apply this module first (the\n"
        "role name defaults to the one `watcher/` creates), then `watcher/` with the outputs\n"
        "`external_watcher_provider` and `external_watcher_service_account`\n"
        "(docs/deploy-aws.md in cronwarden)."
    ),
    "azure": (
        "The liveness watcher is a Lambda function rendered into `watcher/`. A Lambda role has\n"
        "no token Entra ID can federate, so the watcher signs in as a service principal you\n"
        "create outside Terraform (`aws_watcher_principal_id`); this module gives it Storage\n"
        "Table Data Contributor and Service Bus Data Receiver, nothing else. Its client\n"
        "secret lives only in AWS Secrets Manager (`watcher/README.md`), never in Terraform."
    ),
}


def tfvars_example(
    provider: str, *, watcher_only: bool, external_watcher: bool, watcher_provider: str = ""
) -> str:
    """terraform.tfvars.example: the variables a user must (or may) set."""
    if provider == "gcp" and watcher_only:
        return (
            'project                    = "my-watcher-project"\n'
            'region                     = "europe-west1"\n'
            'azure_tenant_id            = "00000000-0000-0000-0000-000000000000"\n'
            'azure_watcher_client_id    = "00000000-0000-0000-0000-000000000000"\n'
            'azure_storage_account      = "cronwardenabc123"\n'
            'azure_servicebus_namespace = "cronwarden-abc123.servicebus.windows.net"\n'
            '# webhook_secret           = "cronwarden-webhook"   # Secret Manager id (README.md)\n'
        )
    if provider == "gcp":
        text = (
            'project            = "my-project"\n'
            'region             = "europe-west1"\n'
            'firestore_location = "eur3"\n'
            '# notification_channels = ["projects/my-project/notificationChannels/123"]\n'
        )
        if external_watcher and watcher_provider == "aws":
            text += 'aws_account_id = "123456789012"\n'
        elif external_watcher:
            text += (
                'azure_tenant_id            = "00000000-0000-0000-0000-000000000000"\n'
                'azure_watcher_principal_id = "00000000-0000-0000-0000-000000000000"\n'
            )
        else:
            text += '# webhook_secret = "cronwarden-webhook"   # Secret Manager id (README.md)\n'
        return text
    text = 'suffix   = "abc123"\nlocation = "westeurope"\n'
    if watcher_only:
        text += (
            'gcp_project                    = "my-project"\n'
            'gcp_workload_identity_provider = "projects/123/locations/global/'
            'workloadIdentityPools/cronwarden-ext-watcher/providers/azure"\n'
            "gcp_watcher_service_account    = "
            '"cronwarden-ext-watcher@my-project.iam.gserviceaccount.com"\n'
        )
    elif external_watcher and watcher_provider == "aws":
        text += 'aws_watcher_principal_id = "00000000-0000-0000-0000-000000000000"\n'
    elif external_watcher:
        text += 'gcp_watcher_service_account_unique_id = "123456789012345678901"\n'
    else:
        text += '# alert_emails = ["oncall@example.com"]\n'
    if not external_watcher:
        text += (
            "# webhook_key_vault_id = "
            '"/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.KeyVault/vaults/'
            '<name>"   # README.md\n'
        )
    return text


__all__ = ["root_readme", "tfvars_example"]
