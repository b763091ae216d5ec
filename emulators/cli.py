"""``cronwarden emulators …``: commands contributed by each emulator module, loaded lazily."""

from __future__ import annotations

import importlib
from typing import Any

import click

# module path → attribute holding a click command; a module that is absent is left out.
_COMMANDS = {
    "cronwarden.emulators.gcp.cli": "commands",
    "cronwarden.emulators.azurite.cli": "commands",
    "cronwarden.emulators.servicebus.cli": "commands",
    "cronwarden.emulators.aws.cli": "commands",
    "cronwarden.emulators.postgres.cli": "commands",
    "cronwarden.emulators.stack": "commands",
}


class _LazyGroup(click.Group):
    def _load(self) -> dict[str, click.Command]:
        found: dict[str, click.Command] = {}
        for module_name, attr in _COMMANDS.items():
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as exc:
                if exc.name and module_name.startswith(exc.name):
                    continue
                raise
            for command in getattr(module, attr):
                found[command.name or ""] = command
        return found

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self._load())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load().get(cmd_name)


@click.group(cls=_LazyGroup, name="emulators")
def emulators(**_: Any) -> None:
    """Run local emulators (Pub/Sub, Firestore, Azurite, Service Bus, AWS, PostgreSQL) on
    127.0.0.1."""
