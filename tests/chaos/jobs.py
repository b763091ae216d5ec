"""The jobs chaos workers run. Each side effect goes to the history file (``CW_CHAOS_HISTORY``).

Fault injection points are steered by the environment of the worker process:

* ``CW_CHAOS_CRASH`` = ``mid_ledger`` (SIGKILL before the side effect of the N-th item, the item
  claimed *pending*) or ``after_effect`` (SIGKILL right after the N-th side effect, before its
  *done* mark); ``before_claim`` is injected in the worker's store (see ``worker.py``).
  N is ``CW_CHAOS_CRASH_AT``. Only the process that takes the token file ``CW_CHAOS_TOKEN`` (an
  atomic rename) crashes, so exactly one crash happens per token.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import cronwarden
from cronwarden import RunContext

from . import history

SECRET_TOKEN = "cwcanary-7f3a9c2e41b8d605"  #: registered with register_secret by every worker
#: a connection-string-shaped secret: only the redaction patterns stand between it and a log
SECRET_KEY = "Q2FuYXJ5S2V5LWNocmFvcy1zZWNyZXQtOTk5OQ=="
SECRET_CONNECTION_STRING = (
    "DefaultEndpointsProtocol=https;AccountName=chaoscanary;"
    f"AccountKey={SECRET_KEY};EndpointSuffix=core.windows.net"
)
CANARIES = (SECRET_TOKEN, SECRET_KEY)

_effects_seen = 0


def take_token() -> bool:
    """True for exactly one process per token file (atomic rename)."""
    token = os.environ.get("CW_CHAOS_TOKEN", "")
    if not token:
        return False
    try:
        os.rename(token, f"{token}.taken.{os.getpid()}")
    except OSError:
        return False
    return True


def crash(point: str) -> None:
    """SIGKILL this process at ``point`` if it is the injected one (once per token)."""
    if os.environ.get("CW_CHAOS_CRASH") == point and take_token():
        with open(os.environ["CW_CHAOS_TOKEN"] + ".crashed", "w") as marker:
            marker.write(f"{time.time()} {os.getpid()} {point}")
        os.kill(os.getpid(), signal.SIGKILL)


def _history() -> str:
    return os.environ["CW_CHAOS_HISTORY"]


def effect(ctx: RunContext, item: str, idem: str, uncertain: bool, kind: str = "item") -> None:
    """Confirm the lease (``ctx.check()``), then perform (record) the side effect."""
    checked_at = time.time()
    ctx.check()
    history.record_effect(
        _history(),
        run_key=ctx.run_key,
        item=item,
        idem=idem,
        run_id=ctx.run_id,
        fence=ctx.fence,
        uncertain=uncertain,
        checked_at=checked_at,
        kind=kind,
    )


@cronwarden.job(
    "chaos-fanout",
    cron="* * * * *",
    max_runtime=os.environ.get("CW_CHAOS_RUNTIME", "4s"),
    overlap="defer",
    retry=cronwarden.Retry(max_attempts=8, min_backoff="0s", max_backoff="1s"),
)
def fanout(ctx: RunContext) -> None:
    """Fan out over ``payload.items`` items with the ledger; one side effect per item."""
    global _effects_seen
    p: dict[str, Any] = ctx.payload
    crash_at = int(os.environ.get("CW_CHAOS_CRASH_AT", "-1"))
    # ``"marks": "batch"``: done marks only with the next batch (``flush_every=None``), the
    # ledger's write pattern before marks were written within a batch
    flush: dict[str, Any] = {"flush_every": None} if p.get("marks") == "batch" else {}
    items = range(int(p.get("items", 10)))
    for item in ctx.items(items, batch_size=int(p.get("batch", 5)), **flush):
        if _effects_seen == crash_at:
            crash("mid_ledger")
        effect(ctx, item.key, item.idempotency_key, item.uncertain)
        if _effects_seen == crash_at:
            crash("after_effect")
        _effects_seen += 1
        time.sleep(float(p.get("delay", 0.02)))  # the work: not cooperative, like real code


@cronwarden.job(
    "chaos-once",
    cron="* * * * *",
    max_runtime="10s",
    overlap="defer",
    retry=cronwarden.Retry(max_attempts=8, min_backoff="0s", max_backoff="1s"),
)
def once(ctx: RunContext) -> None:
    """One side effect per window (the run key is its idempotency key)."""
    effect(ctx, "run", ctx.idempotency_key("run"), ctx.resumed)
    time.sleep(float(ctx.payload.get("hold", 0.05)))


@cronwarden.job(
    "chaos-catchup",
    cron="*/5 * * * *",
    max_runtime="10s",
    overlap="skip",
    catch_up=cronwarden.CatchUp.oldest_first("1h", max_per_tick=12),
    retry=cronwarden.Retry(max_attempts=8, min_backoff="0s", max_backoff="1s"),
)
def catchup(ctx: RunContext) -> None:
    effect(ctx, "run", ctx.idempotency_key("run"), ctx.resumed)
    time.sleep(0.05)


@cronwarden.job(
    "chaos-poison",
    cron="0 * * * *",
    max_runtime="10s",
    retry=cronwarden.Retry(max_attempts=3, min_backoff="1s", max_backoff="2s"),
    liveness=cronwarden.Liveness(failure_threshold=3),
)
def poison(ctx: RunContext) -> None:
    """Fails every time (with secrets in the error text) until the fix file exists."""
    fixed = os.environ.get("CW_CHAOS_FIXED", "")
    if not (fixed and os.path.exists(fixed)):
        effect(ctx, "attempt", ctx.idempotency_key("attempt"), False, kind="poison")
        # configuration, as a real job reads it: the worker's environment
        connection = os.environ.get("CHAOS_UPSTREAM_CONNECTION_STRING", "")
        ctx.log.warning("calling upstream with %s", connection)
        raise RuntimeError(f"upstream refused the call (token {SECRET_TOKEN}); {connection}")
    effect(ctx, "run", ctx.idempotency_key("run"), ctx.resumed)


@cronwarden.job(
    "chaos-skip",
    cron="*/15 * * * *",
    max_runtime="10s",
    overlap="skip",
    retry=cronwarden.Retry(max_attempts=5, min_backoff="2s", max_backoff="2s"),
)
def skip_job(ctx: RunContext) -> None:
    """[windows] Fails its first attempt when the payload asks (``fail_once``); holds for
    ``hold`` seconds (so the next window takes the lock while a retry is due)."""
    if ctx.payload.get("fail_once") and ctx.attempt == 1:
        raise RuntimeError("first attempt fails")
    effect(ctx, "run", ctx.idempotency_key("run"), ctx.resumed)
    time.sleep(float(ctx.payload.get("hold", 0.05)))


@cronwarden.job(
    "chaos-dead",
    cron="0 * * * *",
    max_runtime="5s",
    retry=cronwarden.Retry(max_attempts=1, min_backoff="0s", max_backoff="0s"),
)
def dead_job(ctx: RunContext) -> None:
    """[windows] Always fails with a permanent error: dead-lettered on its first attempt."""
    raise cronwarden.PermanentError("bad input")
