"""Redaction of secrets from anything cronwarden logs, alerts or writes as an error snippet.

Two layers: patterns that recognise secret-shaped text (``name=value`` pairs whose name marks a
secret, Authorization headers, bearer tokens, URL passwords, SAS signatures, JWTs, webhook URLs
whose path is the credential, private keys, well-known token prefixes), and exact values
registered at run time with :func:`register_secret` (e.g. values read from a secret manager).
This is the one rule set of cronwarden: the core, every adapter and the logs use :func:`redact`
from here.
"""

from __future__ import annotations

import functools
import re
import threading
import urllib.parse
from collections.abc import Callable

MASK = "***"

# -- which names mark a secret -------------------------------------------------------------------
# A name is split into words at "_", "-", "." and camelCase humps ("accessToken" -> access, token;
# "PGPASSWORD" stays one word). Then:
#: a word containing one of these marks a secret (PGPASSWORD, clientSecret, CREDENTIALS)
_SECRET_PARTS = ("password", "passwd", "passphrase", "secret", "credential", "apikey", "privatekey")
#: a word ending with one of these marks a secret (GITHUB_TOKEN, authToken, MYSQL_PWD, masterauth)
_SECRET_ENDINGS = ("token", "pwd", "auth", "authorization")
#: whole words that mark a secret (DB_PASS, creds, a SAS ``sig``; bare ``key`` as in ``?key=``)
_SECRET_WORDS = frozenset({"pass", "pgpass", "requirepass", "creds", "sig", "signature"})
#: ``key`` marks a secret only as the last word, after one of these (api_key, AccountKey,
#: SharedAccessKey, private_key), so ``run_key`` and ``idempotency_key`` stay readable and
#: ``AccessKeyId`` (an id, not the key) too.
_KEY_QUALIFIERS = (
    "api", "private", "access", "account", "secret", "client", "signing", "encryption",
    "master", "subscription",
)  # fmt: skip
#: a last word that says the value describes a secret rather than being one (PASSWORD_FILE,
#: TOKEN_URL, SecretName, AUTH_METHOD, token_count) or that the name is a
#: file (secret.py: 12); not json/yaml: GOOGLE_CREDENTIALS_JSON holds the secret.
_DESCRIPTORS = frozenset(
    {
        "file", "path", "dir", "url", "uri", "endpoint", "host", "name", "names", "type",
        "method", "mode", "scheme", "ttl", "expiry", "expires", "expiration", "length", "count",
        "limit", "size", "timeout", "enabled", "required", "version", "format", "arn", "ref",
        "env", "var", "py", "cfg", "conf", "txt", "log", "md", "sh",
    }
)  # fmt: skip
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


@functools.lru_cache(maxsize=1024)
def is_secret_name(name: str) -> bool:
    """Whether a variable, setting, header or JSON key called ``name`` holds a secret.

    True when a word of the name (split at ``_``, ``-``, ``.`` and camelCase) contains
    password/passwd/passphrase/secret/credential/apikey/privatekey, ends with
    token/pwd/auth/authorization, is pass/creds/sig/signature, or when the last word is ``key``
    after api/private/access/account/secret/client/...; but not when the last word describes
    the secret instead of holding it (``PASSWORD_FILE``, ``TOKEN_URL``, ``SecretName``).
    Examples: ``PGPASSWORD``, ``MYSQL_PWD``, ``accessToken``, ``clientSecret``, ``private_key``,
    ``X-Auth-Token``, ``Authorization``; not ``run_key``, ``AccessKeyId``, ``max_tokens``.
    """
    words: list[str] = [
        w.lower() for part in re.split(r"[_.\-\s]+", name) for w in _WORDS.findall(part)
    ]
    if not words:
        return False
    if len(words) > 1 and words[-1] in _DESCRIPTORS:
        return False
    for word in words:
        if word in _SECRET_WORDS or word.endswith(_SECRET_ENDINGS):
            return True
        if any(part in word for part in _SECRET_PARTS):
            return True
    last = words[-1]
    if last == "key":
        return len(words) == 1 or words[-2].endswith(_KEY_QUALIFIERS)
    return last.endswith("key") and last[:-3].endswith(_KEY_QUALIFIERS)


# -- name=value pairs ----------------------------------------------------------------------------
#: Authorization schemes: after an authorization name the scheme stays readable, the rest goes.
_SCHEMES = r"bearer|basic|token|digest|negotiate|ntlm|hmac|apikey|SharedAccessSignature"
#: ``name`` ``=``/``:`` ``value``, the name possibly quoted (JSON, Python reprs), the value
#: a quoted string (with a b''/r''/u'' prefix, escapes), a scheme and credential, or a bare word.
#: Names start where an identifier starts and are matched possessively (linear on long words);
#: :func:`is_secret_name` (cached) decides in the callback.
_PAIR = re.compile(
    r"(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z0-9_.\-]++)(?P<sep>[\"']?[ \t]*[=:]\s*)"
    r"(?:(?P<scheme>(?i:" + _SCHEMES + r"))[ \t]+(?P<credential>[^\s\"',;}]+)"
    r"|(?P<value>[bBrRuU]{0,2}\"(?:[^\"\\\n]|\\.)*\"|[bBrRuU]{0,2}'(?:[^'\\\n]|\\.)*'"
    r"|[^;&\s,\"'}]+|[bBrRuU]{0,2}[\"'][^\s\"',;}]+))"
)


