"""Rendering: golden files for the example jobs, the function package, refusals.

Regenerate the golden files after an intended change::

    CRONWARDEN_UPDATE_GOLDEN=1 pytest tests/deploy/test_render.py
"""

from __future__ import annotations

import filecmp
import os
import py_compile
import shutil
import zipfile
from pathlib import Path

import pytest

import cronwarden
from cronwarden.deploy import files
from cronwarden.deploy.package import AZURE_SETTLEMENT
from cronwarden.deploy.render import MARKER, Rendered, render
from cronwarden.model.errors import ConfigurationError, InvalidJobDefinition

from .conftest import CASES, EXAMPLES

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("CRONWARDEN_UPDATE_GOLDEN") == "1"


def golden_files(root: Path) -> dict[str, str]:
    """Rendered text files; modules/ and the copied job module are verbatim copies, checked by
    other tests."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or "modules" in rel.parts or path.suffix == ".zip":
            continue
        if rel.parent.name == "function" and (EXAMPLES / path.name).exists():
            continue
        out[rel.as_posix()] = path.read_text(encoding="utf-8")
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str, rendered: dict[str, Rendered]) -> None:
    actual = golden_files(rendered[case].out)
    folder = GOLDEN / case
    if UPDATE:
        shutil.rmtree(folder, ignore_errors=True)
        for rel, text in actual.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text, encoding="utf-8")
    expected = golden_files(folder)
    assert sorted(actual) == sorted(expected), "rendered file set changed"
    for rel, text in actual.items():
        assert text == expected[rel], f"{case}/{rel} differs from the golden file"


@pytest.mark.parametrize("case", sorted(CASES))
def test_modules_are_verbatim_copies(case: str, rendered: dict[str, Rendered]) -> None:
    for root in rendered[case].roots:
        cloud = next(c for c in ("gcp", "azure", "aws") if (root / "modules" / c).exists())
        for part in ("common/settings", cloud):
            cmp = filecmp.dircmp(files.terraform_modules() / part, root / "modules" / part)
            assert not (cmp.left_only or cmp.right_only or cmp.diff_files), part


def test_function_packages(rendered: dict[str, Rendered]) -> None:
    gcp = rendered["gcp-quarter-hourly"].out / "function"
    assert sorted(p.name for p in gcp.iterdir()) == [
        "main.py",
        "quarter_hourly.py",
        "requirements.txt",
    ]
    assert f"cronwarden[gcp]=={cronwarden.__version__}" in (gcp / "requirements.txt").read_text()
    main = (gcp / "main.py").read_text()
    assert "from cronwarden.adapters.gcp.functions import make_functions" in main
    assert "import quarter_hourly as jobs_module" in main
    assert "trigger, worker, watcher = make_functions(jobs_module)" in main
    azure = rendered["azure-nightly"].out / "function"
    assert sorted(p.name for p in azure.iterdir()) == [
        "function_app.py",
        "host.json",
        "nightly_export.py",
        "requirements.txt",
    ]
    assert (
        f"cronwarden[azure]=={cronwarden.__version__}" in (azure / "requirements.txt").read_text()
    )
    app = (azure / "function_app.py").read_text()
    assert "from cronwarden.adapters.azure.functions import build_app" in app
    assert "app = build_app(jobs_module)" in app
    for package, module in ((gcp, "quarter_hourly.py"), (azure, "nightly_export.py")):
        assert (package / module).read_bytes() == (EXAMPLES / module).read_bytes()
    for entry in (gcp / "main.py", azure / "function_app.py"):
        py_compile.compile(str(entry), doraise=True)  # compiles; never imported here


def test_zip_is_reproducible(rendered: dict[str, Rendered], tmp_path: Path) -> None:
    again = render("gcp", str(EXAMPLES / "quarter_hourly.py"), tmp_path / "again")
    first = (rendered["gcp-quarter-hourly"].out / "function.zip").read_bytes()
    assert (again.out / "function.zip").read_bytes() == first
    with zipfile.ZipFile(again.out / "function.zip") as archive:
        assert sorted(archive.namelist()) == ["main.py", "quarter_hourly.py", "requirements.txt"]


def test_rerender_keeps_terraform_state(tmp_path: Path) -> None:
    out = tmp_path / "out"
    render("azure", str(EXAMPLES / "quarter_hourly.py"), out)
    (out / "terraform.tfstate").write_text("{}")
    (out / "terraform.tfvars").write_text('suffix = "x1"\n')
    (out / ".terraform").mkdir()
    render("azure", str(EXAMPLES / "quarter_hourly.py"), out)
    assert (out / "terraform.tfstate").read_text() == "{}"
    assert (out / "terraform.tfvars").exists() and (out / ".terraform").is_dir()
    assert (out / MARKER).exists()


def test_refuses_a_foreign_folder(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("mine")
    with pytest.raises(ConfigurationError, match="not empty and was not rendered by cronwarden"):
        render("gcp", str(EXAMPLES / "quarter_hourly.py"), tmp_path)


def test_vendored_wheel(tmp_path: Path) -> None:
    wheel = tmp_path / "cronwarden-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"not really a wheel")
    result = render("gcp", str(EXAMPLES / "quarter_hourly.py"), tmp_path / "o", wheel=wheel)
    package = result.out / "function"
    assert (package / wheel.name).exists()
    assert f"./{wheel.name}[gcp]" in (package / "requirements.txt").read_text()


def _jobs_file(tmp_path: Path, body: str, name: str = "myjobs.py") -> str:
    path = tmp_path / name
    path.write_text("import cronwarden\n\n" + body)
    return str(path)


def test_refuses_dom_and_dow_on_azure_only(tmp_path: Path) -> None:
    target = _jobs_file(
        tmp_path,
        '@cronwarden.job("both-days", cron="0 3 1 * MON", max_runtime="1m")\ndef both(ctx): ...\n',
    )
    with pytest.raises(
        InvalidJobDefinition, match=r"job 'both-days'.*both day-of-month and day-of-week"
    ):
        render("azure", target, tmp_path / "a")
    render("gcp", target, tmp_path / "g")  # Cloud Scheduler has the same OR semantics as cron
    with pytest.raises(InvalidJobDefinition, match="both day-of-month"):
        render("gcp", target, tmp_path / "w", watcher_provider="azure")


def test_refuses_runs_longer_than_a_push_delivery(tmp_path: Path) -> None:
    """A push delivery is bounded by the subscription's ack deadline (<= 600 s, not
    extendable): max_runtime + the 30 s margin must fit, so 570 s is the most on GCP."""
    fits = _jobs_file(
        tmp_path,
        '@cronwarden.job("fits", cron="0 3 * * *", max_runtime="570s")\ndef fits(ctx): ...\n',
        name="fits.py",
    )
    result = render("gcp", fits, tmp_path / "fits")
    assert result.plan.longest_runtime == 570
    target = _jobs_file(
        tmp_path,
        '@cronwarden.job("long", cron="0 3 * * *", max_runtime="571s")\ndef long(ctx): ...\n',
    )
    with pytest.raises(InvalidJobDefinition) as refused:
        render("gcp", target, tmp_path / "g")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("job 'long': max_runtime 571s is over the 570s a Pub/Sub push")
    assert "--gcp-worker pull" in message
    assert "python -m cronwarden.adapters.gcp.serve" in message
    assert not (tmp_path / "g").exists()  # refused before anything is written
    result = render("azure", target, tmp_path / "a")  # a dedicated plan: no 10-minute limit
    assert 'default     = "B1"' in (result.out / "variables.tf").read_text()
    # Only the cloud running the jobs limits them: a GCP-hosted watcher does not.
    watched = render("azure", target, tmp_path / "w", watcher_provider="gcp")
    assert (watched.out / "watcher" / "main.tf").exists()
    assert not any("Pub/Sub" in note for note in watched.plan.notes)


def test_the_nightly_example_needs_the_pull_worker_on_gcp(
    tmp_path: Path, rendered: dict[str, Rendered]
) -> None:
    with pytest.raises(InvalidJobDefinition, match="job 'nightly-export': max_runtime 900s"):
        render("gcp", str(EXAMPLES / "nightly_export.py"), tmp_path / "g")
    pull = rendered["gcp-nightly-pull"]  # --gcp-worker pull: no per-delivery bound
    main = (pull.out / "main.tf").read_text()
    assert 'module "worker"' not in main and 'module "trigger"' in main
    assert 'resource "google_service_account" "pull_worker"' in main
    runs = main[main.index('module "runs"') :]
    runs = runs[: runs.index("\n}\n")]
    assert "push_endpoint" not in runs and "subscribers" in runs
    assert "worker = google_service_account.pull_worker.member" in runs
    readme = (pull.out / "README.md").read_text()
    assert "python -m cronwarden.adapters.gcp.serve --jobs nightly_export" in readme
    outputs = (pull.out / "outputs.tf").read_text()
    assert "pull_worker_environment" in outputs and "worker_url" not in outputs


def test_gcp_worker_option_is_checked(tmp_path: Path) -> None:
    target = str(EXAMPLES / "quarter_hourly.py")
    with pytest.raises(ConfigurationError, match="--gcp-worker applies only to --provider gcp"):
        render("azure", target, tmp_path / "a", gcp_worker="pull")
    with pytest.raises(ConfigurationError, match="unknown --gcp-worker 'poll'"):
        render("gcp", target, tmp_path / "b", gcp_worker="poll")


def test_clamps_pubsub_attempts_with_a_note(tmp_path: Path) -> None:
    target = _jobs_file(
        tmp_path,
        '@cronwarden.job("few", cron="*/5 * * * *", max_runtime="1m",'
        " retry=cronwarden.Retry(max_attempts=2))\ndef few(ctx): ...\n",
    )
    result = render("gcp", target, tmp_path / "g")
    assert any("at least 5 delivery attempts" in note for note in result.plan.notes)
    assert "max_attempts        = 2" in (result.out / "main.tf").read_text()


def test_refuses_reserved_module_names(tmp_path: Path) -> None:
    target = _jobs_file(
        tmp_path,
        '@cronwarden.job("x-job", cron="*/5 * * * *", max_runtime="1m")\ndef x(ctx): ...\n',
        name="main.py",
    )
    with pytest.raises(ConfigurationError, match="rename job module 'main'"):
        render("gcp", target, tmp_path / "g")


def test_refuses_unknown_providers_and_bad_names(tmp_path: Path) -> None:
    target = str(EXAMPLES / "quarter_hourly.py")
    with pytest.raises(ConfigurationError, match="unknown provider 'nimbus'"):
        render("nimbus", target, tmp_path / "a")
    with pytest.raises(ConfigurationError, match="unknown watcher provider"):
        render("gcp", target, tmp_path / "b", watcher_provider="nimbus")
    with pytest.raises(ConfigurationError, match="--name"):
        render("gcp", target, tmp_path / "c", prefix="Bad_Name")


def test_extra_requirements(tmp_path: Path) -> None:
    extra = tmp_path / "req.txt"
    extra.write_text("requests==2.32.3\n")
    result = render(
        "azure", str(EXAMPLES / "quarter_hourly.py"), tmp_path / "o", requirements=extra
    )
    text = (result.out / "function" / "requirements.txt").read_text()
    assert text.splitlines()[1:] == [
        f"cronwarden[azure]=={cronwarden.__version__}",
        AZURE_SETTLEMENT,
        "requests==2.32.3",
    ]


def test_gcp_environment_is_what_the_gcp_provider_reads() -> None:
    """The rendered function environment, with Terraform's values filled in, builds the GCP
    provider (names, attempts and ack deadline within the adapter's own bounds)."""
    from cronwarden.adapters.gcp.provider import GcpProvider
    from cronwarden.deploy import gcp
    from cronwarden.deploy.hcl import Expr

    filled = {
        "var.project": "my-project",
        "tostring(module.settings.pubsub.max_delivery_attempts)": "5",
        "tostring(module.settings.pubsub.ack_deadline_seconds)": "600",
        "module.state.database": "(default)",
    }
    env = {
        name: filled[value.text] if isinstance(value, Expr) else value
        for name, value in gcp.environment("cronwarden").items()
    }
    provider = GcpProvider.from_env(environ=env)
    queue = provider.queue()
    assert provider.project == "my-project"
    assert queue.topic == "projects/my-project/topics/cronwarden-runs"
    assert queue.subscription == "projects/my-project/subscriptions/cronwarden-worker"
    assert queue.dead_letter_topic.endswith("/topics/cronwarden-runs-dead-letter")
    assert queue.dead_letter_subscription.endswith("/subscriptions/cronwarden-worker-dead-letter")
    assert (queue.max_deliveries, queue.ack_deadline) == (5, 600)


def test_trigger_dead_letters_go_to_the_tick_dead_letter_topic() -> None:
    """The trigger's environment differs from the others' only in its dead-letter topic and
    subscription: its MalformedTick dead letters go where its subscription's go (and the
    trigger may publish there), never among the run requests that `dlq redrive` re-sends."""
    from cronwarden.adapters.gcp.provider import GcpProvider
    from cronwarden.deploy import gcp
    from cronwarden.deploy.hcl import Expr

    filled = {
        "var.project": "my-project",
        "tostring(module.settings.pubsub.max_delivery_attempts)": "5",
        "tostring(module.settings.pubsub.ack_deadline_seconds)": "600",
        "module.state.database": "(default)",
    }
    env = {
        name: filled[value.text] if isinstance(value, Expr) else value
        for name, value in gcp.environment("cronwarden").items()
    }
    trigger = GcpProvider.from_env(environ={**env, **gcp.trigger_environment("cronwarden")})
    queue = trigger.queue()
    assert queue.topic == "projects/my-project/topics/cronwarden-runs"
    assert queue.dead_letter_topic == "projects/my-project/topics/cronwarden-schedule-dead-letter"
    runs = GcpProvider.from_env(environ=env).queue()
    assert runs.dead_letter_topic.endswith("/topics/cronwarden-runs-dead-letter")


def test_azure_watcher_environment_is_what_the_gcp_provider_reads() -> None:
    """The watcher-only Azure app watching GCP jobs: its settings build the GCP provider with
    workload identity federation (nothing is fetched until the first call)."""
    from cronwarden.adapters.gcp.provider import GcpProvider
    from cronwarden.deploy.hcl import Expr
    from cronwarden.deploy.render import _gcp_env_for_azure_watcher

    filled = {
        "var.gcp_project": "my-project",
        "var.gcp_firestore_database": "(default)",
        "var.gcp_workload_identity_provider": "projects/1/locations/global/"
        "workloadIdentityPools/cronwarden-ext-watcher/providers/azure",
        "var.gcp_watcher_service_account": "w@my-project.iam.gserviceaccount.com",
        "var.gcp_watcher_audience": "api://cronwarden-watcher",
    }
    env = {
        name: filled[value.text] if isinstance(value, Expr) else value
        for name, value in _gcp_env_for_azure_watcher("cronwarden").items()
    }
    provider = GcpProvider.from_env(environ=env)
    assert provider.project == "my-project"
    assert provider.queue().dead_letter_subscription.endswith("/cronwarden-worker-dead-letter")


def test_a_schedule_aws_cannot_express_is_refused_before_the_old_render_is_touched(
    tmp_path: Path,
) -> None:
    good = _jobs_file(
        tmp_path, '@cronwarden.job("ok", cron="0 3 * * *", max_runtime="1m")\ndef ok(ctx): ...\n'
    )
    out = tmp_path / "out"
    render("aws", good, out)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    both = _jobs_file(
        tmp_path,
        '@cronwarden.job("both-days", cron="0 3 1 * 1", max_runtime="1m")\ndef both(ctx): ...\n',
        "both_jobs.py",
    )
    with pytest.raises(InvalidJobDefinition, match=r"job 'both-days'.*day-of-week"):
        render("aws", both, out)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before  # nothing wiped


def test_job_names_whose_cloud_resources_would_clash_are_refused(tmp_path: Path) -> None:
    watcher = _jobs_file(
        tmp_path,
        '@cronwarden.job("watcher", cron="0 3 * * *", max_runtime="1m")\ndef w(ctx): ...\n',
        "watcher_jobs.py",
    )
    for provider in ("gcp", "aws"):
        with pytest.raises(ConfigurationError, match="the deployment's own watcher schedule"):
            render(provider, watcher, tmp_path / f"w-{provider}")
    long = "a" * 55
    twins = _jobs_file(
        tmp_path,
        f'@cronwarden.job("{long}-one", cron="0 3 * * *", max_runtime="1m")\n'
        "def one(ctx): ...\n\n"
        f'@cronwarden.job("{long}-two", cron="0 4 * * *", max_runtime="1m")\n'
        "def two(ctx): ...\n",
        "twin_jobs.py",
    )
    with pytest.raises(ConfigurationError, match="would both be named"):
        render("aws", twins, tmp_path / "twins")
    render("gcp", twins, tmp_path / "twins-gcp")  # Cloud Scheduler names are not cut


def test_consumers_larger_than_the_deployment_sizes_for_are_refused(tmp_path: Path) -> None:
    """The worker, its queue's visibility and delivery count are sized from the scheduled
    jobs: a consumer needing more would be cut short without a word."""
    body = (
        '@cronwarden.job("small", cron="0 3 * * *", max_runtime="1m",\n'
        "                retry=cronwarden.Retry(max_attempts=2))\n"
        "def small(ctx): ...\n\n"
        '@cronwarden.consumer("orders", key="id", max_runtime="{runtime}",\n'
        "                     retry=cronwarden.Retry(max_attempts={attempts}))\n"
        "def orders(ctx): ...\n"
    )
    big = _jobs_file(tmp_path, body.format(runtime="20m", attempts=50), "big_jobs.py")
    for provider in ("azure", "aws"):
        with pytest.raises(InvalidJobDefinition, match=r"consumer 'orders'.*cut short"):
            render(provider, big, tmp_path / f"big-{provider}")
    with pytest.raises(InvalidJobDefinition, match=r"'orders': max_runtime 1200s is over the 570s"):
        render("gcp", big, tmp_path / "big-gcp")  # the push worker's own limit comes first
    fits = _jobs_file(tmp_path, body.format(runtime="30s", attempts=2), "fits_jobs.py")
    render("aws", fits, tmp_path / "fits")


def test_dotted_job_module_ships_its_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "src" / "acme_jobs"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("VALUE = 1\n")
    (package / "nightly.py").write_text(
        "import cronwarden\nfrom acme_jobs.helpers import VALUE\n\n"
        '@cronwarden.job("acme-nightly", cron="0 4 * * *", max_runtime="5m")\n'
        "def nightly(ctx): ...\n"
    )
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "junk.pyc").write_bytes(b"x")
    (package / ".env").write_text("SLACK_URL=https://hooks.slack.com/services/T0/B0/sekrit\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    result = render("gcp", "acme_jobs.nightly", tmp_path / "out")
    shipped = result.out / "function" / "acme_jobs"
    # the local environment file (secrets) is not shipped
    assert sorted(p.name for p in shipped.iterdir()) == ["__init__.py", "helpers.py", "nightly.py"]
    with pytest.raises(ConfigurationError, match="lies inside the job package"):
        render("gcp", "acme_jobs.nightly", package / "deploy")  # it would copy itself forever
    assert not (package / "deploy").exists()
    assert (
        "import acme_jobs.nightly as jobs_module" in (result.out / "function/main.py").read_text()
    )


AZURE_FILLED = {
    "module.base.table_endpoint": "https://cronwardenabc123.table.core.windows.net/",
    "module.base.table_name": "cronwarden",
    "local.servicebus_fqdn": "cronwarden-abc123.servicebus.windows.net",
    "tostring(module.settings.servicebus.max_delivery_count)": "5",
    "var.watcher_schedule": "0 */5 * * * *",
}


def _azure_settings() -> dict[str, str]:
    from cronwarden.deploy import azure
    from cronwarden.deploy.hcl import Expr

    return {
        name: AZURE_FILLED[value.text] if isinstance(value, Expr) else value
        for name, value in azure.app_settings(watcher_here=True).items()
    }


def test_azure_app_settings_build_the_azure_provider_with_its_identity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rendered app settings, with Terraform's values filled in, build the Azure provider:
    from the account URL and the namespace alone it makes an identity credential (the app's
    managed identity on Azure; no key, no connection string) and the queue bound matches the
    rendered queue's max_delivery_count. Nothing connects until first use."""
    pytest.importorskip("azure.identity")
    from cronwarden.adapters.azure.provider import (
        ENV_CONNECTION_STRING,
        ENV_FALLBACK_CONNECTION_STRING,
        ENV_SB_CONNECTION,
        AzureProvider,
    )
    from cronwarden.adapters.azure.servicebus import ServiceBusQueue

    for name in (ENV_CONNECTION_STRING, ENV_FALLBACK_CONNECTION_STRING, ENV_SB_CONNECTION):
        monkeypatch.delenv(name, raising=False)
    for name in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "CRONWARDEN_AZURE_FEDERATION"):
        monkeypatch.delenv(name, raising=False)
    for name, value in _azure_settings().items():
        monkeypatch.setenv(name, value)
    provider = AzureProvider.from_env()
    try:
        assert type(provider.credential).__name__ == "DefaultAzureCredential"
        queue = provider.queue()
        assert isinstance(queue, ServiceBusQueue)
        assert (queue.queue_name, queue.max_deliveries) == ("cronwarden-runs", 5)
        assert provider.table == "cronwarden"
    finally:
        provider.close()


