"""Running the rendered AWS root module against moto: an offline provider mirror and the
provider settings that point every AWS API at the moto server.

* :func:`find_mirror` locates a filesystem mirror holding ``registry.terraform.io/hashicorp/aws``
  (``$CRONWARDEN_TF_MIRROR``, else the usual places); :func:`write_cli_config` writes a CLI
  config that installs that provider from the mirror and nothing from the network (set
  ``TF_CLI_CONFIG_FILE`` to it).
* :func:`moto_override` is a ``*_override.tf`` file replacing the root module's provider block:
  moto's endpoint for every service, its placeholder keys, no account or metadata lookups.
"""

from __future__ import annotations

import os
from pathlib import Path

from cronwarden.deploy import hcl

from .launcher import ACCESS_KEY, SECRET_KEY

PROVIDER = "registry.terraform.io/hashicorp/aws"
MIRROR_ENV = "CRONWARDEN_TF_MIRROR"
_CANDIDATES = ("/opt/tf-plugins", "/usr/share/terraform/plugins", "~/.terraform.d/plugins")
SERVICES = (
    "dynamodb",
    "sqs",
    "iam",
    "sts",
    "lambda",
    "scheduler",
    "cloudwatch",
    "logs",
    "sns",
)


def find_mirror() -> Path | None:
    """A folder containing ``registry.terraform.io/hashicorp/aws``, or None."""
    configured = os.environ.get(MIRROR_ENV)
    for candidate in ([configured] if configured else []) + list(_CANDIDATES):
        folder = Path(candidate).expanduser()
        if (folder / PROVIDER).is_dir():
            return folder
    return None


def write_cli_config(path: Path, mirror: Path) -> Path:
    path.write_text(
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        f"    path    = {hcl.string(str(mirror))}\n"
        f'    include = ["{PROVIDER}"]\n'
        "  }\n"
        "  direct {\n"
        f'    exclude = ["{PROVIDER}"]\n'
        "  }\n"
        "}\n",
        encoding="utf-8",
    )
    return path


def moto_override(endpoint: str, region: str = "us-east-1") -> str:
    """The provider block for moto (placeholder keys: they open nothing anywhere else)."""
    block = hcl.Block(
        "provider",
        ("aws",),
        [
            hcl.Attr("region", region),
            hcl.Attr("access_key", ACCESS_KEY),
            hcl.Attr("secret_key", SECRET_KEY),
            hcl.Attr("skip_credentials_validation", True),
            hcl.Attr("skip_metadata_api_check", True),
            hcl.Attr("skip_requesting_account_id", True),
            hcl.Attr("s3_use_path_style", True),
            hcl.Block("endpoints", (), [hcl.Attr(s, endpoint) for s in SERVICES]),
        ],
    )
    return hcl.render([block])


__all__ = ["SERVICES", "find_mirror", "moto_override", "write_cli_config"]
