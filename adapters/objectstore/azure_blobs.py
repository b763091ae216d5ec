"""Azure Blob Storage as :class:`~.objects.ConditionalObjects`: block blobs uploaded with
``If-None-Match: *`` (create only if absent) or ``If-Match: <ETag>`` (replace only that
version), deleted with ``If-Match``, listed page by page. The Azure SDK
(``azure-storage-blob``) is imported when a client is built.

Blob Storage refuses a failed precondition with 412 ``ConditionNotMet``, a create over an
existing blob with 409 ``BlobAlreadyExists``, an ``If-Match`` on a missing blob with 404
``BlobNotFound``: each means "nothing written, read again". An ETag is a true version (it
changes on every write, content equal or not).

Writes go through a client with the SDK's retries off (a resent conditional write whose first
copy landed would fail its own precondition); reads retry twice, after 1 s and 3 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cronwarden.model.errors import (
    CommitOutcomeUnknown,
    ConfigurationError,
    CronwardenError,
    StoreUnavailable,
)

from .objects import Blob, ConditionalObjects, PreconditionFailed

_REFUSED = frozenset({"ConditionNotMet", "BlobAlreadyExists", "BlobNotFound", "LeaseIdMissing"})
_BUSY = frozenset({"ServerBusy", "OperationTimedOut", "InternalError"})


def _code(exc: BaseException) -> str:
    """The storage error code (the SDK gives a ``StorageErrorCode`` enum or text)."""
    code = getattr(exc, "error_code", None)
    return str(getattr(code, "value", code) or "")


def blob_error(exc: BaseException, *, write: bool, what: str) -> CronwardenError | None:
    """The cronwarden error for an Azure SDK failure of ``what``, or ``None`` when it is not a
    transport or availability failure. Messages name the error class and code only (an SDK
    message may quote the request URL with its SAS token)."""
    from azure.core.exceptions import (
        ClientAuthenticationError,
        HttpResponseError,
        ServiceRequestError,
        ServiceResponseError,
    )

    name = type(exc).__name__
    if isinstance(exc, ServiceRequestError):
        return StoreUnavailable(f"Blob Storage unreachable during {what} ({name}); nothing applied")
    if isinstance(exc, ServiceResponseError):
        if write:
            return CommitOutcomeUnknown(
                f"Blob Storage {what}: {name} after the request was sent; it may have been applied"
            )
        return StoreUnavailable(f"Blob Storage {what} failed ({name})")
    if isinstance(exc, ClientAuthenticationError):
        return ConfigurationError(f"Blob Storage {what}: authentication refused ({name})")
    if isinstance(exc, HttpResponseError):
        code, status = _code(exc), int(getattr(exc, "status_code", 0) or 0)
        if code == "ContainerNotFound":
            return ConfigurationError(
                f"Blob Storage {what}: the container does not exist (create it, or set "
                "create_missing locally)"
            )
        if code in {
            "AuthorizationFailure",
            "AuthenticationFailed",
            "AuthorizationPermissionMismatch",
        }:
            return ConfigurationError(f"Blob Storage {what}: access refused ({code})")
        if status == 503 or code == "ServerBusy":
            return StoreUnavailable(f"Blob Storage {what} refused ({code or status}); not applied")
        if status >= 500 or code in _BUSY:
            if write:
                return CommitOutcomeUnknown(
                    f"Blob Storage {what} failed ({code or status}); it may have been applied"
                )
            return StoreUnavailable(f"Blob Storage {what} failed ({code or status})")
    return None


def _version(etag: str) -> str:
    return etag.strip('"')


class BlobObjects(ConditionalObjects):
    """Block blobs in one container. ``reader`` and ``writer`` are ``ContainerClient`` objects
    of that container (the writer with ``retry_total=0``); :meth:`from_connection_string`
    builds both."""

    service = "Blob Storage"

    def __init__(self, reader: Any, writer: Any) -> None:
        self._reader, self._writer = reader, writer
        self.container = str(reader.container_name)
        self._closed = False

    @classmethod
    def from_connection_string(
        cls, connection_string: str, container: str, *, create_missing: bool = False
    ) -> BlobObjects:
        from azure.storage.blob import ContainerClient

        reader = ContainerClient.from_connection_string(connection_string, container)
        writer = ContainerClient.from_connection_string(connection_string, container, retry_total=0)
        objects = cls(reader, writer)
        if create_missing:
            objects.create_container()
        return objects

    def create_container(self) -> None:
        """Create the container unless it exists (local use; production ones come from IaC)."""
        from azure.core.exceptions import ResourceExistsError

        try:
            self._reader.create_container()
        except ResourceExistsError:
            return
        except Exception as exc:
            raise self._map(exc, write=False, what="CreateContainer") from exc

    def delete_container(self) -> None:
        """Delete the container and everything in it (tests)."""
        self._reader.delete_container()

    def _map(self, exc: Exception, *, write: bool, what: str) -> Exception:
        mapped = blob_error(exc, write=write, what=what)
        return mapped if mapped is not None else exc

    def get(self, name: str) -> Blob | None:
        try:
            download = self._reader.download_blob(name)
            data = download.readall()
        except Exception as exc:
            if _code(exc) == "BlobNotFound":
                return None
            raise self._map(exc, write=False, what="GetBlob") from exc
        return Blob(bytes(data), _version(str(download.properties.etag)))

    def _upload(self, name: str, data: bytes, **condition: Any) -> str:
        from azure.storage.blob import ContentSettings

        try:
            result = self._writer.get_blob_client(name).upload_blob(
                data,
                content_settings=ContentSettings(content_type="application/json"),
                **condition,
            )
        except Exception as exc:
            if _code(exc) in _REFUSED:
                raise PreconditionFailed(_code(exc)) from None
            raise self._map(exc, write=True, what="PutBlob") from exc
        return _version(str(result["etag"]))

    def put_if_absent(self, name: str, data: bytes) -> str:
        return self._upload(name, data, overwrite=False)

    def put_if_version(self, name: str, data: bytes, version: str) -> str:
        from azure.core import MatchConditions

        return self._upload(
            name,
            data,
            overwrite=True,
            etag=f'"{version}"',
            match_condition=MatchConditions.IfNotModified,
        )

    def delete_if_version(self, name: str, version: str) -> None:
        from azure.core import MatchConditions

        try:
            self._writer.delete_blob(
                name, etag=f'"{version}"', match_condition=MatchConditions.IfNotModified
            )
        except Exception as exc:
            if _code(exc) in _REFUSED:
                raise PreconditionFailed(_code(exc)) from None
            raise self._map(exc, write=True, what="DeleteBlob") from exc

    def list(self, prefix: str) -> Iterator[list[tuple[str, str]]]:
        try:
            pages = self._reader.list_blobs(name_starts_with=prefix).by_page()
            for page in pages:
                yield [(str(b.name), _version(str(b.etag))) for b in page]
        except Exception as exc:
            raise self._map(exc, write=False, what="ListBlobs") from exc

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._reader.close()
            self._writer.close()

    def __repr__(self) -> str:
        return f"BlobObjects(container={self.container!r})"


__all__ = ["BlobObjects", "blob_error"]
