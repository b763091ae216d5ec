"""Every exception cronwarden raises on purpose derives from :class:`CronwardenError`."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .ports import Record


class CronwardenError(Exception):
    """Base class of cronwarden's own errors."""


class InvalidJobDefinition(CronwardenError, ValueError):
    """A job was declared with a value that can never work (bad cron, unknown timezone, ...)."""


class ConfigurationError(CronwardenError, ValueError):
    """Provider configuration is missing or wrong."""


class MalformedRunRequest(CronwardenError, ValueError):
    """A queued run request cannot be understood; it is dead-lettered with this message."""


class UnknownJob(MalformedRunRequest):
    """A run request names a job the worker does not know."""


class StoreError(CronwardenError):
    """Base of the outcomes every store adapter maps its SDK's failures to.

    * :class:`CommitConflict`: a precondition failed; nothing was applied.
    * :class:`StoreUnavailable`: the store could not be reached; nothing was applied, so the
      same write may be sent again as it is.
    * :class:`CommitOutcomeUnknown`: the write may or may not have been applied (a timeout or a
      connection reset after the request was sent); read back before assuming either way.
    * :class:`ContentRefused`: the backend cannot hold what the commit carries (text, size);
      nothing was applied and resending cannot help.
    """


class CommitConflict(StoreError):
    """An atomic commit was refused because a precondition of one operation failed.

    ``index`` is the position of the failing operation; ``reason`` is ``"exists"`` (create of an
    existing record) or ``"version"`` (the record changed or vanished since it was read).
    Nothing of the commit was applied.

    ``found``: the record the failing operation found, when the store returns it with the
    refusal at no extra cost (DynamoDB's ``ReturnValuesOnConditionCheckFailure``); ``None``
    when the store did not say (read it), never a guess.
    """

    def __init__(
        self, index: int, reason: str, detail: str = "", *, found: Record | None = None
    ) -> None:
        self.index = index
        self.reason = reason
        self.found = found
        super().__init__(f"commit refused at op {index}: {reason}{': ' + detail if detail else ''}")


class StoreUnavailable(StoreError):
    """The store could not be reached and the operation was **not applied** (safe to resend)."""


class CommitOutcomeUnknown(StoreUnavailable):
    """The commit **may have been applied** (timeout, reset after send): read back what it wrote
    before assuming either way. A subclass of :class:`StoreUnavailable` so callers that only know
    "the store failed" keep working."""


class ContentRefused(StoreError, ValueError):
    """The store refused a commit for its **content**, not its state: text it cannot hold (a
    NUL character, a lone surrogate), a value or record past its size limits. Nothing was
    applied, and sending the same write again can never help.

    Each adapter maps its driver's "content refused" errors to this one type (a
    ``ValueError`` too, as such refusals were before); the engine treats it as permanent: the
    run is dead-lettered at once with the reason ``ContentRefused``.
    """


class RunInterrupted(CronwardenError):
    """Base of the errors ``ctx`` raises to stop a handler cooperatively."""


class LeaseLost(RunInterrupted):
    """This worker no longer owns the run: another owner took it over (fencing refused a write)."""


class Cancelled(RunInterrupted):
    """The run was asked to stop (shutdown, or it passed its max runtime)."""


class PermanentError(CronwardenError):
    """Raise from a handler when retrying cannot help: the run is dead-lettered at once."""


class FingerprintMismatch(PermanentError):
    """The same idempotency key was used with different input."""


# Names that were defined here but never raised: importable for old code, with a warning.
# A payload mismatch is reported as an ``Outcome`` (kind ``rejected``, reason
# ``"PayloadMismatch"``) and a ``fail`` overlap as ``OutcomeKind.OVERLAP_FAILED``; no exception.
_DEPRECATED = {"OverlapError": "CronwardenError", "PayloadMismatch": "PermanentError"}


def __getattr__(name: str) -> Any:
    replacement = _DEPRECATED.get(name)
    if replacement is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"cronwarden.errors.{name} was never raised and is deprecated; "
        f"it is now an alias of {replacement}",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[replacement]
