"""Shared access signature (SAS) checks for CBS ``put-token``, as Service Bus makes them.

A SAS token reads ``SharedAccessSignature sr=<uri>&sig=<signature>&se=<expiry>&skn=<key name>``
(fields in any order, values URL-encoded). The signature is
``base64(HMAC-SHA256(key, <sr as written in the token> + "\\n" + <se>))``: the SDK URL-encodes
``sr`` before signing and writes it encoded, Microsoft's hand-written samples sign and write it
raw; both sign what they write, so checking against the text as written accepts both.

Contract: :meth:`SasValidator.check` returns None for a token that a namespace with these keys
would accept for ``audience``, else a description of why not (never the token or the key).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote_plus, unquote_plus, urlparse

#: The emulator's default policy: Microsoft's emulator documents this name and dummy key.
DEFAULT_KEY_NAME = "RootManageSharedAccessKey"
DEFAULT_KEY = "SAS_KEY_VALUE"
_PREFIX = "SharedAccessSignature "


def _entity_path(uri: str) -> str:
    """``sb://host:port/Queue/`` → ``queue``: the part of a resource URI a token scopes.

    Hosts are not compared: the emulator answers on loopback under any name."""
    text = unquote_plus(uri).strip()
    path = urlparse(text).path if "://" in text else text
    return path.strip("/").lower()


def _covers(resource: str, audience: str) -> bool:
    scope, target = _entity_path(resource), _entity_path(audience)
    return not scope or target == scope or target.startswith(scope + "/")


@dataclass(frozen=True)
class SasValidator:
    """The namespace's shared access keys (key name → key). ``accept_any`` skips every check."""

    keys: Mapping[str, str] = field(default_factory=lambda: {DEFAULT_KEY_NAME: DEFAULT_KEY})
    accept_any: bool = False
    clock: Callable[[], float] = time.time

    def check(self, token: object, audience: str) -> str | None:
        if self.accept_any:
            return None
        # Judged by the token's text: pyamqp labels every token "jwt" in the CBS request.
        if not isinstance(token, str) or not token.startswith(_PREFIX):
            return (
                "Unauthorized: the emulator accepts shared access signatures only (a JWT from "
                "a token credential cannot be checked; run it with --accept-any-key to skip)."
            )
        raw: dict[str, str] = {}
        for part in token[len(_PREFIX) :].split("&"):
            name, _, value = part.partition("=")
            raw[name.strip().lower()] = value.strip()
        if not {"sr", "sig", "se", "skn"} <= raw.keys():
            return "InvalidSignature: the token lacks one of sr, sig, se, skn."
        key_name = unquote_plus(raw["skn"])
        key = next((v for k, v in self.keys.items() if k.lower() == key_name.lower()), None)
        if key is None:
            return f"Unauthorized: no shared access key named {key_name!r} in this namespace."
        try:
            expiry = int(raw["se"])
        except ValueError:
            return "InvalidSignature: the token's expiry (se) is not a number."
        if expiry <= self.clock():
            return f"ExpiredToken: the token expired at {expiry} (epoch seconds)."
        try:
            signature = base64.b64decode(unquote_plus(raw["sig"]), validate=True)
        except ValueError:
            return "InvalidSignature: the signature is not base64."
        candidates = {raw["sr"], quote_plus(unquote_plus(raw["sr"]))}
        if not any(
            hmac.compare_digest(
                signature,
                hmac.new(key.encode(), f"{sr}\n{raw['se']}".encode(), hashlib.sha256).digest(),
            )
            for sr in candidates
        ):
            return "InvalidSignature: the token has an invalid signature."
        if not _covers(raw["sr"], audience):
            return "InvalidAudience: the token's resource (sr) does not cover the entity."
        return None
