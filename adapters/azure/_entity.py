"""Record data ↔ Table entity properties, exactly, within Azure's limits.

One property per top-level field, so a :class:`~cronwarden.model.ports.Merge` of plain fields is a
server-side merge (no read). Values are typed so that every JSON value round-trips exactly:

=================================  ============================================
data value                         property
=================================  ============================================
``str``                            ``Edm.String``
``bool``                           ``Edm.Boolean``
``int`` in [-2**63, 2**63)         ``Edm.Int64`` (always; Azurite reads it back as
                                   ``EntityProperty``, unwrapped here)
``float`` (finite)                 ``Edm.Double``
timezone-aware ``datetime``        ``Edm.DateTime`` (read back as an aware UTC
                                   ``datetime``; naive datetimes are refused)
``None``, ``list``, ``dict``,      ``Edm.Binary`` holding compact UTF-8 JSON
bigger ``int``, NaN / ±inf
=================================  ============================================

The property *type* says how to read a value back, so a field may change type between writes
and no extra marker properties are needed (all 252 properties stay available to data).

Field names become property names: names that are C# identifiers made of ASCII letters, digits
and ``_`` (starting with a letter) are kept; any other name (and reserved ones such as
``Timestamp``) is written as ``_`` + the name with every non-alphanumeric character replaced
by ``_`` and its UTF-8 bytes in hex (``last-ok`` → ``_last_2dok``).

Limits checked before sending (Azurite accepts more than Azure): property name ≤ 255
characters, 252 properties, string ≤ 64 KiB (UTF-16) and binary ≤ 64 KiB per property,
entity ≤ 1 MiB by Azure's published size formula.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .errors import TableLimitError

MAX_PROPERTIES = 252  #: custom properties per entity (255 minus PartitionKey/RowKey/Timestamp)
MAX_PROPERTY_BYTES = 64 * 1024
MAX_ENTITY_BYTES = 1024 * 1024
MAX_NAME_CHARS = 255
SYSTEM_PROPERTIES = frozenset({"PartitionKey", "RowKey", "Timestamp"})
_PLAIN_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_RESERVED = ("partitionkey", "rowkey", "timestamp", "etag")
_INT64 = (-(2**63), 2**63 - 1)
_EPOCH_MIN = datetime(1601, 1, 1, tzinfo=UTC)  #: Edm.DateTime's lower bound on Azure


def encode_name(name: str) -> str:
    """Property name for data field ``name`` (reversible, see the module doc)."""
    lowered = name.lower()
    if _PLAIN_NAME.match(name) and lowered not in _RESERVED and not lowered.startswith("odata"):
        encoded = name
    else:
        parts = ["_"]
        for char in name:
            if char.isascii() and char.isalnum():
                parts.append(char)
            else:
                try:
                    raw = char.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise TableLimitError(f"field name {name!r} is not valid Unicode") from exc
                parts.extend(f"_{byte:02x}" for byte in raw)
        encoded = "".join(parts)
    if len(encoded) > MAX_NAME_CHARS:
        raise TableLimitError(
            f"field name {name[:60]!r}… becomes a {len(encoded)}-character property name; "
            f"Azure Table Storage allows {MAX_NAME_CHARS}"
        )
    return encoded


def decode_name(prop: str) -> str:
    """Data field name of property ``prop``."""
    if not prop.startswith("_"):
        return prop
    raw = bytearray()
    i = 1
    while i < len(prop):
        if prop[i] == "_":
            raw.append(int(prop[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.extend(prop[i].encode("ascii"))
            i += 1
    return raw.decode("utf-8")


def _json_bytes(name: str, value: Any) -> bytes:
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"field {name!r}: record data must be JSON values (str, int, float, bool, None, "
            f"list, dict); store datetimes as ISO text ({exc})"
        ) from exc
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 for it
        raise TableLimitError(f"field {name!r} holds text that is not valid Unicode") from exc


def _check_property_size(name: str, size: int, kind: str) -> None:
    if size > MAX_PROPERTY_BYTES:
        raise TableLimitError(
            f"field {name!r} is {size} bytes as {kind}; Azure Table Storage allows "
            f"{MAX_PROPERTY_BYTES} (64 KiB) per property: store less, or split the value "
            "across several fields"
        )


def encode_value(name: str, value: Any) -> tuple[Any, int]:
    """``(SDK value, Azure size in bytes)`` for one field. The SDK is imported lazily."""
    from azure.data.tables import EdmType, EntityProperty

    if isinstance(value, str):
        try:
            size = len(value.encode("utf-16-le"))
        except UnicodeEncodeError as exc:
            raise TableLimitError(f"field {name!r} is not valid Unicode text") from exc
        _check_property_size(name, size, "Edm.String (UTF-16)")
        return value, 4 + size
    if isinstance(value, bool):
        return value, 1
    if isinstance(value, int) and _INT64[0] <= value <= _INT64[1]:
        return EntityProperty(value, EdmType.INT64), 8
    if isinstance(value, float) and math.isfinite(value):
        return EntityProperty(value, EdmType.DOUBLE), 8
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise TypeError(f"field {name!r}: naive datetime {value!r}; give it a timezone")
        utc = value.astimezone(UTC)
        if utc < _EPOCH_MIN:
            raise TableLimitError(f"field {name!r}: Azure stores datetimes from 1601-01-01 on")
        return utc, 8
    if value is None or isinstance(value, list | tuple | dict | int | float):
        raw = _json_bytes(name, value)
        _check_property_size(name, len(raw), "JSON (Edm.Binary)")
        return EntityProperty(raw, EdmType.BINARY), 4 + len(raw)
    raise TypeError(
        f"field {name!r}: {type(value).__name__} is not a JSON value; record data must be str, "
        "int, float, bool, None, list or dict"
    )


def encode_fields(fields: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """``(properties, Azure size of those properties)`` for data ``fields``."""
    properties: dict[str, Any] = {}
    total = 0
    for name, value in fields.items():
        if not isinstance(name, str):
            raise TypeError(f"field names must be str, got {name!r}")
        prop = encode_name(name)
        sdk_value, size = encode_value(name, value)
        properties[prop] = sdk_value
        total += 8 + 2 * len(prop) + size
    return properties, total


def build_entity(partition: str, row: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """The complete entity for ``data``; raises :class:`TableLimitError` past Azure's limits."""
    properties, size = encode_fields(data)
    check_entity(partition, row, len(properties), size)
    entity: dict[str, Any] = {"PartitionKey": partition, "RowKey": row}
    entity.update(properties)
    return entity


