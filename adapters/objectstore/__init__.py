"""A store on object storage: one object per job, every commit one conditional write
(``If-None-Match: *`` / ``If-Match``); see :mod:`.store` for the layout and
``docs/object-storage.md``.

* :class:`ObjectStore`: the cloud-neutral store over the :class:`ConditionalObjects` port;
* :class:`S3Objects` (Amazon S3), and the ``s3`` provider (:class:`S3Provider`: S3 + SQS);
* the ``blob`` provider (:class:`BlobProvider`: Azure Blob + Service Bus) and the ``gcs``
  provider (:class:`GcsProvider`: GCS + Pub/Sub).

Importing this package imports no cloud SDK; building a client does.
"""

from __future__ import annotations

from .clouds import BlobProvider, GcsProvider
from .objects import Blob, ConditionalObjects, PreconditionFailed, verify_preconditions
from .provider import S3Provider
from .s3 import S3Objects
from .settings import S3Settings
from .store import ObjectStore

__all__ = [
    "Blob",
    "BlobProvider",
    "ConditionalObjects",
    "GcsProvider",
    "ObjectStore",
    "PreconditionFailed",
    "S3Objects",
    "S3Provider",
    "S3Settings",
    "verify_preconditions",
]
