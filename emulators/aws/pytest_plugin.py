"""pytest fixtures for local AWS.

Enable with ``pytest_plugins = ["cronwarden.emulators.aws.pytest_plugin"]``.

* ``moto_server`` (session): one moto server for the whole run; its dummy credentials are put
  into the environment for the session (boto3's default chain finds them). A missing
  ``moto[server]`` is an error naming the extra, never a skip.
* ``aws_settings`` (function): ``AwsSettings`` on that server with a fresh table and queues.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from .launcher import MotoServer


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    try:
        import moto.server  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the test extras install it
        raise RuntimeError(
            "local AWS needs moto[server]: pip install 'cronwarden[aws,dev]'"
        ) from exc
    server = MotoServer().start()
    saved = {k: os.environ.get(k) for k in server.env()}
    os.environ.update({k: v for k, v in server.env().items() if k.startswith("AWS_")})
    try:
        yield server
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()


@pytest.fixture
def aws_settings(moto_server: MotoServer) -> Any:
    return moto_server.settings()
