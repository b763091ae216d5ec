"""``cronwarden emulators aws``: a moto server in the foreground with ready-to-paste exports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import boto3
import pytest

from tests.support.procs import ROOT

pytestmark = [pytest.mark.aws]


def test_emulators_aws_prints_exports_that_work() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "from cronwarden.cli import main; main()", "emulators", "aws"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        exports: dict[str, str] = {}
        end = time.monotonic() + 60
        assert proc.stdout is not None
        while "CRONWARDEN_AWS_CREATE_MISSING" not in exports and time.monotonic() < end:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("export "):
                name, _, value = line[len("export ") :].strip().partition("=")
                exports[name] = value
        assert exports["CRONWARDEN_PROVIDER"] == "aws"
        endpoint = exports["CRONWARDEN_AWS_ENDPOINT_URL"]
        assert endpoint.startswith("http://127.0.0.1:")
        sqs = boto3.client(
            "sqs",
            endpoint_url=endpoint,
            region_name=exports["AWS_DEFAULT_REGION"],
            aws_access_key_id=exports["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=exports["AWS_SECRET_ACCESS_KEY"],
        )
        assert "QueueUrls" not in sqs.list_queues() or sqs.list_queues()["QueueUrls"] == []
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
