"""Text every store can hold: what the engine applies to text it did not write itself (a
handler's error message, a command's output, a traceback) before committing it.

Stores differ in the text they refuse: PostgreSQL's ``jsonb`` cannot hold the NUL character,
and no store's UTF-8 encoding holds a lone surrogate (what ``os.fsdecode`` makes of a file name
that is not UTF-8); each has its own size limits (``StoreCapabilities.max_text_bytes``). A
value that reaches a store anyway is refused as
:class:`~cronwarden.model.errors.ContentRefused`.
"""

from __future__ import annotations

import re

#: characters no store can be relied on to hold: NUL and lone surrogates
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
ELLIPSIS = "…"


def unstorable(text: str) -> bool:
    """Whether ``text`` holds a character some store cannot hold (NUL, a lone surrogate)."""
    return _UNSTORABLE.search(text) is not None


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point: text no UTF-8 encoder takes, and which a
    JSON round trip would silently merge with its neighbour (``"\\ud83d" "\\ude00"`` comes
    back as one character); an adapter whose wire format is JSON refuses it."""
    return _SURROGATE.search(text) is not None


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return "\\x00" if char == "\x00" else f"\\u{ord(char):04x}"


def storable(text: str, max_bytes: int | None = None) -> str:
    """``text`` with NUL escaped as ``\\x00`` and each lone surrogate as ``\\udcXX`` (visible,
    never silently dropped), cut to at most ``max_bytes`` bytes of UTF-8 (ending in ``…``
    when cut, never inside a character). Text with neither and within the limit is returned
    as it is."""
    if max_bytes is not None and len(text) > max_bytes:
        text = text[: max_bytes + 1]  # a character takes a byte at least: the rest is cut
    if unstorable(text):
        text = _UNSTORABLE.sub(_escape, text)
    if max_bytes is None or len(text) * 4 <= max_bytes:
        return text
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    room = max(0, max_bytes - len(ELLIPSIS.encode("utf-8")))
    return encoded[:room].decode("utf-8", "ignore") + ELLIPSIS
