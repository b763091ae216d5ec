"""Fixtures of the object store's own tests: a fresh bucket (moto, fake-gcs-server) or container
(Azurite's Blob service) per test, and a factory of independent clients on it (one per
"process")."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cronwarden.adapters.objectstore import ConditionalObjects

ObjectsFactory = Callable[[], ConditionalObjects]


@pytest.fixture(
    params=[
        pytest.param("s3", marks=pytest.mark.aws),
        pytest.param("blob", marks=pytest.mark.azure),
        pytest.param("gcs", marks=pytest.mark.gcp),
    ]
)
def new_objects(request: pytest.FixtureRequest) -> Iterator[ObjectsFactory]:
    """Call for a new client of one fresh bucket / container (each call: a separate client
    with no shared state, as another process would have)."""
    made: list[ConditionalObjects] = []
    if request.param == "s3":
        from cronwarden.adapters.objectstore import S3Objects, S3Settings

        moto: Any = request.getfixturevalue("moto_server")
        settings = S3Settings(bucket=f"cw-{uuid.uuid4().hex[:12]}", aws=moto.settings())

        def make() -> ConditionalObjects:
            objects = S3Objects.from_settings(settings)
            made.append(objects)
            return objects

        first = make()
        try:
            yield make
        finally:
            assert isinstance(first, S3Objects)
            first.delete_bucket()
            for objects in made:
                objects.close()
        return
    if request.param == "gcs":
        from cronwarden.adapters.objectstore.gcs import GcsObjects
        from tests.backends import fake_gcs

        server = fake_gcs(request)
        bucket = f"cw-{uuid.uuid4().hex[:12]}"

        def make_gcs() -> ConditionalObjects:
            objects = GcsObjects.connect(bucket, emulator_host=server.endpoint, create_missing=True)
            made.append(objects)
            return objects

        first_gcs = make_gcs()
        try:
            yield make_gcs
        finally:
            assert isinstance(first_gcs, GcsObjects)
            first_gcs.delete_bucket()
            for objects in made:
                objects.close()
        return
    from cronwarden.adapters.objectstore.azure_blobs import BlobObjects
    from tests.backends import blob_azurite

    azurite = blob_azurite(request)
    container = f"cw-{uuid.uuid4().hex[:12]}"

    def make_blob() -> ConditionalObjects:
        objects = BlobObjects.from_connection_string(
            azurite.connection_string, container, create_missing=True
        )
        made.append(objects)
        return objects

    first_blob = make_blob()
    try:
        yield make_blob
    finally:
        assert isinstance(first_blob, BlobObjects)
        first_blob.delete_container()
        for objects in made:
            objects.close()
