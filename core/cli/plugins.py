"""Command groups that other packages contribute to ``cronwarden``.

``cronwarden dashboard``, ``cronwarden deploy`` and ``cronwarden emulators`` are not part of this
face: the dashboard is a face of its own, deployments and emulators are packages of their own.
Each declares its click command under the entry point group :data:`GROUP` (see
``pyproject.toml``); the root group finds them by name and imports one only when it is invoked
(or listed by ``--help``). So the command line imports neither the dashboard nor those packages,
and a third-party package can add a command the same way.

A command whose package cannot be imported (an extra not installed) is still listed and answers
with the ``pip install`` line that fixes it.
"""

from __future__ import annotations

import functools
from importlib.metadata import EntryPoint, entry_points

import click

from .common import Fail

GROUP = "cronwarden.commands"

#: the extra that brings each contributed command's dependencies, for the install hint
EXTRAS = {"dashboard": "dashboard", "emulators": "emulators", "deploy": "deploy"}


@functools.cache
def contributed() -> dict[str, EntryPoint]:
    """The commands declared under :data:`GROUP` by every installed distribution, by name."""
    return {point.name: point for point in entry_points(group=GROUP)}


def missing_extra(name: str, extra: str, exc: ImportError) -> click.Command:
    """A stand-in for command ``name`` whose import failed: its ``--help`` prints (exit 0) and
    says what to install; running it fails with the ``pip install`` line that fixes it."""
    return _stand_in(
        name,
        f"`cronwarden {name}` needs the [{extra}] extra ({exc.name or exc}): "
        f"pip install 'cronwarden[{extra}]'",
        f"(needs: pip install 'cronwarden[{extra}]')",
    )


def missing_dependency(name: str, distribution: str, exc: ImportError) -> click.Command:
    """A stand-in for command ``name`` that another package (``distribution``) contributes and
    that failed to import: it names the package and the module it could not import."""
    what = exc.name or str(exc)
    return _stand_in(
        name,
        f"`cronwarden {name}` (from {distribution}) cannot import {what!r}: "
        f"install what {distribution} needs ({exc})",
        f"(from {distribution}; cannot import {what!r})",
    )


def _stand_in(name: str, error: str, summary: str) -> click.Command:
    @click.command(name, context_settings={"ignore_unknown_options": True})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def missing(args: tuple[str, ...]) -> None:
        raise Fail(error)

    missing.help = summary
    return missing


class PluginGroup(click.Group):
    """A click group that also offers the :func:`contributed` commands, each loaded on first
    use and then kept like a command of its own."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *contributed()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        point = contributed().get(cmd_name)
        if point is None:
            return None
        try:
            loaded = point.load()
        except ImportError as exc:
            distribution = point.dist.name if point.dist is not None else "cronwarden"
            if distribution == "cronwarden":
                loaded = missing_extra(cmd_name, EXTRAS.get(cmd_name, cmd_name), exc)
            else:
                loaded = missing_dependency(cmd_name, distribution, exc)
        if not isinstance(loaded, click.Command):
            raise TypeError(f"entry point {point.value!r} ({GROUP}) is not a click command")
        self.add_command(loaded, cmd_name)
        return loaded
