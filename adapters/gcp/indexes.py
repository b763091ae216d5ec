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
  index writes on every commit;
* an ascending single-field index on ``due_at`` and ``watch_due`` of the status collection
  (top-level copies of the status record's due fields): ``query_due`` is one range query on
  each (Firestore indexes single fields by default; declared so that the watcher's query does
  not depend on that default).
"""

from __future__ import annotations

import json
from typing import Any

from cronwarden.model.ports import DUE_FIELDS, ITEM, KINDS, RUN, STATUS

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
        if kind == STATUS:
            overrides += [
                {
                    "collectionGroup": group,
                    "fieldPath": name,
                    "indexes": [{"order": "ASCENDING", "queryScope": "COLLECTION"}],
                }
                for name in DUE_FIELDS
            ]
        if kind in TTL_KINDS:
            overrides.append(
                {"collectionGroup": group, "fieldPath": EXPIRY_FIELD, "ttl": True, "indexes": []}
            )
    return {"indexes": indexes, "fieldOverrides": overrides}


def render(prefix: str = DEFAULT_PREFIX) -> str:
    """:func:`index_config` as the JSON text of ``firestore.indexes.json``."""
    return json.dumps(index_config(prefix), indent=2) + "\n"
