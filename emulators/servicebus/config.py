"""Queue configuration in the shape of Microsoft's Service Bus emulator ``Config.json``.

The official emulator reads::

    {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns",
        "Queues": [{"Name": "queue.1", "Properties": {
            "MaxDeliveryCount": 3, "LockDuration": "PT1M",
            "DefaultMessageTimeToLive": "PT1H", "DeadLetteringOnMessageExpiration": false,
            "RequiresDuplicateDetection": false, "DuplicateDetectionHistoryTimeWindow": "PT20S",
            "RequiresSession": false, "ForwardTo": "", "ForwardDeadLetteredMessagesTo": ""}}],
        "Topics": [...]}], "Logging": {"Type": "File"}}}

We accept the same file. Contract: every queue property we read is validated and turned into a
:class:`QueueConfig`; properties we do not implement (sessions, auto-forwarding, topics) are
rejected when they would change behaviour (``RequiresSession: true``, a non-empty ``ForwardTo``)
and ignored when they would not (``Topics`` is skipped with a warning returned to the caller).
Durations are ISO 8601 (``PT1M``, ``PT0.5S``, ``P14D``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

#: Service Bus limits and defaults (standard tier), in seconds where a duration.
MAX_LOCK_DURATION = 300.0
DEFAULT_LOCK_DURATION = 60.0
DEFAULT_MAX_DELIVERY_COUNT = 10
DEFAULT_DUPLICATE_WINDOW = 600.0
#: ``TimeSpan.MaxValue``: "never expires" in Service Bus terms.
INFINITE_TTL: float | None = None
DEFAULT_NAMESPACE = "sbemulatorns"

_QUEUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-/]{0,259}$")
_DURATION = re.compile(
    r"^P(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)
#: ``TimeSpan`` text as .NET writes it, e.g. ``00:01:00`` or ``1.00:00:00`` (also accepted).
_TIMESPAN = re.compile(r"^(?:(?P<days>\d+)\.)?(?P<h>\d{1,2}):(?P<m>\d{2}):(?P<s>\d{2}(?:\.\d+)?)$")


class ConfigError(ValueError):
    """The configuration file is malformed or asks for something this emulator does not do."""


def parse_duration(text: str) -> float:
    """Seconds in an ISO 8601 duration (``PT1M`` → 60.0) or a .NET TimeSpan (``00:01:00``).

    Years and months are refused: their length is not fixed.
    """
    value = text.strip().upper()
    match = _DURATION.match(value)
    if match and value not in ("P", "PT"):
        parts = {k: float(v) for k, v in match.groupdict().items() if v is not None}
        return (
            parts.get("days", 0.0) * 86400
            + parts.get("hours", 0.0) * 3600
            + parts.get("minutes", 0.0) * 60
            + parts.get("seconds", 0.0)
        )
    match = _TIMESPAN.match(value)
    if match:
        days = float(match.group("days") or 0)
        return (
            days * 86400
            + float(match.group("h")) * 3600
            + float(match.group("m")) * 60
            + float(match.group("s"))
        )
    raise ConfigError(f"not an ISO 8601 duration (e.g. PT1M): {text!r}")


def format_duration(seconds: float) -> str:
    """``PT<seconds>S`` with no exponent (``format_duration(0.5) == "PT0.5S"``)."""
    text = f"{seconds:.6f}".rstrip("0").rstrip(".")
    return f"PT{text}S"


@dataclass(frozen=True)
class QueueConfig:
    """One queue's behaviour. Durations in seconds; ``default_ttl`` None means never expires."""

    name: str
    max_delivery_count: int = DEFAULT_MAX_DELIVERY_COUNT
    lock_duration: float = DEFAULT_LOCK_DURATION
    default_ttl: float | None = INFINITE_TTL
    dead_lettering_on_expiration: bool = False
    requires_duplicate_detection: bool = False
    duplicate_detection_window: float = DEFAULT_DUPLICATE_WINDOW

    def __post_init__(self) -> None:
        if not _QUEUE_NAME.match(self.name) or self.name.startswith("$"):
            raise ConfigError(f"invalid queue name: {self.name!r}")
        if self.max_delivery_count < 1:
            raise ConfigError(f"{self.name}: MaxDeliveryCount must be >= 1")
        if not 0 < self.lock_duration <= MAX_LOCK_DURATION:
            raise ConfigError(f"{self.name}: LockDuration must be within (0, PT5M]")
        if self.default_ttl is not None and self.default_ttl <= 0:
            raise ConfigError(f"{self.name}: DefaultMessageTimeToLive must be positive")
        if self.duplicate_detection_window <= 0:
            raise ConfigError(f"{self.name}: DuplicateDetectionHistoryTimeWindow must be positive")

    @classmethod
    def from_properties(cls, name: str, props: Mapping[str, Any]) -> QueueConfig:
        """Build from a ``Properties`` object of Config.json (keys as Microsoft spells them)."""
        known = {
            "MaxDeliveryCount",
            "LockDuration",
            "DefaultMessageTimeToLive",
            "DeadLetteringOnMessageExpiration",
            "RequiresDuplicateDetection",
            "DuplicateDetectionHistoryTimeWindow",
            "RequiresSession",
            "ForwardTo",
            "ForwardDeadLetteredMessagesTo",
        }
        unknown = set(props) - known
        if unknown:
            raise ConfigError(f"{name}: unknown queue properties {sorted(unknown)}")
        if props.get("RequiresSession"):
            raise ConfigError(f"{name}: sessions (RequiresSession) are not supported")
        if props.get("ForwardTo") or props.get("ForwardDeadLetteredMessagesTo"):
            raise ConfigError(f"{name}: auto-forwarding is not supported")
        kwargs: dict[str, Any] = {"name": name}
        if "MaxDeliveryCount" in props:
            kwargs["max_delivery_count"] = _int(name, "MaxDeliveryCount", props["MaxDeliveryCount"])
        if "LockDuration" in props:
            kwargs["lock_duration"] = parse_duration(str(props["LockDuration"]))
        if "DefaultMessageTimeToLive" in props:
            ttl = parse_duration(str(props["DefaultMessageTimeToLive"]))
            # The portal's "never" (TimeSpan.MaxValue, ~10675199 days) is kept as no expiry.
            kwargs["default_ttl"] = None if ttl >= 10_000_000 * 86400 else ttl
        if "DeadLetteringOnMessageExpiration" in props:
            kwargs["dead_lettering_on_expiration"] = _bool(
                name, "DeadLetteringOnMessageExpiration", props["DeadLetteringOnMessageExpiration"]
            )
        if "RequiresDuplicateDetection" in props:
            kwargs["requires_duplicate_detection"] = _bool(
                name, "RequiresDuplicateDetection", props["RequiresDuplicateDetection"]
            )
        if "DuplicateDetectionHistoryTimeWindow" in props:
            kwargs["duplicate_detection_window"] = parse_duration(
                str(props["DuplicateDetectionHistoryTimeWindow"])
            )
        return cls(**kwargs)


