"""Files shipped with cronwarden for deployments: the Terraform modules, the pinned npm manifests
of the provider schemas, the checkov policies.

They live in the repository's top-level ``deployments/`` folder, which the wheel maps to the
package-data package ``cronwarden.deploy.assets`` (``[tool.setuptools.package-dir]``): one copy
in the source tree, no build step; found next to this module in a wheel, and at the repository
root from a checkout or an editable install.
"""

from __future__ import annotations

from pathlib import Path

from cronwarden.errors import ConfigurationError


def root() -> Path:
    """The ``deployments`` folder: ``cronwarden/deploy/assets`` in a wheel, the repository's
    ``deployments/`` in a checkout or an editable install."""
    here = Path(__file__).resolve().parent
    candidates = [here / "assets", here.parents[1] / "deployments"]
    for folder in candidates:
        if (folder / "terraform").is_dir():
            return folder
    raise ConfigurationError(
        "cronwarden's deployment files are missing (reinstall cronwarden; looked in "
        + ", ".join(str(c) for c in candidates)
        + ")"
    )


def terraform_modules() -> Path:
    """``deployments/terraform``: ``common/``, ``gcp/``, ``azure/`` module folders."""
    return root() / "terraform"


def schema_manifests() -> Path:
    """``deployments/schema``: package.json + package-lock.json pinning the provider schemas."""
    return root() / "schema"


def checkov_policies() -> Path:
    """``deployments/checkov``: cronwarden's custom checkov policies (YAML)."""
    return root() / "checkov"


__all__ = ["checkov_policies", "root", "schema_manifests", "terraform_modules"]
