"""Pure helpers of the Firestore layout: document ids, value encoding, range bounds.

No Google import here; everything is plain Python so it is cheap and unit-testable.
"""

from __future__ import annotations

import re
from typing import Any

SEPARATOR = "|"  #: between the encoded job and the encoded record id in a document id
MAX_DOC_ID_BYTES = 1500  #: Firestore's limit on a document id

# Characters escaped as %XX inside the job and id parts of a document id: "/" (a path
# separator for Firestore), "%" (the escape itself), the separator, and control characters.
_ESCAPE = re.compile(r"[%/|\x00-\x1f\x7f]")

# Firestore cannot store an array directly inside an array; such inner arrays are wrapped in a
# one-key map. A user map that happens to use one of the marker keys is wrapped too.
LIST_MARKER = "cw~list"
MAP_MARKER = "cw~map"


def _escape(text: str) -> str:
    return _ESCAPE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), text)


def _unescape(text: str) -> str:
    return re.sub(
        r"(?:%[0-9A-F]{2})+",
        lambda m: bytes.fromhex(m.group().replace("%", "")).decode(),
        text,
    )


def doc_id(job: str, record_id: str) -> str:
    """Document id of a record: ``escape(job) | escape(id)``; unique and reversible.

    A leading ``_`` is escaped too so an id can never match Firestore's reserved ``__.*__``.
    """
    job_part = _escape(job)
    if job_part.startswith("_"):
        job_part = "%5F" + job_part[1:]
    result = f"{job_part}{SEPARATOR}{_escape(record_id)}"
    if len(result.encode()) > MAX_DOC_ID_BYTES:
        raise ValueError(
            f"record key too long for Firestore ({len(result.encode())} bytes > "
            f"{MAX_DOC_ID_BYTES}): job {job!r}, id {record_id[:80]!r}..."
        )
    return result


def split_doc_id(document_id: str) -> tuple[str, str]:
    """Inverse of :func:`doc_id`."""
    job_part, _, id_part = document_id.partition(SEPARATOR)
    return _unescape(job_part), _unescape(id_part)


def encode(value: Any, *, in_list: bool = False) -> Any:
    """A JSON value in a form Firestore stores faithfully (see the module notes)."""
    if isinstance(value, dict):
        mapped = {str(k): encode(v) for k, v in value.items()}
        if LIST_MARKER in value or MAP_MARKER in value:
            return {MAP_MARKER: mapped}
        return mapped
    if isinstance(value, list | tuple):
        items = [encode(v, in_list=True) for v in value]
        return {LIST_MARKER: items} if in_list else items
    return value


def decode(value: Any) -> Any:
    """Inverse of :func:`encode`."""
    if isinstance(value, dict):
        if len(value) == 1 and LIST_MARKER in value:
            return [decode(v) for v in value[LIST_MARKER]]
        if len(value) == 1 and MAP_MARKER in value:
            return {k: decode(v) for k, v in value[MAP_MARKER].items()}
        # scalars (most values) without a call each
        return {k: decode(v) if isinstance(v, dict | list) else v for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def prefix_end(prefix: str) -> str | None:
    """The smallest string greater than every string starting with ``prefix`` (code-point
    order, which is Firestore's UTF-8 byte order), or ``None`` if there is none."""
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        nxt = last + 1
        if 0xD800 <= nxt <= 0xDFFF:
            nxt = 0xE000
        if nxt <= 0x10FFFF:
            return "".join(chars) + chr(nxt)
    return None


def id_bounds(prefix: str, start: str | None, end: str | None) -> tuple[str | None, str | None]:
    """Combine ``prefix`` with ``[start, end)`` into one half-open range of ids."""
    low, high = start, end
    if prefix:
        low = prefix if low is None or prefix > low else low
        upper = prefix_end(prefix)
        if upper is not None and (high is None or upper < high):
            high = upper
    return low, high
