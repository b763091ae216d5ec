"""The queue probe ``cronwarden doctor`` sends: a message no job runs.

A probe carries the attribute :data:`PROBE_ATTRIBUTE` (its token) and a body that is not a run
request. A worker that receives one acknowledges it and records that it saw it in the reserved
status record ``_doctor`` (job names never start with ``_``), so doctor learns that the real
worker identity received, settled and wrote; it never reaches the engine, never dead-letters.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ..model.ports import STATUS, Delivery, Key, Merge, Store
from ..model.records import iso

PROBE_ATTRIBUTE = "cw-probe"
DOCTOR_RECORD = "_doctor"


def doctor_key() -> Key:
    return Key(STATUS, DOCTOR_RECORD)


def probe_body(token: str) -> bytes:
    return json.dumps({"cronwarden_probe": token}).encode()


def probe_token(delivery: Delivery) -> str | None:
    """The probe token of ``delivery``, or None for every other message."""
    token = delivery.attributes.get(PROBE_ATTRIBUTE)
    return token if isinstance(token, str) and token else None


def answer_probe(store: Store, token: str, worker: str, now: datetime) -> None:
    """Record that ``worker`` received probe ``token`` (one blind Merge)."""
    fields: dict[str, Any] = {
        "probe_seen_token": token,
        "probe_seen_at": iso(now),
        "probe_seen_by": worker,
    }
    store.commit([Merge(doctor_key(), fields)])
