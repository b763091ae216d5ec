"""The one HTTP call channels and pings make: stdlib :mod:`urllib.request`, imported when
something is sent (``import cronwarden`` never pays for it). Errors become
:class:`DeliveryError` with a redacted one-line reason (URLs of webhooks are credentials)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

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
    """Send one request; return the HTTP status (2xx). Raises :class:`DeliveryError`, also
    for a redirect: it is not followed (urllib would resend a POST as a GET without its body,
    to a page that answers 200, and an alert nobody received would count as delivered)."""
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
        with opener().open(request, timeout=timeout) as reply:
            reply.read(65536)
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            raise DeliveryError(
                f"HTTP {exc.code} {exc.reason}: the endpoint redirects; a redirect is not "
                "followed (a POST would arrive as a GET without the alert): configure the URL "
                "it redirects to"
            ) from None
        detail = exc.read(300).decode("utf-8", "replace").strip()
        raise DeliveryError(
            redact(f"HTTP {exc.code} {exc.reason}" + (f": {detail}" if detail else ""))
        ) from None
    except urllib.error.URLError as exc:
        raise DeliveryError(redact(f"cannot connect: {exc.reason}")) from None
    except (OSError, ValueError) as exc:
        raise DeliveryError(redact(f"{type(exc).__name__}: {exc}")) from None


@functools.lru_cache(maxsize=1)
def opener() -> Any:
    """An opener that follows no redirect: a 3xx reply surfaces as ``HTTPError``."""
    import urllib.request

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    return urllib.request.build_opener(_NoRedirect)
