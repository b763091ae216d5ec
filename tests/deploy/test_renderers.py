"""The renderer registry: the driver finds each cloud's renderer by provider name, a new cloud
registers without editing the driver, and the cross-cloud watcher pairs are the rendered ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwarden.deploy import hcl, renderers
from cronwarden.deploy.render import render
from cronwarden.deploy.spec import plan
from cronwarden.jobs import JobSet
from cronwarden.model.errors import ConfigurationError, InvalidJobDefinition

from .conftest import EXAMPLES


def test_builtin_clouds_resolve_to_their_adapters_renderers() -> None:
    assert renderers.builtin_names() == ("gcp", "azure", "aws")
    for name in renderers.builtin_names():
        renderer = renderers.get(name)
        assert renderer.name == name
        assert renderer.terraform_modules == ("common/settings", name)
        assert type(renderer).__module__ == "cronwarden.deploy.renderers"


def test_unknown_provider_names_the_choices() -> None:
    with pytest.raises(
        ConfigurationError, match=r"unknown provider 'nimbus'; choose gcp or azure or aws"
    ):
        renderers.get("nimbus")


def test_a_registered_cloud_is_found_and_planned_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(renderers, "_registered", {})

    def jobs_root(options: renderers.RootOptions) -> renderers.TfFiles:
        main = [hcl.Block("locals", body=[hcl.Attr("jobs", len(options.plan.jobs))])]
        return renderers.tf_files([], [], main, [])

    def watcher_root(prefix: str, watched: renderers.Watched) -> renderers.TfFiles:
        raise AssertionError("not asked for")

    fake = renderers.CloudRenderer(
        "fakecloud",
        jobs_root,
        watcher_root,
        watcher_host="gcp",
        watcher_variables=list,
        watcher_environment=lambda prefix: {"CRONWARDEN_PROVIDER": "fakecloud"},
    )
    with pytest.raises(InvalidJobDefinition, match="unknown provider 'fakecloud'"):
        plan(_jobs(), ["fakecloud"])
    renderers.register("fakecloud", fake)
    assert renderers.names() == ("gcp", "azure", "aws", "fakecloud")
    the_plan = plan(_jobs(), ["fakecloud"])
    files = renderers.get("fakecloud").root(
        renderers.RootOptions(prefix="cw", plan=the_plan, watcher_here=True)
    )
    assert hcl.render(files["main.tf"]) == "locals {\n  jobs = 1\n}\n"
    watched = fake.watched_by("cw", "gcp")
    assert watched.environment == {"CRONWARDEN_PROVIDER": "fakecloud"}
    with pytest.raises(ConfigurationError, match="cannot watch jobs on 'fakecloud'"):
        fake.watched_by("cw", "azure")


def test_a_registered_cloud_without_a_package_fails_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver writes the new cloud's root module and modules, then refuses (one sentence,
    no silent fallback to another cloud's package) where no function package is known."""
    monkeypatch.setattr(renderers, "_registered", {})
    modules = tmp_path / "tf-modules"
    (modules / "queue").mkdir(parents=True)
    (modules / "queue" / "main.tf").write_text("# a module\n")

    def jobs_root(options: renderers.RootOptions) -> renderers.TfFiles:
        return renderers.tf_files([], [], [hcl.Comment("fakecloud")], [])

    renderers.register(
        "fakecloud",
        renderers.CloudRenderer(
            "fakecloud",
            jobs_root,
            lambda prefix, watched: renderers.tf_files([], [], [], []),
            watcher_host="gcp",
            watcher_variables=list,
            watcher_environment=dict,
            modules_dir=modules,
        ),
    )
    out = tmp_path / "out"
    with pytest.raises(ConfigurationError, match="no function package is rendered for provider"):
        render("fakecloud", str(EXAMPLES / "quarter_hourly.py"), out)
    assert (out / "main.tf").read_text() == "# fakecloud\n"
    assert (out / "modules" / "fakecloud" / "queue" / "main.tf").is_file()
    assert (out / "modules" / "common" / "settings" / "main.tf").is_file()


@pytest.mark.parametrize(("jobs_cloud", "host"), [("gcp", "azure"), ("azure", "gcp")])
def test_only_the_federated_cloud_may_host_the_watcher(jobs_cloud: str, host: str) -> None:
    renderer = renderers.get(jobs_cloud)
    watched = renderer.watched_by("cronwarden", host)
    names = {block.labels[0] for block in watched.variables if isinstance(block, hcl.Block)}
    referenced = {
        value.text.removeprefix("var.")
        for value in watched.environment.values()
        if isinstance(value, hcl.Expr) and value.text.startswith("var.")
    }
    assert referenced and referenced <= names  # every variable the environment uses is declared
    with pytest.raises(ConfigurationError, match="cannot watch jobs on"):
        renderer.watched_by("cronwarden", jobs_cloud)


def _jobs() -> JobSet:
    import cronwarden

    @cronwarden.job("fake-nightly", cron="0 3 * * *", max_runtime="5m")
    def nightly(ctx: object) -> None: ...

    return JobSet([nightly])
