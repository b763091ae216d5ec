"""Schemathesis against the dashboard's OpenAPI document: no 5xx on any generated input
(every operation, the redrive action included, with and without the token; valid and invalid
data)."""

from __future__ import annotations

from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

from .conftest import TOKEN  # noqa: E402

EXAMPLES = 15


@pytest.mark.parametrize("mode", list(schemathesis.GenerationMode), ids=str)
@pytest.mark.parametrize("token", [True, False], ids=["token", "no-token"])
def test_no_server_error_on_generated_input(actions_app: Any, mode: Any, token: bool) -> None:
    schema = schemathesis.openapi.from_asgi("/api/openapi.json", actions_app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 10  # five reads; redrive, resolve, rerun, pause, resume
    headers = {"Authorization": f"Bearer {TOKEN}"} if token else None
    tested = 0
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode, headers=headers))
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        def check(case: Any) -> None:
            case.call_and_validate(checks=[not_a_server_error])

        try:
            check()
            tested += 1
        except Unsatisfiable:
            # an operation whose only inputs are free strings has no invalid input to generate
            assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
    assert tested >= 3, f"only {tested} operation(s) had input to generate"
