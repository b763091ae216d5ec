"""``deploy render --name`` reaches every resource name on both clouds (a module's own
defaults are overridden by the root module, so they are left out of the search)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import ROOT

EXAMPLE = str(ROOT / "examples" / "quarter_hourly.py")
# display names and descriptions are text for people, not resource names
_TEXT = re.compile(r"^\s*(display_name|description|documentation|error_message)\s*=|^\s*#")


def _names_left(out: Path) -> list[str]:
    left = []
    for path in sorted(out.glob("*.tf")) + sorted(out.glob("modules/**/*.tf")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            module_default = path.parent != out and line.strip().startswith("default")
            if '"cronwarden' in line and not _TEXT.match(line) and not module_default:
                left.append(f"{path.relative_to(out)}:{number}: {line.strip()}")
    return left


@pytest.mark.parametrize("provider", ["gcp", "azure"])
def test_name_reaches_every_resource_name(cw, tmp_path: Path, provider: str) -> None:
    out = tmp_path / "out"
    result = cw(
        "deploy",
        "render",
        "--provider",
        provider,
        "--jobs",
        EXAMPLE,
        "--name",
        "acme",
        "--out",
        str(out),
    )
    assert result.code == 0, result
    assert _names_left(out) == []
    main = (out / "main.tf").read_text()
    assert '"acme-runs"' in main or "acme-runs" in main
    if provider == "azure":
        variables = (out / "variables.tf").read_text()
        for name, value in (
            ("name", "acme"),
            ("resource_group_name", "acme"),
            ("webhook_secret_name", "acme-webhook"),
        ):
            block = variables.split(f'variable "{name}" {{', 1)[1].split("}", 1)[0]
            assert f'default     = "{value}"' in block, block
        assert "--name acme-webhook" in (out / "README.md").read_text()


def test_deploy_check_says_what_terraform_validated_and_what_it_could_not(
    cw, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    assert cw("deploy", "render", "-p", "azure", "-j", EXAMPLE, "-o", str(out)).code == 0
    result = cw("deploy", "check", str(out))
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("validate: ")]
    if line.startswith("validate: skipped"):
        pytest.skip(f"no terraform here: {line}")
    assert result.code == 0, result
    assert line.startswith("validate: ok (terraform validate ran on 1 provider-free module(s): ")
    assert "; NOT validated by terraform: 7 module(s) needing a provider download (., " in line
