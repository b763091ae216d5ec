"""AzureProvider configuration, secret hygiene, and lazy SDK imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cronwarden.adapters.azure import AzureProvider, TableStore
from cronwarden.adapters.azure._redact import redact
from cronwarden.emulators.azurite import ACCOUNT_KEY, Azurite
from cronwarden.model.errors import ConfigurationError
from cronwarden.model.ports import STATUS, Key, Merge

pytestmark = pytest.mark.azure


def test_importing_cronwarden_and_the_adapter_imports_no_azure_sdk() -> None:
    code = (
        "import sys, cronwarden, cronwarden.adapters.azure, cronwarden.emulators.azurite;"
        "print(sorted(m for m in sys.modules if m == 'azure' or m.startswith('azure.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_provider_from_env_builds_a_working_store(
    azurite: Azurite, azurite_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cronwarden.jobs.config import provider_from_env

    monkeypatch.setenv("CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    monkeypatch.setenv("CRONWARDEN_AZURE_TABLE", azurite_table)
    provider = provider_from_env("azure")
    try:
        assert isinstance(provider, AzureProvider)
        store = provider.store()
        assert isinstance(store, TableStore) and store.table_name == azurite_table
        store.commit([Merge(Key(STATUS, "job"), {"ok": True})])
        assert provider.store() is store
        assert ACCOUNT_KEY not in repr(provider)
        with pytest.raises(ConfigurationError, match="SERVICEBUS"):
            provider.queue()  # no Service Bus configured in this test
    finally:
        provider.close()


def test_provider_needs_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING",
        "AZURE_STORAGE_CONNECTION_STRING",
        "CRONWARDEN_AZURE_TABLE_ACCOUNT_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match="connection string"):
        AzureProvider()
    AzureProvider(account_url="https://acct.table.core.windows.net")  # credential built lazily


def test_account_url_alone_builds_a_default_credential_lazily(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("CRONWARDEN_AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_CONNECTION_STRING"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CRONWARDEN_AZURE_FEDERATION", raising=False)
    provider = AzureProvider(account_url="https://acct.table.core.windows.net")
    assert type(provider.credential).__name__ == "DefaultAzureCredential"


def test_google_federation_builds_a_client_assertion_credential(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cronwarden.adapters.azure._credentials import credential_from_env

    env = {
        "CRONWARDEN_AZURE_FEDERATION": "google",
        "AZURE_TENANT_ID": "00000000-0000-0000-0000-000000000001",
        "AZURE_CLIENT_ID": "00000000-0000-0000-0000-000000000002",
    }
    assert type(credential_from_env(env)).__name__ == "ClientAssertionCredential"
    with pytest.raises(ConfigurationError, match="AZURE_TENANT_ID"):
        credential_from_env({"CRONWARDEN_AZURE_FEDERATION": "google"})
    with pytest.raises(ConfigurationError, match="not supported"):
        credential_from_env({"CRONWARDEN_AZURE_FEDERATION": "aws"})


def test_bad_connection_strings_never_echo_the_key() -> None:
    secret = "c2VjcmV0LWtleS1kby1ub3QtbG9n"
    for bad in (f"AccountKey={secret}", f"nonsense;AccountKey={secret};x"):
        with pytest.raises(ConfigurationError) as info:
            TableStore.from_connection_string(bad, "t", create_table=False)
        assert secret not in str(info.value)
        assert info.value.__cause__ is None and info.value.__suppress_context__


def test_invalid_table_names_are_refused_before_any_request() -> None:
    conn = f"AccountName=devstoreaccount1;AccountKey={ACCOUNT_KEY};TableEndpoint=http://127.0.0.1:9"
    for name in ("ab", "has-dash", "1starts", "x" * 64):
        with pytest.raises(ConfigurationError, match="table name"):
            TableStore.from_connection_string(conn, name)


def test_redact_hides_keys_and_signatures() -> None:
    text = (
        f"AccountName=a;AccountKey={ACCOUNT_KEY};EndpointSuffix=x "
        "https://a.table.core.windows.net/?sv=2020&sig=abc%2Fdef&se=1 SharedAccessKey=zz"
    )
    clean = redact(text)
    assert ACCOUNT_KEY not in clean and "abc%2Fdef" not in clean and "zz" not in clean
    assert "AccountName=a" in clean and "sv=2020" in clean
