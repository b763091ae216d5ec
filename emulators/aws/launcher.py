"""A moto server (``moto[server]``) in its own process group on a free 127.0.0.1 port, with
DynamoDB calls serialised as the service serialises transactions (see :mod:`.server`).

moto keeps every service (DynamoDB, SQS, EventBridge Scheduler, Lambda, IAM, CloudWatch, SNS,
Logs) in memory behind one endpoint. Measured here (DESIGN §7): conditional writes, transactions
with positional cancellation reasons, SQS redrive and visibility work; TTL is stored, not
enforced; schedules never fire and Lambda invoke needs Docker (see :mod:`.driver` and
:mod:`.event_source` for what plays those parts).
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from typing import Any

from cronwarden.emulators._process import LOOPBACK, ManagedProcess, free_port, http_ok

#: dummy credentials moto accepts; they open nothing anywhere else
ACCESS_KEY = "testing"
SECRET_KEY = "testing"  # noqa: S105 - moto's placeholder, not a secret
REGION = "us-east-1"


@dataclass
class MotoServer:
    """moto's server (through :mod:`.server`) on ``port`` (default: a free one)."""

    port: int | None = None
    region: str = REGION
    _process: ManagedProcess | None = field(default=None, init=False, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self, *, deadline: float = 60.0) -> MotoServer:
        if self.port is None:
            self.port = free_port()
        log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - the process writes it
            prefix="cronwarden-moto-", suffix=".log", delete=False
        )
        log.close()
        self._process = ManagedProcess(
            "moto",
            [
                sys.executable,
                "-m",
                "cronwarden.emulators.aws.server",
                "-H",
                LOOPBACK,
                "-p",
                str(self.port),
            ],
            log.name,
        ).start()
        self._process.wait_ready(
            lambda: http_ok(f"{self.endpoint}/moto-api/data.json", expect=200), deadline=deadline
        )
        return self

    def alive(self) -> bool:
        return self._process is not None and self._process.alive()

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError("moto was not started")
        return self._process.pid

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop(grace=5.0)
            self._process = None

    def reset(self) -> None:
        """Wipe every service's state (``POST /moto-api/reset``)."""
        import urllib.request

        url = f"{self.endpoint}/moto-api/reset"
        request = urllib.request.Request(url, method="POST")  # noqa: S310 - loopback
        with urllib.request.urlopen(request, timeout=10):  # noqa: S310 - loopback
            pass

    def env(self) -> dict[str, str]:
        """What a process needs to talk to this server (dummy credentials included)."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            "CRONWARDEN_AWS_ENDPOINT_URL": self.endpoint,
        }

    def settings(self, **changes: Any) -> Any:
        """:class:`~cronwarden.adapters.aws.settings.AwsSettings` for this server with fresh
        names (a table and queues no other caller uses), creating what is missing."""
        from cronwarden.adapters.aws.settings import AwsSettings

        suffix = uuid.uuid4().hex[:10]
        values: dict[str, Any] = {
            "region": self.region,
            "endpoint_url": self.endpoint,
            "table": f"cw-{suffix}",
            "queue": f"cw-runs-{suffix}",
            "create_missing": True,
            "max_attempts": 2,
        }
        values.update(changes)
        return AwsSettings(**values)

    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )

    def __enter__(self) -> MotoServer:
        return self.start() if not self.alive() else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["ACCESS_KEY", "REGION", "SECRET_KEY", "MotoServer"]
