"""Building Google client objects, lazily: nothing here imports a Google SDK at module import.

With an emulator address the clients use an insecure loopback channel and anonymous
credentials; without one, the given credentials (an object, or a zero-argument factory called
when the client is built) or else Application Default Credentials.
"""

from __future__ import annotations

import importlib
from typing import Any, cast


def anonymous() -> Any:
    """Credentials for emulators, which take no auth."""
    from google.auth.credentials import AnonymousCredentials

    return cast(Any, AnonymousCredentials)()


def grpc_module() -> Any:
    """The ``grpc`` package (untyped; imported by name so type checkers need no stubs)."""
    return importlib.import_module("grpc")


def resolve(credentials: Any) -> Any:
    """``credentials`` itself, or what a zero-argument factory returns (built on first use)."""
    return credentials() if callable(credentials) else credentials


def firestore_client(
    project: str, *, database: str, emulator_host: str | None, credentials: Any = None
) -> Any:
    """A ``google.cloud.firestore.Client`` for ``project``/``database``."""
    from google.cloud import firestore

    if emulator_host is None:
        return firestore.Client(
            project=project, database=database, credentials=resolve(credentials)
        )
    client = firestore.Client(project=project, database=database, credentials=anonymous())
    # The client reads FIRESTORE_EMULATOR_HOST only at construction; an explicit address is
    # set on the same attribute (read lazily when the first RPC builds the channel), so tests
    # and several emulators in one process need no global environment change.
    client._emulator_host = emulator_host
    return client


def pubsub_clients(emulator_host: str | None, credentials: Any = None) -> tuple[Any, Any]:
    """Plain GAPIC ``(PublisherClient, SubscriberClient)``: one RPC per call, no background
    batching threads (a publish returns when the broker has the message)."""
    from google import pubsub_v1

    if emulator_host is None:
        creds = resolve(credentials)
        return (
            pubsub_v1.PublisherClient(credentials=creds),
            pubsub_v1.SubscriberClient(credentials=creds),
        )

    grpc = grpc_module()
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport
    from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

    publisher = pubsub_v1.PublisherClient(
        transport=PublisherGrpcTransport(channel=grpc.insecure_channel(emulator_host))
    )
    subscriber = pubsub_v1.SubscriberClient(
        transport=SubscriberGrpcTransport(channel=grpc.insecure_channel(emulator_host))
    )
    return publisher, subscriber
