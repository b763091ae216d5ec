"""The one primitive an object store offers cronwarden: a conditional write on one object.

:class:`ConditionalObjects` is the port each cloud client implements (S3 in :mod:`.s3`, Azure
Blob Storage in :mod:`.azure_blobs`); :class:`~.store.ObjectStore` builds the
:class:`~cronwarden.model.ports.Store` port on it and nothing else.

Contract of every client:

* ``get(name)`` → :class:`Blob` (bytes and the object's version) or ``None``.
* ``put_if_absent(name, data)`` creates the object only if no object of that name exists
  (S3 ``If-None-Match: *``, Blob ``If-None-Match: *``, GCS ``ifGenerationMatch=0``) and returns
  its version; otherwise raises :class:`PreconditionFailed` and writes nothing.
* ``put_if_version(name, data, version)`` replaces the object only if its version is still
  ``version`` (S3 / Blob ``If-Match: <etag>``, GCS ``ifGenerationMatch``); else
  :class:`PreconditionFailed`. ``delete_if_version`` likewise.
* ``list(prefix)`` yields pages of ``(name, version)`` of the objects under ``prefix``, in name
  order; each page is one request.
* A version is opaque text that changes on every write of the object. The store makes it unique
  per write (each body it writes carries a fresh write id), so an S3 ETag, a content hash,
  never repeats either.

Failures are the store port's outcomes (:mod:`cronwarden.model.errors`): ``StoreUnavailable``
(not applied), ``CommitOutcomeUnknown`` (a write sent and its answer lost), ``ContentRefused``,
``ConfigurationError`` (no bucket / container, no credentials). A client never resends a write
itself: a resent conditional write whose first copy landed would fail its own precondition and
look like a lost race.
"""

from __future__ import annotations

import abc
import contextlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cronwarden.model.errors import ConfigurationError


class PreconditionFailed(Exception):
    """A conditional write or delete was refused: the object exists (``put_if_absent``) or its
    version is no longer the one given. Nothing was written."""


@dataclass(frozen=True)
class Blob:
    """One object's bytes and its version (ETag, generation) as text."""

    data: bytes
    version: str


class ConditionalObjects(abc.ABC):
    """Objects in one bucket or container, written only under a precondition."""

    #: the service's name in error messages ("S3", "Blob Storage")
    service: str = "object storage"

    @abc.abstractmethod
    def get(self, name: str) -> Blob | None: ...

    @abc.abstractmethod
    def put_if_absent(self, name: str, data: bytes) -> str: ...

    @abc.abstractmethod
    def put_if_version(self, name: str, data: bytes, version: str) -> str: ...

    @abc.abstractmethod
    def delete_if_version(self, name: str, version: str) -> None: ...

    @abc.abstractmethod
    def list(self, prefix: str) -> Iterator[list[tuple[str, str]]]: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Idempotent."""


PROBE_FOLDER = "_cronwarden/"


def verify_preconditions(objects: ConditionalObjects, prefix: str = "") -> None:
    """Check that the service refuses what a conditional write must refuse, on a probe object
    of its own (``<prefix>_cronwarden/probe-<random>``, deleted afterwards): a second
    create-if-absent and a replace under a stale version. Five requests.

    An endpoint that ignores ``If-None-Match`` / ``If-Match`` (an S3-compatible server that
    does not implement conditional writes, an old emulator) would let two owners claim one
    run: that is a :class:`~cronwarden.model.errors.ConfigurationError` here, not a silent
    double run later.
    """
    name = f"{prefix}{PROBE_FOLDER}probe-{uuid.uuid4().hex}"
    current = objects.put_if_absent(name, b"1")
    try:
        _must_refuse(
            objects, "a second create-if-absent", lambda: objects.put_if_absent(name, b"2")
        )
        stale = current
        current = objects.put_if_version(name, b"3", stale)
        _must_refuse(
            objects,
            "a replace under a stale version",
            lambda: objects.put_if_version(name, b"4", stale),
        )
    finally:
        with contextlib.suppress(Exception):
            objects.delete_if_version(name, current)


def _must_refuse(objects: ConditionalObjects, what: str, write: Callable[[], object]) -> None:
    try:
        write()
    except PreconditionFailed:
        return
    raise ConfigurationError(
        f"{objects.service} accepted {what} that it must refuse: it does not honour "
        "conditional writes (If-None-Match / If-Match), so it cannot hold cronwarden's state"
    )


__all__ = ["Blob", "ConditionalObjects", "PreconditionFailed", "verify_preconditions"]
