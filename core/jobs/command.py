"""Run a shell command as a job's handler, unchanged: the bridge for jobs ported from a crontab.

:func:`run_command` runs ``shell -c cmd`` (``/bin/sh`` as cron does) in its own process group,
with standard output and standard error merged (what cron would have mailed), and:

* stops it at the job's max runtime (``timeout``, default ``ctx.job.max_runtime``) and as soon as
  the run is asked to stop (lease lost, shutdown): SIGTERM to the whole group, SIGKILL after
  ``kill_grace``;
* makes its exit status the run's outcome: 0 returns a :class:`CommandResult`, anything else
  raises :class:`CommandFailed` (retried or dead-lettered by the job's ``Retry`` like any handler
  error), whose message carries the tail of the output, so it lands in the run record's error;
* keeps only the last ``tail_chars`` of output in memory (a chatty command cannot exhaust it),
  logs that tail with the run (``command.completed`` / ``command.failed``) and counts
  ``command_exit_status`` and ``command_output_bytes`` in the run's counters;
* redacts secrets everywhere it reports output: the shared rule set of
  :mod:`cronwarden.model.redaction`, plus the values of ``env`` entries whose name marks a secret
  (:func:`~cronwarden.model.redaction.is_secret_name`: ``PGPASSWORD``, ``MYSQL_PWD``,
  ``API_TOKEN``...) or whose value has a secret's shape (a DSN with a password), and of the
  ``require_env`` variables (registered with :func:`~cronwarden.model.redaction.register_secret`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..model.durations import DurationLike, parse_duration
from ..model.errors import ConfigurationError, CronwardenError
from ..model.logs import get_logger
from ..model.redaction import is_secret_name, redact, register_secret

if TYPE_CHECKING:
    from ..run.context import RunContext

__all__ = ["CommandFailed", "CommandResult", "CommandTimedOut", "run_command"]

DEFAULT_TAIL_CHARS = 4000
_ERROR_TAIL_CHARS = 300  # the run record's error is a short snippet: keep the end of the output
_POLL_SECONDS = 0.1
_CHUNK = 65536
#: the shell's working directories: "PWD" names a password in connection strings, not here
#: (registering "/srv/app" as a secret would mask every path under it in every log line)
_NOT_SECRET = frozenset({"PWD", "OLDPWD"})


@dataclass(frozen=True)
class CommandResult:
    """A command that exited with status 0."""

    exit_status: int
    output_tail: str  #: the last characters of stdout+stderr, redacted
    output_bytes: int  #: how much output there was in total
    duration: timedelta


class CommandFailed(CronwardenError):
    """The command exited with a non-zero status (or was killed by a signal).

    ``exit_status`` is the status, or ``-N`` for signal N (as :mod:`subprocess` reports it).
    The message ends with the (redacted) tail of the output.
    """

    def __init__(self, exit_status: int | None, output_tail: str, what: str = "") -> None:
        self.exit_status = exit_status
        self.output_tail = output_tail
        if not what:
            if exit_status is not None and exit_status < 0:
                what = f"command was killed by signal {_signal_name(-exit_status)}"
            else:
                what = f"command exited with status {exit_status}"
        tail = output_tail[-_ERROR_TAIL_CHARS:].strip()
        super().__init__(f"{what}; output tail: {tail}" if tail else f"{what}; no output")


class CommandTimedOut(CommandFailed):
    """The command was still running at its timeout and was killed."""


def run_command(
    cmd: str,
    ctx: RunContext | None = None,
    *,
    timeout: DurationLike | None = None,
    shell: str = "/bin/sh",
    env: Mapping[str, str] | None = None,
    require_env: Iterable[str] = (),
    stdin: str | None = None,
    cwd: str | None = None,
    tail_chars: int = DEFAULT_TAIL_CHARS,
    kill_grace: DurationLike = "5s",
) -> CommandResult:
    """Run ``cmd`` with ``shell -c`` and return its result; raise :class:`CommandFailed` unless
    it exits with status 0.

    ``env`` is laid over the worker's environment (as cron's ``NAME=value`` lines are laid over
    cron's). ``require_env`` names variables that must already be set in the worker's
    environment (secrets moved out of a crontab): a missing one raises
    :class:`~cronwarden.model.errors.ConfigurationError` before anything runs. ``stdin`` is sent to
    the
    command (cron's text after ``%``); without it the command reads end-of-file.
    ``timeout`` defaults to the job's max runtime when ``ctx`` is given, else none.
    """
    if tail_chars < 1:
        raise ValueError("tail_chars must be at least 1")
    environment = _environment(env, require_env)
    limit = _timeout(timeout, ctx)
    grace = parse_duration(kill_grace, field="kill_grace").total_seconds()
    log: Any = ctx.log if ctx is not None else get_logger("command")
    started = time.monotonic()
    process = subprocess.Popen(
        [shell, "-c", cmd],
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=environment,
        cwd=cwd,
        start_new_session=True,  # its own process group: a timeout kills the whole pipeline
    )
    output = _Tail(tail_chars * 4)  # bytes; decoded and cut to tail_chars at the end
    reader = threading.Thread(target=output.drain, args=(process.stdout,), daemon=True)
    reader.start()
    if stdin is not None:
        threading.Thread(target=_feed, args=(process.stdin, stdin), daemon=True).start()
    stopped = _wait(process, reader, ctx, None if limit is None else started + limit)
    if stopped is not None:
        _kill_group(process, grace)
    reader.join(timeout=grace)
    duration = timedelta(seconds=time.monotonic() - started)
    tail = redact(output.text())[-tail_chars:]
    status = process.returncode
    if ctx is not None:
        ctx.count("command_exit_status", status if status is not None else -1)
        ctx.count("command_output_bytes", output.total)
    fields = {"exit_status": status, "output_tail": tail, "duration_ms": _ms(duration)}
    if stopped == "timeout":
        log.error(
            "command timed out", extra={"event": "command.timed_out", **fields, "timeout_s": limit}
        )
        raise CommandTimedOut(status, tail, f"command timed out after {limit:g}s and was killed")
    if stopped == "cancelled" and ctx is not None:
        log.warning("command stopped: the run was interrupted", extra={"event": "command.stopped"})
        ctx.check()  # raises the interruption (LeaseLost / Cancelled)
    if status != 0:
        log.error("command failed", extra={"event": "command.failed", **fields})
        raise CommandFailed(status, tail)
    log.info("command completed", extra={"event": "command.completed", **fields})
    return CommandResult(0, tail, output.total, duration)


class _Tail:
    """The last ``limit`` bytes of a stream, and how many bytes it carried in total."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._chunks: deque[bytes] = deque()
        self._held = 0

    def drain(self, stream: Any) -> None:
        with stream:
            while chunk := stream.read1(_CHUNK):
                self.total += len(chunk)
                self._chunks.append(chunk)
                self._held += len(chunk)
                while self._held - len(self._chunks[0]) >= self.limit:
                    self._held -= len(self._chunks.popleft())

    def text(self) -> str:
        data = b"".join(self._chunks)[-self.limit :]
        return data.decode("utf-8", errors="replace")


def _feed(pipe: Any, text: str) -> None:
    try:
        with pipe:
            pipe.write(text.encode())
    except (BrokenPipeError, OSError):
        pass  # the command did not read all of its input: cron ignores that too


def _wait(
    process: subprocess.Popen[bytes],
    reader: threading.Thread,
    ctx: RunContext | None,
    deadline: float | None,
) -> str | None:
    """Wait for the command to exit and its output to close; return why it had to be stopped
    (``"timeout"``, ``"cancelled"``) or None. Output held open by a background child keeps the
    command running, as it keeps cron waiting."""
    while process.poll() is None or reader.is_alive():
        if deadline is not None and time.monotonic() >= deadline:
            return "timeout"
        if ctx is not None and ctx.cancelled:
            return "cancelled"
        if process.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=_POLL_SECONDS)
        else:
            reader.join(timeout=_POLL_SECONDS)
    return None


