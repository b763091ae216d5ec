"""Table Storage keys for store records: layout, reversible escaping and Azure's key limits.

Layout: ``PartitionKey = escape(job)`` and ``RowKey = kind + ":" + escape(id)``. Every record of
a job shares one partition, so any commit of one job's records can be one entity-group
transaction. Records of one kind sort by id inside the partition, so "one job, one kind, id
prefix / range" is a range scan of one partition, and "one kind, all jobs" is a ``RowKey`` range
filter across partitions.

Azure forbids ``/ \\ # ?`` and the control characters U+0000..U+001F and U+007F..U+009F in keys
(Azurite accepts them). :func:`escape` rewrites them reversibly with an **order-preserving,
prefix-preserving** code, so id ranges and prefixes can be evaluated by the service on escaped
keys: every character maps to itself except

* the six *lead* characters ``␠ " . > [ ~`` and the forbidden characters, which map to a lead
  followed by one digit or capital letter: a lead ``L`` stands for the characters from ``L``
  up to the next allowed character, in order (``.`` → ``.0``, ``/`` → ``.1``;
  U+0000…U+0020 → ``␠0`` … ``␠W``; ``~`` U+007F…U+009F → ``~0`` … ``~X``).

Because the code is prefix-free and monotone per character, ``a < b`` iff
``escape(a) < escape(b)`` and ``a`` starts with ``p`` iff ``escape(a)`` starts with
``escape(p)``. Ordinary ids (windows such as ``2026-01-20T02:00Z``, job names) are unchanged.
"""

from __future__ import annotations

import re

from .errors import TableLimitError

SEPARATOR = ":"
MAX_KEY_BYTES = 1024  #: PartitionKey / RowKey limit on Azure: 1 KiB (UTF-16)
_KIND = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _forbidden(code: int) -> bool:
    return code <= 0x1F or 0x7F <= code <= 0x9F or chr(code) in "/\\#?"


def _build() -> tuple[dict[str, str], dict[str, str]]:
    groups = {  # lead -> the characters it stands for, in order (lead first where allowed)
        " ": [chr(c) for c in range(0x00, 0x21)],
        '"': ['"', "#"],
        ".": [".", "/"],
        ">": [">", "?"],
        "[": ["[", "\\"],
        "~": [chr(c) for c in range(0x7E, 0xA0)],
    }
    encode: dict[str, str] = {}
    decode: dict[str, str] = {}
    for lead, chars in groups.items():
        for position, char in enumerate(chars):
            encode[char] = lead + _DIGITS[position]
            decode[lead + _DIGITS[position]] = char
    return encode, decode


_ENCODE, _DECODE = _build()
_LEADS = frozenset(lead[0] for lead in _DECODE)
#: a lead of an escape, or a character no escaped key holds: text without any is its own
#: unescaped form (checked by one search instead of a loop over its characters)
_SPECIAL = re.compile(
    "["
    + re.escape("".join(sorted(_LEADS)) + "".join(chr(c) for c in range(0xA0) if _forbidden(c)))
    + "]"
)
_NEEDS_ESCAPE = re.compile("[" + re.escape("".join(_ENCODE)) + "]")


def escape(text: str) -> str:
    """Order- and prefix-preserving escaping of ``text`` into Azure-legal key characters."""
    return _NEEDS_ESCAPE.sub(lambda m: _ENCODE[m.group(0)], text)


def unescape(text: str) -> str:
    """Inverse of :func:`escape`; raises ``ValueError`` on text ``escape`` cannot produce."""
    if _SPECIAL.search(text) is None:  # nothing escaped (most names): the text itself
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char in _LEADS:
            pair = text[i : i + 2]
            if pair not in _DECODE:
                raise ValueError(f"not an escaped key: {text!r}")
            out.append(_DECODE[pair])
            i += 2
        else:
            if _forbidden(ord(char)):
                raise ValueError(f"not an escaped key: {text!r}")
            out.append(char)
            i += 1
    return "".join(out)


def successor(text: str) -> str:
    """The smallest string greater than every string that starts with ``text`` (non-empty)."""
    chars = list(text)
    while chars:
        last = ord(chars.pop())
        if last < 0x10FFFF:
            return "".join(chars) + chr(last + 1)
    raise ValueError("no successor of an empty or all-maximal string")


def _check_size(what: str, value: str) -> str:
    try:
        size = len(value.encode("utf-16-le"))
    except UnicodeEncodeError as exc:
        raise TableLimitError(f"{what} {value[:80]!r}… is not valid Unicode text") from exc
    if size > MAX_KEY_BYTES:
        raise TableLimitError(
            f"{what} is {size} bytes (UTF-16) after escaping; Azure Table Storage allows "
            f"{MAX_KEY_BYTES} (1 KiB): shorten it ({value[:60]!r}…)"
        )
    return value


def check_kind(kind: str) -> str:
    if not _KIND.match(kind):
        raise TableLimitError(f"record kind {kind!r}: use 1-64 letters, digits, '_' or '-'")
    return kind


def partition_key(job: str) -> str:
    """``PartitionKey`` of every record of ``job``."""
    if not job:
        raise TableLimitError("a record's job name must not be empty")
    return _check_size("PartitionKey (job name)", escape(job))


def kind_prefix(kind: str) -> str:
    """The ``RowKey`` prefix shared by all records of ``kind``."""
    return check_kind(kind) + SEPARATOR


def row_key(kind: str, record_id: str) -> str:
    """``RowKey`` of the record ``(kind, id)``."""
    return _check_size("RowKey (kind + id)", kind_prefix(kind) + escape(record_id))


def split_row_key(row: str) -> tuple[str, str]:
    """``(kind, id)`` of a ``RowKey`` written by :func:`row_key`."""
    kind, sep, rest = row.partition(SEPARATOR)
    if not sep:
        raise ValueError(f"not a cronwarden RowKey: {row!r}")
    return kind, unescape(rest)
