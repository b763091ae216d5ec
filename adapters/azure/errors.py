"""Errors of the Azure adapter."""

from __future__ import annotations

from cronwarden.model.errors import ContentRefused


class TableLimitError(ContentRefused):
    """A record breaks a limit of Azure Table Storage (key characters or size, property size,
    property count, entity size).

    Raised before anything is sent, also against Azurite, which accepts more than Azure does:
    a commit that passes on the emulator must not fail in production. A
    :class:`~cronwarden.model.errors.ContentRefused` (and so a ``ValueError``): the engine
    dead-letters a run whose result it refuses.
    """
