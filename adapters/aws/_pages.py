"""The compact DynamoDB encoding of a ledger page's ``keys`` and ``fps`` (the bulk of a page).

DynamoDB bills a transaction's write by the item's size (2 units per KB, rounded up), and a
page of 100 items as JSON lists is ~4 KB. Both fields are stored as binary attributes instead,
losslessly (a read returns exactly the lists written):

* ``keys``: format byte ``1``, then zlib of the keys' UTF-8 joined by NUL (which no item key
  holds: :func:`cronwarden.run.ledger.valid_key` refuses it);
* ``fps``: format byte ``1``, then zlib of one entry per item: ``0`` when the fingerprint is
  that of the key's text, ``1`` when it is that of the key read as an integer (an item that is
  its own key, as with the default ``key=str``: nothing else is stored, the reader recomputes
  it), else ``2`` and the fingerprint's 16 bytes.

Anything else (a fingerprint that is not 32 lowercase hex digits, a key holding NUL, lists of
different lengths) keeps the generic JSON encoding. A 100-item page of items keyed by
themselves is then well under 1 KB, one of 100 arbitrary items about 2.2 KB (was ~4.3 KB).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

from cronwarden.model.ports import ITEM, Key
from cronwarden.model.records import PAGE_TAG
from cronwarden.model.runs import fingerprint

KEYS, FPS = "keys", "fps"
_FORMAT = b"\x01"
_TEXT, _INT, _RAW = 0, 1, 2
_HEX = frozenset("0123456789abcdef")


def is_page_key(key: Key) -> bool:
    return key.kind == ITEM and PAGE_TAG in key.id


def encode_page_fields(key: Key, fields: Mapping[str, Any]) -> dict[str, dict[str, bytes]]:
    """The binary attributes (by field name) of a page's ``keys`` and ``fps`` in ``fields``;
    empty when ``key`` is not a page's or the fields do not fit the compact form."""
    keys, fps = fields.get(KEYS), fields.get(FPS)
    if not (is_page_key(key) and isinstance(keys, list) and isinstance(fps, list)):
        return {}
    if len(keys) != len(fps) or not all(type(k) is str and "\x00" not in k for k in keys):
        return {}
    entries = bytearray()
    for item_key, fp in zip(keys, fps, strict=True):
        if type(fp) is not str or len(fp) != 32 or not _HEX.issuperset(fp):
            return {}
        if _int_text(item_key) and fp == fingerprint(int(item_key)):
            entries.append(_INT)  # the usual case of ints keyed by str(): one digest
        elif fp == fingerprint(item_key):
            entries.append(_TEXT)
        else:
            entries.append(_RAW)
            entries += bytes.fromhex(fp)
    joined = "\x00".join(keys).encode("utf-8", "surrogatepass")
    return {
        KEYS: {"B": _FORMAT + zlib.compress(joined)},
        FPS: {"B": _FORMAT + zlib.compress(bytes(entries))},
    }


def decode_page_fields(keys_blob: bytes, fps_blob: bytes | None) -> dict[str, list[str]]:
    """``keys`` (and ``fps``, when given) as :func:`encode_page_fields` wrote them."""
    if keys_blob[:1] != _FORMAT:
        raise ValueError("ledger page: unknown encoding of its keys")
    text = zlib.decompress(keys_blob[1:]).decode("utf-8", "surrogatepass")
    keys = text.split("\x00") if text or _one_empty(fps_blob) else []
    if fps_blob is None:
        return {KEYS: keys}
    if fps_blob[:1] != _FORMAT:
        raise ValueError("ledger page: unknown encoding of its fingerprints")
    entries = zlib.decompress(fps_blob[1:])
    fps: list[str] = []
    at = 0
    for item_key in keys:
        tag = entries[at]
        at += 1
        if tag == _TEXT:
            fps.append(fingerprint(item_key))
        elif tag == _INT:
            fps.append(fingerprint(int(item_key)))
        else:
            fps.append(entries[at : at + 16].hex())
            at += 16
    if at != len(entries):
        raise ValueError("ledger page: its fingerprints do not match its keys")
    return {KEYS: keys, FPS: fps}


def _one_empty(fps_blob: bytes | None) -> bool:
    """An empty joined text is one empty key or none: the fingerprints tell (empty keys are
    refused by the ledger; this keeps the decoding exact anyway)."""
    return fps_blob is not None and len(zlib.decompress(fps_blob[1:])) > 0


def _int_text(text: str) -> bool:
    """Whether ``text`` is the canonical text of an int (``int(text)`` prints back as it)."""
    digits = text[1:] if text.startswith("-") else text
    return digits.isascii() and digits.isdigit() and str(int(text)) == text
