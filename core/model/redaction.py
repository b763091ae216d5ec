"""Redaction of secrets from anything cronwarden logs, alerts or writes as an error snippet.

Two layers: patterns that recognise secret-shaped text (connection-string keys, bearer tokens,
URL passwords, SAS signatures, private keys, AWS keys, well-known token prefixes), and exact
values registered at run time with :func:`register_secret` (e.g. values read from a secret
manager). This is the one rule set of cronwarden: the core, every adapter and the logs use
:func:`redact` from here.
"""

from __future__ import annotations

import re
import threading
import urllib.parse

MASK = "***"

#: Names whose value is a secret in ``name=value`` / ``name: value`` / ``"name": "value"`` text
#: (connection strings, query strings, env dumps, JSON, INI files). ``sig`` is the signature of a
#: SAS URL; its other parameters (``sv``, ``se``, ``sp``...) are not secret and stay readable.
#: Env-style prefixes are allowed before the unambiguous names (``DB_PASSWORD``,
#: ``AWS_SECRET_ACCESS_KEY``, ``GITHUB_TOKEN``) but not before ``key`` (``run_key`` is not secret).
_SENSITIVE_NAMES = (
    r"(?:[A-Za-z0-9]+_)*(?:password|passwd|pwd|secret|token|secret_access_key|session_token|"
    r"api_key)|(?:Account|SharedAccess|Access|Api|Secret|Client)?Key|sig|signature|credential|"
    r"api-key|SecretAccessKey|SessionToken"
)

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # A SAS token as a connection-string value (``SharedAccessSignature=sv=..&sig=..;``, or the
    # Service Bus form ``SharedAccessSignature=SharedAccessSignature sr=..&sig=..``): the whole
    # value up to ``;`` is one credential, masked as a unit.
    (
        re.compile(r"(?i)\b(SharedAccessSignature\s*=\s*)(?:SharedAccessSignature\s+)?[^;\s\"']+"),
        r"\1" + MASK,
    ),
    # key=value pairs; the name may be quoted (JSON: ``"password": "..."``)
    (
        re.compile(
            r"(?i)\b(" + _SENSITIVE_NAMES + r")([\"']?\s*[=:]\s*)"
            r"(\"[^\"]*\"|'[^']*'|[^;&\s,\"'}]+)"
        ),
        r"\1\2" + MASK,
    ),
    # Authorization values: bearer and basic credentials, Service Bus SAS tokens
    # ("SharedAccessSignature sr=..&sig=..&se=..&skn=..").
    (
        re.compile(r"(?i)\b(bearer|basic|SharedAccessSignature)\s+[A-Za-z0-9._~+/=%&:-]{8,}"),
        r"\1 " + MASK,
    ),
    # user:password@ in URLs and DSNs (postgresql://user:pw@host); up to the last "@" of the
    # authority, so a password containing "@" is masked whole.
    (re.compile(r"(?i)(://[^:/\s@]*:)[^\s/]*@"), r"\1" + MASK + "@"),
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S
        ),
        "-----BEGIN PRIVATE KEY-----" + MASK,
    ),
    # Well-known token prefixes: Slack, GitHub, OpenAI-style, AWS access key ids, Google API keys.
    (
        re.compile(
            r"\b(xox[abposr]-|ghp_|gho_|ghs_|github_pat_|sk-|AKIA|ASIA|AIza)[A-Za-z0-9_\-]{8,}"
        ),
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


def redact_url(url: str) -> str:
    """``url`` (``scheme://user:pw@host/...``) with the password masked, whether in the
    authority (``user:pw@``, ``:pw@``) or a ``password=`` query parameter; then :func:`redact`.
    Text that is not a URL is only redacted."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return redact(url)
    text = url
    if parts.password is not None:
        host = parts.netloc.rsplit("@", 1)[1]
        text = urllib.parse.urlunsplit(
            parts._replace(netloc=f"{parts.username or ''}:{MASK}@{host}")
        )
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if any(k.lower() == "password" for k, _ in query):
        masked = [(k, MASK if k.lower() == "password" else v) for k, v in query]
        text = urllib.parse.urlunsplit(
            urllib.parse.urlsplit(text)._replace(query=urllib.parse.urlencode(masked))
        )
    return redact(text)


def snippet(error: BaseException, limit: int = 500) -> str:
    """A redacted, truncated one-paragraph description of ``error`` for records and alerts."""
    text = redact(f"{type(error).__name__}: {error}")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def traceback_tail(error: BaseException, limit: int = 2000) -> str:
    """The redacted last ``limit`` characters of ``error``'s traceback (where it failed)."""
    import traceback

    text = redact("".join(traceback.format_exception(error)))
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]
