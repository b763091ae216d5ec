"""The README.md and terraform.tfvars.example of a rendered root module."""

from __future__ import annotations

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


def root_readme(
    provider: str,
    plan: Plan,
    source: JobSource,
    *,
    prefix: str,
    watcher_here: bool,
    watcher_only: bool,
) -> str:
    """README.md of one rendered root module."""
    cloud = "Google Cloud" if provider == "gcp" else "Azure"
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
    if not watcher_here:
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


def tfvars_example(provider: str, *, watcher_only: bool, external_watcher: bool) -> str:
    """terraform.tfvars.example: the variables a user must (or may) set."""
    if provider == "gcp" and watcher_only:
        return (
            'project                    = "my-watcher-project"\n'
            'region                     = "europe-west1"\n'
            'azure_tenant_id            = "00000000-0000-0000-0000-000000000000"\n'
            'azure_watcher_client_id    = "00000000-0000-0000-0000-000000000000"\n'
            'azure_storage_account      = "cronwardenabc123"\n'
            'azure_servicebus_namespace = "cronwarden-abc123.servicebus.windows.net"\n'
        )
    if provider == "gcp":
        text = (
            'project            = "my-project"\n'
            'region             = "europe-west1"\n'
            'firestore_location = "eur3"\n'
            '# notification_channels = ["projects/my-project/notificationChannels/123"]\n'
        )
        if external_watcher:
            text += (
                'azure_tenant_id            = "00000000-0000-0000-0000-000000000000"\n'
                'azure_watcher_principal_id = "00000000-0000-0000-0000-000000000000"\n'
            )
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
    elif external_watcher:
        text += 'gcp_watcher_service_account_unique_id = "123456789012345678901"\n'
    else:
        text += '# alert_emails = ["oncall@example.com"]\n'
    return text


__all__ = ["root_readme", "tfvars_example"]
