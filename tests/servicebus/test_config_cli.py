"""Config.json parsing and the command line (ready line, SIGTERM, loopback guard)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cronwarden.emulators._process import free_port
from cronwarden.emulators.servicebus.cli import commands, servicebus
from cronwarden.emulators.servicebus.config import (
    ConfigError,
    config_to_document,
    default_config,
    load_config,
    parse_config,
    parse_duration,
)

pytestmark = pytest.mark.azure

OFFICIAL_SHAPE = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Queues": [
                    {
                        "Name": "queue.1",
                        "Properties": {
                            "DeadLetteringOnMessageExpiration": False,
                            "DefaultMessageTimeToLive": "PT1H",
                            "DuplicateDetectionHistoryTimeWindow": "PT20S",
                            "ForwardDeadLetteredMessagesTo": "",
                            "ForwardTo": "",
                            "LockDuration": "PT1M",
                            "MaxDeliveryCount": 3,
                            "RequiresDuplicateDetection": False,
                            "RequiresSession": False,
                        },
                    }
                ],
                "Topics": [{"Name": "topic.1", "Properties": {}, "Subscriptions": []}],
            }
        ],
        "Logging": {"Type": "File"},
    }
}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("PT1M", 60), ("PT0.5S", 0.5), ("P14D", 14 * 86400), ("PT1H30M", 5400), ("00:01:00", 60)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "P", "PT", "1 minute", "P1Y"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_duration(text)


def test_official_config_shape() -> None:
    config = parse_config(OFFICIAL_SHAPE)
    queue = config.queue("QUEUE.1")  # names are case-insensitive
    assert queue is not None
    assert (queue.max_delivery_count, queue.lock_duration, queue.default_ttl) == (3, 60, 3600)
    assert queue.duplicate_detection_window == 20
    assert config.warnings == ("Topics are not supported and were ignored",)
    assert parse_config(config_to_document(config)).queues == config.queues


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"RequiresSession": True}, "sessions"),
        ({"ForwardTo": "other"}, "forwarding"),
        ({"LockDuration": "PT6M"}, "LockDuration"),
        ({"MaxDeliveryCount": 0}, "MaxDeliveryCount"),
        ({"Colour": "blue"}, "unknown"),
    ],
)
def test_config_errors(props: dict[str, object], message: str) -> None:
    doc = {
        "UserConfig": {
            "Namespaces": [{"Name": "ns", "Queues": [{"Name": "q", "Properties": props}]}]
        }
    }
    with pytest.raises(ConfigError, match=message):
        parse_config(doc)


def test_default_config_has_queues() -> None:
    assert {"queue.1", "cronwarden"} <= set(default_config().queues)
    assert load_config(None) == default_config()


def test_commands_export() -> None:
    assert commands == [servicebus]
    assert servicebus.name == "servicebus"


def test_non_loopback_is_refused_without_flag() -> None:
    result = CliRunner().invoke(servicebus, ["--host", "0.0.0.0", "--port", "0"])
    assert result.exit_code == 2
    assert "--allow-non-loopback" in result.output


def test_bad_config_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "Config.json"
    path.write_text("{not json")
    result = CliRunner().invoke(servicebus, ["--config", str(path), "--port", "0"])
    assert result.exit_code == 1
    assert "invalid JSON" in result.output


def test_cli_ready_line_and_sigterm(tmp_path: Path) -> None:
    path = tmp_path / "Config.json"
    path.write_text(json.dumps(OFFICIAL_SHAPE))
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cronwarden.emulators.servicebus",
            "--config",
            str(path),
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "ready" in line
        assert (
            f"connection_string=Endpoint=sb://127.0.0.1:{port};SharedAccessKeyName="
            "RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true"
        ) in line
        assert "queues=queue.1" in line
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert time.monotonic() - started < 5
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_registered_in_the_emulators_group() -> None:
    from cronwarden.emulators.cli import emulators

    result = CliRunner().invoke(emulators, ["servicebus", "--help"])
    assert result.exit_code == 0, result.output
    assert "--allow-non-loopback" in result.output
