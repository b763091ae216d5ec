"""Declarative pieces shared by the per-cloud renderers: the Terraform blocks every root module
is made of (``terraform``/``provider``, variables, outputs, module calls, the header comment),
so a renderer states only what differs between clouds (names, sources, values).

Every function returns :mod:`cronwarden.deploy.hcl` items; nothing here names a cloud.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .hcl import Attr, Block, Comment, Expr, Item

TERRAFORM_VERSION = ">= 1.5"
_NO_DEFAULT: Any = ...


def header(command: str, what: str) -> Comment:
    """The comment opening a rendered ``main.tf``: which command wrote it, then ``what``."""
    return Comment(f"Rendered by `{command}`{what}")


def jobs_header(provider: str) -> Comment:
    """The header of a jobs' root module for ``provider``."""
    return header(
        f"cronwarden deploy render --provider {provider}",
        " from the job definitions.\n"
        "Re-render after changing a job; edit the modules under modules/ only to change the\n"
        "shape of the deployment.",
    )


def versions(provider: str, source: str, version: str, provider_body: list[Item]) -> list[Item]:
    """``versions.tf``: Terraform's and the one provider's version constraints, and the
    provider's configuration block."""
    required = Attr(provider, {"source": source, "version": version})
    return [
        Block(
            "terraform",
            body=[
                Attr("required_version", TERRAFORM_VERSION),
                Block("required_providers", body=[required]),
            ],
        ),
        Block("provider", (provider,), provider_body),
    ]


def variable(name: str, type_: str, description: str, default: Any = _NO_DEFAULT) -> Block:
    """A ``variable`` block; without ``default`` the variable is required."""
    body: list[Item] = [Attr("description", description), Attr("type", Expr(type_))]
    if default is not _NO_DEFAULT:
        body.append(Attr("default", default))
    return Block("variable", (name,), body)


def secret_reference_variable(
    name: str, description: str, condition: str, error_message: str
) -> Block:
    """An optional string variable naming where a secret lives (empty: none), validated so a
    secret value itself cannot be passed by mistake."""
    validation = Block(
        "validation",
        body=[Attr("condition", Expr(condition)), Attr("error_message", error_message)],
    )
    body: list[Item] = [
        Attr("description", description),
        Attr("type", Expr("string")),
        Attr("default", ""),
        validation,
    ]
    return Block("variable", (name,), body)


def output(name: str, value: str) -> Block:
    """An ``output`` block whose value is the expression ``value``."""
    return Block("output", (name,), [Attr("value", Expr(value))])


def outputs(values: Mapping[str, str]) -> list[Item]:
    """One :func:`output` per ``name => expression``, in order."""
    return [output(name, value) for name, value in values.items()]


def module(label: str, source: str, body: list[Item]) -> Block:
    """A ``module`` call: ``source`` first, then ``body``."""
    return Block("module", (label,), [Attr("source", source), *body])


def refs(values: Mapping[str, str]) -> list[Item]:
    """Attributes whose values are expressions: ``name => expression text``, in order."""
    return [Attr(name, Expr(text)) for name, text in values.items()]


def settings_module() -> Block:
    """The provider-free ``common/settings`` module over ``local.jobs``."""
    return module("settings", "./modules/common/settings", refs({"jobs": "local.jobs"}))


def jobs_preamble(
    provider: str, jobs: Mapping[str, Any], more_locals: Sequence[Item]
) -> list[Item]:
    """How a jobs' ``main.tf`` opens: the header, ``locals`` (``jobs`` then ``more_locals``)
    and the ``common/settings`` module checking the jobs."""
    local_values = Block("locals", body=[Attr("jobs", jobs), *more_locals])
    return [jobs_header(provider), local_values, settings_module()]


__all__ = [
    "header",
    "jobs_header",
    "jobs_preamble",
    "module",
    "output",
    "outputs",
    "refs",
    "secret_reference_variable",
    "settings_module",
    "variable",
    "versions",
]
