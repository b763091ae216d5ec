"""Amazon S3 as :class:`~.objects.ConditionalObjects`: ``PutObject`` with ``If-None-Match: *``
(create only if absent) or ``If-Match: <ETag>`` (replace only that version), ``DeleteObject``
with ``If-Match``, ``ListObjectsV2`` pages. boto3 is imported when a client is built.

S3 answers a failed precondition with 412 ``PreconditionFailed``, and a conditional write that
raced another one still in flight on the same key with 409 ``ConditionalRequestConflict``; both
mean "nothing written, read again". ``If-Match`` on a missing key answers 404 ``NoSuchKey``:
the version given is gone, the same refusal.

Writes go through a client with botocore's retries off: a resent conditional write whose first
copy landed would fail its own precondition and read as a lost race. Reads and listings retry
(standard mode).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cronwarden.adapters.aws.errors import error_code, http_status
from cronwarden.model.errors import (
    CommitOutcomeUnknown,
    ConfigurationError,
    CronwardenError,
    StoreUnavailable,
)

from .objects import Blob, ConditionalObjects, PreconditionFailed

_REFUSED = frozenset({"PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "412"})
_THROTTLED = frozenset({"SlowDown", "ServiceUnavailable", "503", "Throttling", "RequestTimeout"})


def _version(etag: str) -> str:
    """An ETag without its quotes (S3 quotes it in some answers and not in others)."""
    return etag.strip('"')


def s3_error(exc: BaseException, *, write: bool, what: str) -> CronwardenError | None:
    """The cronwarden error for a botocore failure of ``what``, or ``None`` when it is not a
    transport or availability failure. Messages name the error class and code only."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
        ReadTimeoutError,
    )

    name = type(exc).__name__
    if isinstance(exc, ConnectTimeoutError | EndpointConnectionError):
        return StoreUnavailable(f"S3 unreachable during {what} ({name}); nothing applied")
    if isinstance(exc, ReadTimeoutError | ConnectionClosedError):
        if write:
            return CommitOutcomeUnknown(
                f"S3 {what}: {name} after the request was sent; it may have been applied"
            )
        return StoreUnavailable(f"S3 {what} failed ({name})")
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return ConfigurationError(f"S3 {what}: no AWS credentials ({name})")
    if isinstance(exc, ClientError):
        code, status = error_code(exc), http_status(exc)
        if code == "NoSuchBucket":
            return ConfigurationError(
                f"S3 {what}: the bucket does not exist (create it, or set "
                "CRONWARDEN_AWS_CREATE_MISSING=true locally)"
            )
        if code in {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"}:
            return ConfigurationError(f"S3 {what}: access refused ({code})")
        if code in _THROTTLED:
            return StoreUnavailable(f"S3 {what} refused ({code}); nothing applied")
        if status >= 500:
            if write:
                return CommitOutcomeUnknown(
                    f"S3 {what} failed ({code or status}); it may have been applied"
                )
            return StoreUnavailable(f"S3 {what} failed ({code or status})")
        return None
    if isinstance(exc, BotoCoreError):
        if write:
            return CommitOutcomeUnknown(f"S3 {what} failed ({name}); outcome unknown")
        return StoreUnavailable(f"S3 {what} failed ({name})")
    return None


class S3Objects(ConditionalObjects):
    """Objects in one S3 bucket. ``reader`` and ``writer`` are boto3 S3 clients (the writer
    without retries); :meth:`from_settings` builds both."""

    service = "S3"

    def __init__(self, reader: Any, writer: Any, bucket: str) -> None:
        self._reader, self._writer, self.bucket = reader, writer, bucket
        self._closed = False

    @classmethod
    def from_settings(cls, settings: Any) -> S3Objects:
        """Clients from :class:`~.settings.S3Settings` (region, endpoint, timeouts of its
        ``aws`` part); creates the bucket when ``create_missing`` is set."""
        import boto3
        from botocore.config import Config

        aws = settings.aws

        def make(attempts: int) -> Any:
            config = Config(
                region_name=aws.region,
                connect_timeout=aws.connect_timeout,
                read_timeout=aws.read_timeout,
                retries={"mode": "standard", "max_attempts": attempts},
            )
            session = boto3.session.Session(region_name=aws.region)
            return session.client("s3", endpoint_url=aws.endpoint_url, config=config)

        objects = cls(make(aws.max_attempts), make(1), settings.bucket)
        if settings.create_missing:
            objects.create_bucket()
        return objects

    def create_bucket(self) -> None:
        """Create the bucket unless it exists (local use; production buckets come from IaC)."""
        try:
            self._writer.create_bucket(Bucket=self.bucket)
        except Exception as exc:
            if error_code(exc) not in {"BucketAlreadyOwnedByYou", "BucketAlreadyExists"}:
                raise self._map(exc, write=False, what="CreateBucket") from exc

    def delete_bucket(self) -> None:
        """Delete every object and the bucket (tests)."""
        for page in self.list(""):
            for name, _ in page:
                self._writer.delete_object(Bucket=self.bucket, Key=name)
        self._writer.delete_bucket(Bucket=self.bucket)

    def _map(self, exc: Exception, *, write: bool, what: str) -> Exception:
        mapped = s3_error(exc, write=write, what=what)
        return mapped if mapped is not None else exc

    def get(self, name: str) -> Blob | None:
        try:
            response = self._reader.get_object(Bucket=self.bucket, Key=name)
            data = response["Body"].read()
        except Exception as exc:
            if error_code(exc) in {"NoSuchKey", "404"}:
                return None
            raise self._map(exc, write=False, what="GetObject") from exc
        return Blob(data, _version(str(response["ETag"])))

    def _put(self, name: str, data: bytes, **condition: str) -> str:
        try:
            response = self._writer.put_object(
                Bucket=self.bucket,
                Key=name,
                Body=data,
                ContentType="application/json",
                **condition,
            )
        except Exception as exc:
            if error_code(exc) in _REFUSED:
                raise PreconditionFailed(error_code(exc)) from None
            raise self._map(exc, write=True, what="PutObject") from exc
        return _version(str(response["ETag"]))

    def put_if_absent(self, name: str, data: bytes) -> str:
        return self._put(name, data, IfNoneMatch="*")

    def put_if_version(self, name: str, data: bytes, version: str) -> str:
        return self._put(name, data, IfMatch=f'"{version}"')

    def delete_if_version(self, name: str, version: str) -> None:
        try:
            self._writer.delete_object(Bucket=self.bucket, Key=name, IfMatch=f'"{version}"')
        except Exception as exc:
            if error_code(exc) in _REFUSED:
                raise PreconditionFailed(error_code(exc)) from None
            raise self._map(exc, write=True, what="DeleteObject") from exc

    def list(self, prefix: str) -> Iterator[list[tuple[str, str]]]:
        token: str | None = None
        while True:
            options: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
            if token:
                options["ContinuationToken"] = token
            try:
                response = self._reader.list_objects_v2(**options)
            except Exception as exc:
                raise self._map(exc, write=False, what="ListObjectsV2") from exc
            yield [
                (str(o["Key"]), _version(str(o["ETag"]))) for o in response.get("Contents") or []
            ]
            token = response.get("NextContinuationToken")
            if not response.get("IsTruncated") or not token:
                return

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._reader.close()
            self._writer.close()

    def __repr__(self) -> str:
        return f"S3Objects(bucket={self.bucket!r})"


__all__ = ["S3Objects", "s3_error"]
