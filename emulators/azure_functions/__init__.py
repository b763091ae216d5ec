"""A local stand-in for the Azure Functions host (Core Tools cannot run everywhere): see
:mod:`.host`. Needs ``pip install 'cronwarden[azure]'`` (azure-functions, azure-servicebus)."""

from __future__ import annotations

from typing import Any

__all__ = ["LocalHost", "ReceiverActions"]


def __getattr__(name: str) -> Any:
    if name in __all__:  # lazy: importing the package loads no SDK
        from . import host

        return getattr(host, name)
    raise AttributeError(name)
