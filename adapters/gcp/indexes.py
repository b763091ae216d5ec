"""What Firestore needs declared for :class:`~cronwarden.adapters.gcp.store.FirestoreStore`:
composite indexes, TTL policies and index exemptions, in the ``firestore.indexes.json`` format
(Firebase CLI; the deployment renders Terraform ``google_firestore_index`` /
``google_firestore_field`` from the same data). ``deployments/gcp/firestore.indexes.json`` is
:func:`index_config` for the default prefix; a test keeps the two equal.

* composite ``(job ASC, id ASC)`` on every kind's collection: ``query(kind, job, range)``
  (``job ==``, ``id`` range, ``ORDER BY id``) and ``query(kind)`` (``ORDER BY job, id``);
* TTL on ``expire_at`` of ``run`` and ``item`` records, exempt from indexing (a monotonically
  increasing indexed timestamp would hotspot);
* ``d`` (the caller's data) and ``rev`` are never queried: exempt from indexing, which saves
  index writes on every commit.
"""

from __future__ import annotations

import json
from typing import Any

from cronwarden.model.ports import ITEM, KINDS, RUN

from .store import DEFAULT_PREFIX, EXPIRY_FIELD

TTL_KINDS = (RUN, ITEM)


def index_config(prefix: str = DEFAULT_PREFIX) -> dict[str, Any]:
    """The ``firestore.indexes.json`` document for collections named ``<prefix><kind>``."""
    indexes = [
        {
            "collectionGroup": f"{prefix}{kind}",
            "queryScope": "COLLECTION",
            "fields": [
                {"fieldPath": "job", "order": "ASCENDING"},
                {"fieldPath": "id", "order": "ASCENDING"},
            ],
        }
        for kind in KINDS
    ]
    overrides: list[dict[str, Any]] = []
    for kind in KINDS:
        group = f"{prefix}{kind}"
        overrides += [
            {"collectionGroup": group, "fieldPath": "d", "indexes": []},
            {"collectionGroup": group, "fieldPath": "rev", "indexes": []},
        ]
        if kind in TTL_KINDS:
            overrides.append(
                {"collectionGroup": group, "fieldPath": EXPIRY_FIELD, "ttl": True, "indexes": []}
            )
    return {"indexes": indexes, "fieldOverrides": overrides}


def render(prefix: str = DEFAULT_PREFIX) -> str:
    """:func:`index_config` as the JSON text of ``firestore.indexes.json``."""
    return json.dumps(index_config(prefix), indent=2) + "\n"