def _kill_group(process: subprocess.Popen[bytes], grace: float) -> None:
    for sig, wait_for in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_for)
        except subprocess.TimeoutExpired:
            continue
        if sig is signal.SIGTERM:
            # the shell is gone; make sure nothing it started keeps running
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            return


def _environment(env: Mapping[str, str] | None, require_env: Iterable[str]) -> dict[str, str]:
    environment = dict(os.environ)
    for name in require_env:
        value = os.environ.get(name)
        if value is None:
            raise ConfigurationError(
                f"environment variable {name} is not set on this worker; the command needs it "
                "(set it from your secret manager)"
            )
        register_secret(value)
    for name, value in (env or {}).items():
        if (is_secret_name(name) and name not in _NOT_SECRET) or redact(value) != value:
            register_secret(value)  # a secret-named variable: its value never reaches a log
        environment[name] = value
    return environment


def _timeout(timeout: DurationLike | None, ctx: RunContext | None) -> float | None:
    if timeout is not None:
        seconds = parse_duration(timeout, field="timeout").total_seconds()
    elif ctx is not None:
        seconds = ctx.job.max_runtime.total_seconds()
    else:
        return None
    if seconds <= 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    return seconds


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _ms(delta: timedelta) -> int:
    return int(delta.total_seconds() * 1000)
