"""Moved: the local stand-in for the Azure Functions host lives in
:mod:`cronwarden.emulators.azure_functions.host`; this old path keeps working, also as
``python -m cronwarden.adapters.azure.host``."""

from __future__ import annotations

from cronwarden.emulators.azure_functions.host import (
    LocalHost,
    ReceiverActions,
    functions_message,
    main,
)

__all__ = ["LocalHost", "ReceiverActions", "functions_message", "main"]

if __name__ == "__main__":
    main()
