"""Keep secrets out of the error text this adapter produces."""

from __future__ import annotations

import re

_SECRET = re.compile(
    r"(?i)\b(AccountKey|SharedAccessKey|SharedAccessSignature|sig|Password)=([^;&\s\"']+)"
)


def redact(text: str) -> str:
    """``text`` with account keys, SAS signatures and shared access keys replaced by ``***``."""
    return _SECRET.sub(lambda m: f"{m.group(1)}=***", text)
