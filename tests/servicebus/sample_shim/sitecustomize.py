"""Connection settings only: point the official azure-servicebus samples at the emulator.

Imported at interpreter start-up (this directory is on PYTHONPATH) by the sample processes that
``test_official_samples.py`` runs, and only when ``CW_SB_SAMPLE_SHIM`` is set. It changes where
and with what a client connects, nothing a sample does:

* ``DefaultAzureCredential`` / ``EnvironmentCredential`` (Entra ID, which the emulator cannot
  verify) become the emulator's named key (``CW_SB_SAMPLE_KEY_NAME`` / ``CW_SB_SAMPLE_KEY``);
* a client for the emulator's namespace gets ``use_tls=False`` (what ``UseDevelopmentEmulator=true``
  does for a connection string);
* placeholders a sample hard-codes (``<custom_endpoint_hostname>``, ``<your_custom_ca_bundle...>``)
  become the emulator's address (``CW_SB_SAMPLE_CUSTOM_ENDPOINT``) and "no CA bundle".
"""

from __future__ import annotations

import os
from typing import Any

if os.environ.get("CW_SB_SAMPLE_SHIM"):
    import azure.identity
    import azure.identity.aio
    import azure.servicebus
    import azure.servicebus.aio
    from azure.core.credentials import AzureNamedKeyCredential

    _KEY_NAME = os.environ["CW_SB_SAMPLE_KEY_NAME"]
    _KEY = os.environ["CW_SB_SAMPLE_KEY"]
    _NAMESPACE = os.environ["SERVICEBUS_FULLY_QUALIFIED_NAMESPACE"]
    _CUSTOM_ENDPOINT = os.environ["CW_SB_SAMPLE_CUSTOM_ENDPOINT"]

    def _named_key(*args: Any, **kwargs: Any) -> AzureNamedKeyCredential:
        return AzureNamedKeyCredential(_KEY_NAME, _KEY)

    class _AsyncNamedKey(AzureNamedKeyCredential):
        """The async identity credentials are async context managers with ``close``."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(_KEY_NAME, _KEY)

        async def close(self) -> None:
            pass

        async def __aenter__(self) -> _AsyncNamedKey:
            return self

        async def __aexit__(self, *exc: object) -> None:
            pass

    azure.identity.DefaultAzureCredential = _named_key  # type: ignore[assignment,misc]
    azure.identity.EnvironmentCredential = _named_key  # type: ignore[assignment,misc]
    azure.identity.aio.DefaultAzureCredential = _AsyncNamedKey  # type: ignore[assignment,misc]
    azure.identity.aio.EnvironmentCredential = _AsyncNamedKey  # type: ignore[assignment,misc]

    def _patch(cls: Any) -> None:
        original = cls.__init__

        def __init__(self: Any, fully_qualified_namespace: str, credential: Any, **kw: Any) -> None:
            if fully_qualified_namespace == _NAMESPACE:
                kw.setdefault("use_tls", False)
            if "<custom_endpoint" in str(kw.get("custom_endpoint_address", "")):
                kw["custom_endpoint_address"] = _CUSTOM_ENDPOINT
            if "<your_custom_ca_bundle" in str(kw.get("connection_verify", "")):
                del kw["connection_verify"]
            original(self, fully_qualified_namespace, credential, **kw)

        cls.__init__ = __init__

    _patch(azure.servicebus.ServiceBusClient)
    _patch(azure.servicebus.aio.ServiceBusClient)