def _masked_pair(match: re.Match[str]) -> str | None:
    """The masked text of one ``name=value`` match, or None when it is not a secret."""
    name, sep = match["name"], match["sep"]
    if not is_secret_name(name):
        return None
    if match["scheme"] is not None:
        if "auth" in name.lower():  # Authorization: Bearer ***
            return f"{name}{sep}{match['scheme']} {MASK}"
        return f"{name}{sep}{MASK}"
    return f"{name}{sep}{MASK}"


def _mask_pairs(text: str) -> str:
    """``text`` with the values of secret-named pairs masked.

    A pair that is not a secret gives back its value to the scan (not ``re.sub``, which would
    skip it): in ``failed: AccountKey=...`` the value of ``failed:`` holds the real pair.
    """
    parts: list[str] = []
    done = 0
    match = _PAIR.search(text)
    while match is not None:
        masked = _masked_pair(match)
        if masked is None:
            match = _PAIR.search(text, match.end("sep"))
            continue
        parts += (text[done : match.start()], masked)
        done = match.end()
        match = _PAIR.search(text, done)
    return "".join(parts) + text[done:] if parts else text


def _sub(pattern: re.Pattern[str], replacement: str) -> Callable[[str], str]:
    return functools.partial(pattern.sub, replacement)


#: (rule, needles): a rule runs only when the lowercased text holds one of its needles, a
#: substring test far cheaper than the regex scan on every log line.
_RULES: list[tuple[Callable[[str], str], tuple[str, ...]]] = [
    # A SAS token as a connection-string value (``SharedAccessSignature=sv=..&sig=..;``, or the
    # Service Bus form ``SharedAccessSignature=SharedAccessSignature sr=..&sig=..``): the whole
    # value up to ``;`` is one credential, masked as a unit.
    (
        _sub(
            re.compile(
                r"(?i)\b(SharedAccessSignature\s*=\s*)(?:SharedAccessSignature\s+)?[^;\s\"']+"
            ),
            r"\1" + MASK,
        ),
        ("sharedaccesssignature",),
    ),
    # Private keys, before anything else looks inside them.
    (
        _sub(
            re.compile(
                r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S
            ),
            "-----BEGIN PRIVATE KEY-----" + MASK,
        ),
        ("private key-----",),
    ),
    # name=value / name: value / "name": "value" where the name marks a secret (is_secret_name);
    # the whole value goes, quotes and b'' included; an Authorization scheme stays readable.
    (_mask_pairs, ("pass", "pwd", "secret", "token", "key", "auth", "cred", "sig")),
    # Authorization values anywhere: bearer and basic credentials, Service Bus SAS tokens
    # ("SharedAccessSignature sr=..&sig=..&se=..&skn=..").
    (
        _sub(
            re.compile(r"(?i)\b(bearer|basic|SharedAccessSignature)\s+[A-Za-z0-9._~+/=%&:-]{8,}"),
            r"\1 " + MASK,
        ),
        ("bearer", "basic", "sharedaccesssignature"),
    ),
    # JSON Web Tokens: header.payload.signature, both first parts base64url JSON ("eyJ").
    (
        _sub(re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"), MASK),
        ("eyj",),
    ),
    # user:password@ in URLs and DSNs (postgresql://user:pw@host); up to the last "@" of the
    # authority, so a password containing "@" is masked whole.
    (_sub(re.compile(r"(://[^:/\s@]*:)[^\s/]*@"), r"\1" + MASK + "@"), ("://",)),
    # ... and a password with "/" or spaces (not percent-encoded) up to the next "@"; a port
    # (host:8080/path/@me) is not a password.
    (
        _sub(
            re.compile(r"(://[^:/\s@]*:)(?!\d+(?:[/?#\s]|$))[^\s@]*(?: [^\s@]+){0,3}@"),
            r"\1" + MASK + "@",
        ),
        ("://",),
    ),
    # Webhook URLs whose path is the credential: Slack, Discord, Teams / Office 365 connectors.
    (
        _sub(
            re.compile(
                r"(?i)(\bhttps?://(?:hooks\.slack\.com/(?:services|workflows|triggers)/"
                r"|(?:[\w-]+\.)?discord(?:app)?\.com/api(?:/v\d+)?/webhooks/"
                r"|[\w.-]*\.webhook\.office\.com/|outlook\.office(?:365)?\.com/webhook/))"
                r"[^\s\"'<>]+"
            ),
            r"\1" + MASK,
        ),
        ("hooks.slack.com", "/webhooks/", ".webhook.office.com", "/webhook/"),
    ),
    # Well-known token prefixes: Slack, GitHub, GitLab, Stripe, OpenAI-style, AWS access key
    # ids, Google API keys; npm and SendGrid by their exact shape (npm_config_* is no token).
    (
        _sub(
            re.compile(
                r"\b(xox[abposr]-|xapp-|gh[pousr]_|github_pat_|sk-|(?:sk|rk)_(?:live|test)_|"
                r"whsec_|AKIA|ASIA|AIza|glpat-)[A-Za-z0-9_\-]{8,}"
            ),
            r"\1" + MASK,
        ),
        ("xox", "xapp-", "gh", "sk-", "sk_", "rk_", "whsec_", "akia", "asia", "aiza", "glpat-"),
    ),
    (_sub(re.compile(r"\b(npm_)[A-Za-z0-9]{36}\b"), r"\1" + MASK), ("npm_",)),
    (
        _sub(re.compile(r"\b(SG\.)[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), r"\1" + MASK),
        ("sg.",),
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
    lowered = text.lower()
    for rule, needles in _RULES:
        if any(needle in lowered for needle in needles):
            text = rule(text)
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
