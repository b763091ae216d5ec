"""Mapping botocore failures to the store's three outcomes (``cronwarden.model.errors``).

* not sent, or refused before anything was applied (connection refused, DNS, connect timeout,
  throttling, a capacity error): :class:`~cronwarden.model.errors.StoreUnavailable`;
* sent and then lost (read timeout, connection reset or closed mid-response, a 5xx on a write:
  DynamoDB documents that an ``InternalServerError`` write may have been applied):
  :class:`~cronwarden.model.errors.CommitOutcomeUnknown` for writes, ``StoreUnavailable`` for reads;
* a missing table: :class:`~cronwarden.model.errors.ConfigurationError`.

Messages keep the error class and code, never request parameters or credentials.
"""

from __future__ import annotations

from cronwarden.model.errors import (
    CommitOutcomeUnknown,
    ConfigurationError,
    CronwardenError,
    StoreUnavailable,
)

#: error codes that mean "refused, nothing applied: send again later"
RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "LimitExceededException",
        "TransactionConflictException",
        "TransactionInProgressException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "SlowDown",
    }
)


def error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str((response.get("Error") or {}).get("Code") or "")


def http_status(exc: BaseException) -> int:
    response = getattr(exc, "response", None) or {}
    meta = response.get("ResponseMetadata") or {}
    return int(meta.get("HTTPStatusCode") or 0)


def store_error(exc: BaseException, *, write: bool, what: str) -> CronwardenError | None:
    """The cronwarden error for a botocore exception raised by ``what``, or ``None`` when it is
    not a transport / availability failure (the caller handles or re-raises it)."""
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    name = type(exc).__name__
    if isinstance(exc, ConnectTimeoutError | EndpointConnectionError):
        return StoreUnavailable(f"DynamoDB unreachable during {what} ({name}); nothing applied")
    if isinstance(exc, ReadTimeoutError | ConnectionClosedError):
        if write:
            return CommitOutcomeUnknown(
                f"DynamoDB {what}: {name} after the request was sent; it may have been applied"
            )
        return StoreUnavailable(f"DynamoDB {what} failed ({name})")
    if isinstance(exc, ClientError):
        code, status = error_code(exc), http_status(exc)
        if code == "ResourceNotFoundException":
            return ConfigurationError(
                f"DynamoDB {what}: the table does not exist (create it, or set "
                "CRONWARDEN_AWS_CREATE_MISSING=true locally)"
            )
        if code in RETRYABLE_CODES:
            return StoreUnavailable(f"DynamoDB {what} refused ({code}); nothing applied")
        if status >= 500:
            if write:
                return CommitOutcomeUnknown(
                    f"DynamoDB {what} failed ({code or status}); it may have been applied"
                )
            return StoreUnavailable(f"DynamoDB {what} failed ({code or status})")
    from botocore.exceptions import (
        BotoCoreError,
        NoCredentialsError,
        ParamValidationError,
        PartialCredentialsError,
    )

    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return ConfigurationError(f"DynamoDB {what}: no AWS credentials ({name})")
    if isinstance(exc, ParamValidationError):
        return None  # a bug or an oversized value: nothing was sent
    if isinstance(exc, BotoCoreError):  # other transport trouble (SSL, proxy, ...)
        if write:
            return CommitOutcomeUnknown(f"DynamoDB {what} failed ({name}); outcome unknown")
        return StoreUnavailable(f"DynamoDB {what} failed ({name})")
    return None


__all__ = ["RETRYABLE_CODES", "error_code", "http_status", "store_error"]
