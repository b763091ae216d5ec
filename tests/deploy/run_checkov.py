"""checkov over the rendered examples, offline, with cronwarden's dead-letter policies.

Run by ``nox -s deploy_check`` (checkov pins dependencies that cannot share a virtualenv with
the test tools, and ships its own fork of the ``hcl2`` module, so it gets a session of its own)
and by ``tests/deploy/test_checkov.py`` when ``$CRONWARDEN_CHECKOV`` or ``checkov`` is found.

Each case must pass with no failed check and no parse error; each deliberately broken copy
(a subscription without dead_letter_policy, a queue that drops expired messages, an SQS run
queue without a redrive policy, a dead-letter queue keeping messages 4 days) must fail with the
expected cronwarden policy. Prints a closing ``N passed, N failed`` line; exit 1 on
any failure.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cronwarden.deploy import files
from cronwarden.deploy.check import check_checkov
from cronwarden.deploy.render import render

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CASES = {
    "gcp-quarter-hourly": ("gcp", "quarter_hourly.py", None),
    "gcp-nightly-pull": ("gcp", "nightly_export.py", None),
    "azure-nightly": ("azure", "nightly_export.py", None),
    "gcp-quarter-hourly-azure-watcher": ("gcp", "quarter_hourly.py", "azure"),
    "azure-quarter-hourly-gcp-watcher": ("azure", "quarter_hourly.py", "gcp"),
    "aws-nightly": ("aws", "nightly_export.py", None),
    "aws-quarter-hourly-gcp-watcher": ("aws", "quarter_hourly.py", "gcp"),
    "aws-quarter-hourly-azure-watcher": ("aws", "quarter_hourly.py", "azure"),
    "aws-long-jobs-ecs": ("aws", "long_jobs.py", None),
    "gcp-quarter-hourly-aws-watcher": ("gcp", "quarter_hourly.py", "aws"),
    "azure-quarter-hourly-aws-watcher": ("azure", "quarter_hourly.py", "aws"),
}
GCP_WORKER = {"gcp-nightly-pull": "pull"}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if old not in text:
        raise AssertionError(f"{path}: {old!r} not found")
    path.write_text(text.replace(old, new, 1))


def _no_dead_letter_policy(root: Path) -> None:
    _edit(
        root / "modules/gcp/push/main.tf",
        "  dead_letter_policy {\n"
        "    dead_letter_topic     = var.dead_letter_topic_id\n"
        "    max_delivery_attempts = var.max_delivery_attempts\n"
        "  }\n",
        "",
    )


def _drops_expired_messages(root: Path) -> None:
    _edit(
        root / "modules/azure/servicebus/main.tf",
        "dead_lettering_on_message_expiration    = true",
        "dead_lettering_on_message_expiration    = false",
    )


def _sqs_without_redrive(root: Path) -> None:
    """The run queue loses its redrive policy (and what referenced it)."""
    queue = root / "modules/aws/queue/main.tf"
    text = queue.read_text()
    start = text.index('resource "aws_sqs_queue_redrive_policy" "runs"')
    end = text.index("\n}\n", start) + 3
    queue.write_text(text[:start] + text[end:])
    _edit(queue, "  depends_on = [aws_sqs_queue_redrive_policy.runs]\n", "")


def _dead_letters_kept_4_days(root: Path) -> None:
    _edit(
        root / "modules/aws/schedules/main.tf",
        "message_retention_seconds = 1209600",
        "message_retention_seconds = 345600",
    )


#: broken case => (base case, edit, cronwarden policy that must fail)
BROKEN: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "gcp-without-dead-letter-policy": ("gcp-quarter-hourly", _no_dead_letter_policy, "CKV2_CW_1"),
    "azure-queue-drops-expired": ("azure-nightly", _drops_expired_messages, "CKV2_CW_3"),
    "aws-queue-without-redrive": ("aws-nightly", _sqs_without_redrive, "CKV2_CW_5"),
    "aws-dead-letters-kept-4-days": ("aws-nightly", _dead_letters_kept_4_days, "CKV2_CW_7"),
}


LONG_JOBS = (
    "import cronwarden\n\n\n"
    "@cronwarden.job('long-export', cron='0 3 * * *', max_runtime='2h')\n"
    "def long_export(ctx):\n"
    "    pass\n"
)


def _example(work: Path, module: str) -> Path:
    """An example module; ``long_jobs.py`` (runs longer than Lambda allows: the ECS pull
    worker) is written into ``work``."""
    if module != "long_jobs.py":
        return EXAMPLES / module
    path = work / "jobs" / module
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(LONG_JOBS)
    return path


def run(work: Path) -> list[str]:
    """Every case and broken case; returns the failures (empty = all good)."""
    failures: list[str] = []
    roots: dict[str, Path] = {}
    for name, (provider, module, watcher) in CASES.items():
        roots[name] = render(
            provider,
            str(_example(work, module)),
            work / name,
            watcher_provider=watcher,
            gcp_worker=GCP_WORKER.get(name),
        ).out
        started = time.monotonic()
        findings = check_checkov(roots[name], files.checkov_policies())
        print(f"{name}: {len(findings)} finding(s) in {time.monotonic() - started:.1f}s")
        failures += [f"{name}: {finding}" for finding in findings]
    for name, (base, edit, policy) in BROKEN.items():
        root = work / name
        shutil.copytree(roots[base], root)
        edit(root)
        findings = check_checkov(root, files.checkov_policies())
        caught = [f for f in findings if f" {policy} " in f]
        print(
            f"{name}: {policy} {'caught' if caught else 'NOT caught'} ({len(findings)} finding(s))"
        )
        if not caught or len(findings) != len(caught):
            failures.append(f"{name}: expected exactly {policy}, got {findings}")
    return failures


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="cw-checkov-") as scratch:
        failures = run(Path(scratch))
    total = len(CASES) + len(BROKEN)
    for failure in failures:
        print(f"FAILED {failure}")
    failed = len({f.split(":")[0] for f in failures})
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
