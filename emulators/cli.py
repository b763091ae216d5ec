"""``cronwarden emulators …``: commands contributed by each emulator module, loaded lazily.

Each subcommand's module is imported only when that subcommand is asked for (run, or listed by
``--help``); those modules import nothing beyond click and the standard library at import time,
so ``--help`` prints at every level without any extra installed. A module that still fails to
import (an extra missing) is replaced by a stand-in that names the extra when the command runs.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

# subcommand → the module holding it (as a click command in that module's ``commands`` list).
_COMMANDS = {
    "pubsub": "cronwarden.emulators.gcp.cli",
    "firestore": "cronwarden.emulators.gcp.cli",
    "azurite": "cronwarden.emulators.azurite.cli",
    "servicebus": "cronwarden.emulators.servicebus.cli",
    "aws": "cronwarden.emulators.aws.cli",
    "postgres": "cronwarden.emulators.postgres.cli",
    "up": "cronwarden.emulators.stack",
    "down": "cronwarden.emulators.stack",
}

#: the extra that brings what the emulator launchers and servers import
EXTRA = "emulators"


def _missing_extra(name: str, exc: ImportError) -> click.Command:
    """A stand-in for subcommand ``name`` whose module failed to import: its help says which
    extra it needs, and running it fails with the ``pip install`` line that fixes it."""

    @click.command(name, context_settings={"ignore_unknown_options": True})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def missing(args: tuple[str, ...]) -> None:
        raise click.ClickException(
            f"`cronwarden emulators {name}` needs the [{EXTRA}] extra ({exc.name or exc}): "
            f"pip install 'cronwarden[{EXTRA}]'"
        )

    missing.help = f"(needs: pip install 'cronwarden[{EXTRA}]')"
    return missing


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = _COMMANDS.get(cmd_name)
        if module_name is None:
            return None
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            return _missing_extra(cmd_name, exc)
        found: click.Command | None = next(
            (command for command in module.commands if command.name == cmd_name), None
        )
        if found is None:
            raise LookupError(f"{module_name} has no command {cmd_name!r} in its `commands`")
        return found


@click.group(cls=_LazyGroup, name="emulators")
def emulators(**_: Any) -> None:
    """Run local emulators (Pub/Sub, Firestore, Azurite, Service Bus, AWS, PostgreSQL) on
    127.0.0.1."""