def test_azure_package_agrees_with_the_function_app(rendered: dict[str, Rendered]) -> None:
    """build_app indexes with the rendered settings; host.json and the worker's trigger agree
    that the worker settles messages itself; the settlement package is shipped where the
    worker runs (not in a watcher-only app)."""
    import json

    pytest.importorskip("azure.functions")
    from cronwarden.adapters.azure.functions import build_app

    result = rendered["azure-nightly"]
    package = result.out / "function"
    host = json.loads((package / "host.json").read_text())
    service_bus = host["extensions"]["serviceBus"]
    assert service_bus["autoCompleteMessages"] is False
    assert service_bus["maxAutoLockRenewalDuration"] == host["functionTimeout"] == "00:15:30"
    spec = result.plan.jobs[0]
    env = {**_azure_settings(), spec.schedule_setting: spec.ncrontab_utc}
    app = build_app(str(package / "nightly_export.py"), env=env)
    bindings = {
        fn.get_function_name(): [json.loads(raw) for raw in fn.get_raw_bindings()]
        for fn in app.get_functions()
    }
    assert sorted(bindings) == ["timer_nightly_export", "watcher", "worker"]
    (worker,) = bindings["worker"]
    assert worker["type"] == "serviceBusTrigger"
    assert worker["autoCompleteMessages"] is service_bus["autoCompleteMessages"]
    assert f"{worker['connection']}__fullyQualifiedNamespace" in env
    assert worker["queueName"] == env["CRONWARDEN_SERVICEBUS_QUEUE"]
    assert bindings["timer_nightly_export"][0]["schedule"] == spec.ncrontab_utc
    assert bindings["watcher"][0]["schedule"] == env["CRONWARDEN_WATCHER_SCHEDULE"]
    assert AZURE_SETTLEMENT in (package / "requirements.txt").read_text().splitlines()
    watcher_only = rendered["gcp-quarter-hourly-azure-watcher"].out / "watcher" / "function"
    assert AZURE_SETTLEMENT not in (watcher_only / "requirements.txt").read_text()


def test_rendered_setting_names_are_the_ones_the_hosts_read() -> None:
    """The webhook and function-selection settings the renderer writes are the names the GCP
    functions and the Azure app read (cronwarden.hosting)."""
    from cronwarden import hosting
    from cronwarden.deploy import azure, gcp

    assert gcp.WEBHOOK_ENV == azure.WEBHOOK_ENV == hosting.WEBHOOK_ENV
    assert hosting.FUNCTIONS_ENV in azure.app_settings(watcher_here=True)
    assert hosting.FUNCTIONS_ENV in gcp.watcher_environment("cronwarden")
