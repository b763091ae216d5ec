"""Redaction of secrets from anything cronwarden logs, alerts or writes as an error snippet.

Two layers: patterns that recognise secret-shaped text (connection-string keys, bearer tokens,
URL passwords, SAS signatures, private keys, well-known token prefixes), and exact values
registered at run time with :func:`register_secret` (e.g. values read from a secret manager).
"""

from __future__ import annotations

import re
import threading

MASK = "***"

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # key=value pairs in connection strings and query strings
    (
        re.compile(
            r"(?i)\b((?:Account|SharedAccess|Access|Api|Secret|Client)?Key|password|passwd|pwd|"
            r"secret|token|sig|signature|credential|client_secret|access_token|refresh_token|"
            r"api[_-]?key)(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^;&\s,\"'}]+)"
        ),
        r"\1\2" + MASK,
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + MASK),
    (re.compile(r"(?i)(://[^:/\s@]+:)[^@\s/]+@"), r"\1" + MASK + "@"),
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S
        ),
        "-----BEGIN PRIVATE KEY-----" + MASK,
    ),
    (
        re.compile(r"\b(xox[abposr]-|ghp_|gho_|github_pat_|sk-|AKIA|AIza)[A-Za-z0-9_\-]{8,}"),
        r"\1" + MASK,
    ),
]

_registered: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Redact this exact value wherever it appears from now on (values under 4 chars ignored)."""
    if value and len(value) >= 4:
        with _lock:
            _registered.add(value)


def redact(text: str) -> str:
    """``text`` with secrets replaced by ``***``."""
    if not text:
        return text
    with _lock:
        values = sorted(_registered, key=len, reverse=True)
    for value in values:
        text = text.replace(value, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def snippet(error: BaseException, limit: int = 500) -> str:
    """A redacted, truncated one-paragraph description of ``error`` for records and alerts."""
    text = redact(f"{type(error).__name__}: {error}")
    return text if len(text) <= limit else text[: limit - 1] + "…"