def check_entity(partition: str, row: str, count: int, properties_size: int) -> None:
    """Check the property count and the total entity size (Azure's formula)."""
    if count > MAX_PROPERTIES:
        raise TableLimitError(
            f"record {row!r} of {partition!r} has {count} fields; Azure Table Storage allows "
            f"{MAX_PROPERTIES} properties per entity"
        )
    size = 4 + 2 * (len(partition) + len(row)) + properties_size
    if size > MAX_ENTITY_BYTES:
        raise TableLimitError(
            f"record {row!r} of {partition!r} is {size} bytes by Azure's size formula; Azure "
            f"Table Storage allows {MAX_ENTITY_BYTES} (1 MiB) per entity"
        )


def decode_value(value: Any) -> Any:
    """Data value of one property as the SDK returned it."""
    if isinstance(value, str | bool | float) or type(value) is int:  # as they are, no SDK type
        return value
    if isinstance(value, _entity_property()):
        value = value.value
    if isinstance(value, bytes | bytearray):
        return json.loads(bytes(value).decode("utf-8"))
    if isinstance(value, datetime):  # the SDK's subclass → a plain aware UTC datetime
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return datetime.fromtimestamp(0, UTC) + (moment - datetime.fromtimestamp(0, UTC))
    return value


@functools.cache
def _entity_property() -> type[Any]:
    """The SDK's ``EntityProperty`` class, imported on first use (not at import time, and
    not once per property of a 10,000-entity query)."""
    from azure.data.tables import EntityProperty

    return EntityProperty


def decode_entity(entity: Mapping[str, Any]) -> dict[str, Any]:
    """The record data held by ``entity`` (system properties left out)."""
    return {
        decode_name(prop): decode_value(value)
        for prop, value in entity.items()
        if prop not in SYSTEM_PROPERTIES
    }
