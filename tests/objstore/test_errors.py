"""Each client maps its SDK's failures onto the store port's outcomes, on real endpoints: a
closed port (nothing sent: ``StoreUnavailable``, never ``CommitOutcomeUnknown``) and a missing
bucket or container (``ConfigurationError``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from cronwarden.adapters.objectstore import ConditionalObjects, ObjectStore
from cronwarden.emulators._process import LOOPBACK, free_port
from cronwarden.model.errors import CommitOutcomeUnknown, ConfigurationError, StoreUnavailable
from cronwarden.model.ports import STATUS, Key, Merge

KEY = Key(STATUS, "nightly")


def _s3(endpoint: str, bucket: str) -> ConditionalObjects:
    from cronwarden.adapters.aws import AwsSettings
    from cronwarden.adapters.objectstore import S3Objects, S3Settings

    aws = AwsSettings(endpoint_url=endpoint, connect_timeout=2, max_attempts=1)
    return S3Objects.from_settings(S3Settings(bucket=bucket, aws=aws))


def _blob(endpoint: str, container: str) -> ConditionalObjects:
    from cronwarden.adapters.objectstore.azure_blobs import BlobObjects
    from cronwarden.emulators.azurite import ACCOUNT_KEY, ACCOUNT_NAME

    conn = (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT_NAME};AccountKey={ACCOUNT_KEY};"
        f"BlobEndpoint={endpoint}/{ACCOUNT_NAME};"
    )
    return BlobObjects.from_connection_string(conn, container)


def _gcs(endpoint: str, bucket: str) -> ConditionalObjects:
    from cronwarden.adapters.objectstore.gcs import GcsObjects

    return GcsObjects.connect(bucket, emulator_host=endpoint)


CLIENTS: dict[str, Callable[[str, str], ConditionalObjects]] = {
    "s3": _s3,
    "blob": _blob,
    "gcs": _gcs,
}
MARKS = {"s3": pytest.mark.aws, "blob": pytest.mark.azure, "gcs": pytest.mark.gcp}
PARAMS = [pytest.param(name, marks=MARKS[name]) for name in CLIENTS]


@pytest.mark.parametrize("cloud", PARAMS)
def test_a_closed_port_is_unavailable_not_unknown(
    cloud: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):  # signed before it is sent
        monkeypatch.setenv(name, "testing")
    store = ObjectStore(CLIENTS[cloud](f"http://{LOOPBACK}:{free_port()}", "cw-nowhere"))
    try:
        with pytest.raises(StoreUnavailable) as info:
            store.commit([Merge(KEY, {"ok": True})])
        assert not isinstance(info.value, CommitOutcomeUnknown), info.value
    finally:
        store.close()


def _endpoint(cloud: str, request: pytest.FixtureRequest) -> str:
    if cloud == "s3":
        moto: Any = request.getfixturevalue("moto_server")
        return str(moto.endpoint)
    if cloud == "gcs":
        from tests.backends import fake_gcs

        return fake_gcs(request).endpoint
    from tests.backends import blob_azurite

    return f"http://{LOOPBACK}:{blob_azurite(request).blob_port}"


@pytest.mark.parametrize("cloud", PARAMS)
def test_a_missing_bucket_is_a_configuration_error(
    cloud: str, request: pytest.FixtureRequest
) -> None:
    store = ObjectStore(CLIENTS[cloud](_endpoint(cloud, request), f"cw-{uuid.uuid4().hex[:12]}"))
    try:
        with pytest.raises(ConfigurationError, match="does not exist"):
            store.commit([Merge(KEY, {"ok": True})])
    finally:
        store.close()
