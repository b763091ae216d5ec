"""The one HTTP call channels and pings make: stdlib :mod:`urllib.request`, imported when
something is sent (``import cronwarden`` never pays for it). Errors become
:class:`DeliveryError` with a redacted one-line reason (URLs of webhooks are credentials)."""

from __future__ import annotations

from collections.abc import Mapping

from ...model.errors import CronwardenError
from ...model.redaction import redact

USER_AGENT = "cronwarden"


class DeliveryError(CronwardenError):
    """A channel or ping could not deliver; the message is redacted and names no URL."""


def send(
    url: str,
    body: bytes | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    method: str | None = None,
    timeout: float = 10.0,
) -> int:
    """Send one request; return the HTTP status (2xx/3xx). Raises :class:`DeliveryError`."""
    import urllib.error
    import urllib.request

    if not url.startswith(("https://", "http://")):
        raise DeliveryError("URL must start with https:// or http://")
    request = urllib.request.Request(  # noqa: S310 - scheme checked above
        url,
        data=body,
        method=method or ("POST" if body is not None else "GET"),
        headers={"User-Agent": USER_AGENT, **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:  # noqa: S310
            reply.read(65536)
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        detail = exc.read(300).decode("utf-8", "replace").strip()
        raise DeliveryError(
            redact(f"HTTP {exc.code} {exc.reason}" + (f": {detail}" if detail else ""))
        ) from None
    except urllib.error.URLError as exc:
        raise DeliveryError(redact(f"cannot connect: {exc.reason}")) from None
    except (OSError, ValueError) as exc:
        raise DeliveryError(redact(f"{type(exc).__name__}: {exc}")) from None
