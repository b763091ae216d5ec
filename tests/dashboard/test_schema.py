"""Schemathesis against the dashboard's OpenAPI document: no 5xx on any generated input
(every operation, the redrive action included, with positive and negative data)."""

from __future__ import annotations

from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

EXAMPLES = 40


def test_no_server_error_on_generated_input(actions_app: Any) -> None:
    schema = schemathesis.openapi.from_asgi("/api/openapi.json", actions_app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 6  # five reads and the redrive action
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        def check(case: Any) -> None:
            case.call_and_validate(checks=[not_a_server_error])

        check()
