"""Schemathesis against the dashboard's served OpenAPI document, every operation (the actions
included), with and without the token: no 5xx, every status code, content type, header and body
as documented, invalid data rejected, missing required parts rejected, undocumented methods 405,
authentication enforced, and no state change without credentials.

Two ways: in process (Hypothesis strategies over the ASGI app: the status of every call is seen)
and ``schemathesis run`` against the served dashboard (every phase: examples, coverage of each
parameter's boundaries and missing parts, fuzzing). ``CW_SCHEMA_EXAMPLES`` raises the number
of examples per operation (default 15 in process, 40 in the run)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis.checks import max_response_time  # noqa: E402
from schemathesis.specs.openapi.checks import positive_data_acceptance  # noqa: E402

from . import seed  # noqa: E402
from .conftest import TOKEN  # noqa: E402

EXAMPLES = int(os.environ.get("CW_SCHEMA_EXAMPLES", "15"))
#: Not run: a schema cannot say which job names, windows and message ids exist, so valid-looking
#: ones answer the documented 404 / 400; and no wall-clock asserts.
EXCLUDED = [positive_data_acceptance, max_response_time]


def _dump(path: Path) -> list[str]:
    """Every row of the SQLite state (store and queues), as SQL."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return list(db.iterdump())


def _checker(operation: Any, mode: Any, headers: Any, seen: set[int]) -> Any:
    """A Hypothesis test calling ``operation`` with generated input, recording each status."""

    @given(case=operation.as_strategy(generation_mode=mode, headers=headers))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    def check(case: Any) -> None:
        response = case.call()
        seen.add(response.status_code)
        case.validate_response(response, excluded_checks=EXCLUDED)

    return check


@pytest.mark.parametrize("mode", list(schemathesis.GenerationMode), ids=str)
@pytest.mark.parametrize("token", [True, False], ids=["token", "no-token"])
def test_the_api_keeps_its_document(
    actions_app: Any, provider: Any, tmp_path: Path, mode: Any, token: bool
) -> None:
    schema = schemathesis.openapi.from_asgi("/api/openapi.json", actions_app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 10  # five reads; redrive, resolve, rerun, pause, resume
    headers = {"Authorization": f"Bearer {TOKEN}"} if token else None
    before = _dump(tmp_path / "state.db")
    statuses: dict[str, set[int]] = {}
    tested = 0
    for operation in operations:
        check = _checker(operation, mode, headers, statuses.setdefault(operation.label, set()))
        try:
            check()
            tested += 1
        except Unsatisfiable:
            # an operation whose only inputs are free strings has no invalid input to generate
            assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
    assert tested >= 3, f"only {tested} operation(s) had input to generate"
    if not token:
        actions = {k: v for k, v in statuses.items() if k.startswith("POST") and v}
        assert len(actions) == 5, statuses
        assert all(codes == {401} for codes in actions.values()), actions
        assert _dump(tmp_path / "state.db") == before, "a call without the token changed the state"


def _config(tmp_path: Path, provider: Any) -> Path:
    """A schemathesis config that draws half of the job names, windows and message ids from
    those that exist, so the run reaches past the 404s."""
    letters = [m.message_id for m in provider.queue().dlq_peek(10)]
    dictionaries = {
        "jobs": [job.name for job in seed.jobs()],
        "windows": ["2026-01-20T12:00Z", "2026-01-20T11:00Z", "2026-01-19T17:00Z"],
        "letters": letters,
    }
    lines = []
    for name, values in dictionaries.items():
        lines += [f"[dictionaries.{name}]", f"values = {json.dumps(values)}", ""]
    lines.append("[parameters]")
    for key, name in [
        ("path.job", "jobs"),
        ("path.window", "windows"),
        ("path.message_id", "letters"),
        ("body.job", "jobs"),
        ("body.window", "windows"),
    ]:
        lines.append(f'"{key}" = {{ dictionary = "{name}", probability = 0.5 }}')
    path = tmp_path / "schemathesis.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("token", [True, False], ids=["token", "no-token"])
def test_schemathesis_run_every_phase(
    server: str, provider: Any, tmp_path: Path, token: bool
) -> None:
    examples = int(os.environ.get("CW_SCHEMA_EXAMPLES", "40"))
    config = _config(tmp_path, provider)
    before = _dump(tmp_path / "state.db")
    auth = ["-H", f"Authorization: Bearer {TOKEN}"] if token else []
    result = subprocess.run(
        [
            sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "--no-color",
            "run", f"{server}/api/openapi.json", "--checks", "all",
            "--exclude-checks", "positive_data_acceptance", "--max-examples", str(examples),
            "--generation-database", "none", *auth,
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    assert "10 selected / 10 total" in report and "Coverage" in report, report
    if not token:
        assert _dump(tmp_path / "state.db") == before, "a call without the token changed the state"