def _int(queue: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{queue}: {key} must be an integer, got {value!r}")
    return value


def _bool(queue: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{queue}: {key} must be true or false, got {value!r}")
    return value


@dataclass(frozen=True)
class EmulatorConfig:
    """A namespace and its queues (keyed by lower-cased name: Service Bus names are
    case-insensitive). ``warnings`` lists what was ignored while loading."""

    namespace: str = DEFAULT_NAMESPACE
    queues: Mapping[str, QueueConfig] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def queue(self, name: str) -> QueueConfig | None:
        return self.queues.get(name.lower())

    def with_queue(self, queue: QueueConfig) -> EmulatorConfig:
        queues = dict(self.queues)
        queues[queue.name.lower()] = queue
        return replace(self, queues=queues)


def default_config() -> EmulatorConfig:
    """What runs without a file: a few queues with production defaults, one per common need.

    ``queue.1``/``queue.2`` mirror the official emulator's sample; ``cronwarden`` is the queue
    the Azure adapter used by default before; ``cronwarden-runs`` is its default now (with
    duplicate detection, as deployed); ``dlq-on-expiry`` dead-letters expired messages;
    ``dedup`` has duplicate detection on.
    """
    queues = [
        QueueConfig("queue.1"),
        QueueConfig("queue.2"),
        QueueConfig("cronwarden"),
        # the Azure adapter's default queue, with duplicate detection like the deployed one
        QueueConfig("cronwarden-runs", requires_duplicate_detection=True),
        QueueConfig("dlq-on-expiry", dead_lettering_on_expiration=True),
        QueueConfig("dedup", requires_duplicate_detection=True),
    ]
    return EmulatorConfig(queues={q.name.lower(): q for q in queues})


def parse_config(document: Mapping[str, Any]) -> EmulatorConfig:
    """Validate a Config.json document (already parsed from JSON)."""
    user = document.get("UserConfig")
    if not isinstance(user, Mapping):
        raise ConfigError('missing "UserConfig" object')
    namespaces = user.get("Namespaces")
    if not isinstance(namespaces, list) or len(namespaces) != 1:
        raise ConfigError('"UserConfig.Namespaces" must list exactly one namespace')
    ns = namespaces[0]
    if not isinstance(ns, Mapping):
        raise ConfigError("a namespace must be an object")
    warnings: list[str] = []
    if ns.get("Topics"):
        warnings.append("Topics are not supported and were ignored")
    queues: dict[str, QueueConfig] = {}
    for entry in ns.get("Queues") or []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("Name"), str):
            raise ConfigError('each queue needs a string "Name"')
        props = entry.get("Properties") or {}
        if not isinstance(props, Mapping):
            raise ConfigError(f'{entry["Name"]}: "Properties" must be an object')
        queue = QueueConfig.from_properties(entry["Name"], props)
        if queue.name.lower() in queues:
            raise ConfigError(f"duplicate queue name: {queue.name}")
        queues[queue.name.lower()] = queue
    name = ns.get("Name", DEFAULT_NAMESPACE)
    if not isinstance(name, str) or not name:
        raise ConfigError("the namespace needs a non-empty Name")
    return EmulatorConfig(namespace=name, queues=queues, warnings=tuple(warnings))


def load_config(path: str | Path | None) -> EmulatorConfig:
    """Read Config.json from ``path``, or :func:`default_config` when ``path`` is None."""
    if path is None:
        return default_config()
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON: {exc}") from exc
    if not isinstance(document, Mapping):
        raise ConfigError(f"{path}: the top level must be an object")
    return parse_config(document)


def queue_to_properties(queue: QueueConfig) -> dict[str, Any]:
    """The Config.json ``Properties`` object for ``queue`` (durations as ``PT…S``)."""
    props: dict[str, Any] = {
        "MaxDeliveryCount": queue.max_delivery_count,
        "LockDuration": format_duration(queue.lock_duration),
        "DeadLetteringOnMessageExpiration": queue.dead_lettering_on_expiration,
        "RequiresDuplicateDetection": queue.requires_duplicate_detection,
        "DuplicateDetectionHistoryTimeWindow": format_duration(queue.duplicate_detection_window),
    }
    if queue.default_ttl is not None:
        props["DefaultMessageTimeToLive"] = format_duration(queue.default_ttl)
    return props


def config_to_document(config: EmulatorConfig) -> dict[str, Any]:
    """The Config.json document for ``config`` (round-trips through :func:`parse_config`)."""
    return {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": config.namespace,
                    "Queues": [
                        {"Name": q.name, "Properties": queue_to_properties(q)}
                        for q in config.queues.values()
                    ],
                }
            ],
            "Logging": {"Type": "Console"},
        }
    }
