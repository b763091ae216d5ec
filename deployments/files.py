"""Files shipped with cronwarden for deployments: the Terraform modules, the pinned npm manifests
of the provider schemas, the checkov policies.

They live next to the rendering code in the repository's ``deployments/`` folder, which is the
package ``cronwarden.deploy`` (``[tool.setuptools.package-dir]``; the files are its package
data): one copy in the source tree, no build step, the same relative paths from a checkout, an
editable install or a wheel.
"""

from __future__ import annotations

from pathlib import Path

from cronwarden.model.errors import ConfigurationError


def root() -> Path:
    """The folder of this package, holding ``terraform/``, ``schema/`` and ``checkov/``."""
    here = Path(__file__).resolve().parent
    if not (here / "terraform").is_dir():
        raise ConfigurationError(
            f"cronwarden's deployment files are missing from {here} (reinstall cronwarden)"
        )
    return here


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
