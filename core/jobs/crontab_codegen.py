"""Write a job module from a parsed crontab: one ``@cronwarden.job`` per schedule line, whose
handler runs the line's command unchanged through :func:`cronwarden.run_command`.

What the module keeps from cron: the schedule (translated exactly), the timezone, the command
text, its standard input (cron's ``%``), the shell and the environment lines above the entry.
What changes, on purpose, and is written in the module's docstring: a run never overlaps the
previous one (``overlap="skip"``), it is stopped at ``max_runtime``, a failure is retried
``max_attempts - 1`` times and then dead-lettered and alerted on. Secret-looking environment values
are never written into the module: the job requires them from the worker's environment.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Collection
from datetime import UTC, datetime

from ..model.redaction import redact
from .crontab import CronEntry, Crontab, EnvLine

__all__ = ["job_names", "render_module"]

_NAME_CHARS = re.compile(r"[^a-z0-9]+")
_OWNER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+/-]{0,99}\Z")
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,62}\Z")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: Environment names that are cron's own settings, not the command's environment.
_CRON_SETTINGS = {"CRON_TZ", "MAILTO", "MAILFROM", "RANDOM_DELAY", "CONTENT_TYPE"}


def job_names(entries: list[CronEntry]) -> dict[int, str]:
    """A job name per line number, each distinct: the command's program name (``backup`` for
    ``/usr/local/bin/backup.sh --all``); ``-l<line>`` is appended when two lines share it (and
    ``-<n>`` when that is another line's name already: ``a.sh`` twice beside ``a-l2.sh``)."""
    base = {entry.lineno: _slug(entry.command) or f"line-{entry.lineno}" for entry in entries}
    seen: dict[str, int] = {}
    for name in base.values():
        seen[name] = seen.get(name, 0) + 1
    taken = {name for name, count in seen.items() if count == 1}
    out = {}
    for lineno, name in base.items():
        if seen[name] > 1:
            candidate, n = f"{name[:55].rstrip('-')}-l{lineno}", 1
            while candidate in taken:
                n += 1
                candidate = f"{name[:48].rstrip('-')}-l{lineno}-{n}"
            name = candidate
        taken.add(name)
        out[lineno] = name
    return out


def _slug(command: str) -> str:
    for word in command.split():
        if _ASSIGNMENT.match(word):
            continue  # "LANG=C cmd": the program is the next word
        program = word.rsplit("/", 1)[-1].split(".", 1)[0].lower()
        return _NAME_CHARS.sub("-", program).strip("-")[:50].strip("-")
    return ""


def render_module(
    crontab: Crontab,
    *,
    max_runtime: str,
    max_attempts: int,
    skip: Collection[int] = (),
    now: datetime | None = None,
) -> str:
    """The source of a job module for every translated entry of ``crontab`` not in ``skip``
    (line numbers). The caller refuses crontabs with untranslatable lines first."""
    entries = [e for e in crontab.entries if e.lineno not in skip]
    names = job_names(entries)
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        f'"""Jobs imported from the crontab {redact(crontab.source)!r} by '
        f"`cronwarden import-crontab` on {stamp}.",
        "",
        "Each job runs its crontab command unchanged through cronwarden.run_command. What",
        "changes on purpose: a run never overlaps the previous one (overlap='skip'), it is",
        "stopped at MAX_RUNTIME, a failed run is retried up to RETRY.max_attempts attempts in",
        "total, then dead-lettered and alerted on (cron mailed the output instead).",
        "Review what `cronwarden inventory` flags before deploying.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import cronwarden",
        "",
        f"MAX_RUNTIME = {max_runtime!r}",
        f"RETRY = cronwarden.Retry(max_attempts={max_attempts})",
    ]
    for lineno in sorted(skip):
        out += ["", f"# line {lineno}: skipped at import (--skip {lineno})"]
    for entry in entries:
        out += ["", "", *_job(entry, names[entry.lineno])]
    return "\n".join(out) + "\n"


def _job(entry: CronEntry, name: str) -> list[str]:
    if entry.cron is None or entry.timezone is None or entry.refusal is not None:
        raise ValueError(f"line {entry.lineno} cannot be translated: {entry.refusal}")
    lines = [f"# line {entry.lineno}: {_comment(redact(entry.text.strip()))}"]
    lines += [f"# decide: {_comment(flag.message)}" for flag in entry.flags]
    mailto = entry.mailto
    if mailto and not _OWNER.match(mailto):
        lines.append(f"# MAILTO={_comment(mailto)} (not a single address: no owner set)")
    tags = ["crontab"]
    if entry.user and _TAG.match(f"cron-user:{entry.user}"):
        tags.append(f"cron-user:{entry.user}")
    description = redact(f"crontab line {entry.lineno}: {entry.command}")[:200]
    lines += [
        "@cronwarden.job(",
        f"    {name!r},",
        f"    cron={entry.cron!r},",
        f"    timezone={entry.timezone!r},",
        "    max_runtime=MAX_RUNTIME,",
        '    overlap="skip",',
        "    retry=RETRY,",
    ]
    if mailto and _OWNER.match(mailto):
        lines.append(f"    owner={mailto!r},")
    lines += [f"    tags={tags!r},", f"    description={description!r},", ")"]
    env, secret = _environment(entry.env)
    args = [f"        {entry.command!r},", "        ctx,"]
    if entry.shell != "/bin/sh":
        args.append(f"        shell={entry.shell!r},")
    if env:
        args.append(f"        env={env!r},")
    if secret:
        args.append(f"        require_env={secret!r},")
    if entry.stdin is not None:
        args.append(f"        stdin={entry.stdin!r},")
    home = entry.env_value("HOME")
    if home:
        args.append(f"        cwd={home!r},  # cron runs commands in $HOME")
    lines += [
        f"def {_identifier(name)}(ctx: cronwarden.RunContext) -> None:",
        "    cronwarden.run_command(",
        *args,
        "    )",
    ]
    return lines


def _environment(lines: tuple[EnvLine, ...]) -> tuple[dict[str, str], tuple[str, ...]]:
    """The command's environment (later lines win, as in cron) and the secret names."""
    env: dict[str, str] = {}
    secret: dict[str, None] = {}
    for line in lines:
        if line.name in _CRON_SETTINGS:
            continue
        if line.secret:
            env.pop(line.name, None)
            secret[line.name] = None
        else:
            secret.pop(line.name, None)
            env[line.name] = line.value
    return env, tuple(secret)


def _identifier(name: str) -> str:
    ident = name.replace("-", "_")
    if ident[0].isdigit() or keyword.iskeyword(ident):
        ident = f"job_{ident}"
    return ident


def _comment(text: str) -> str:
    return text.replace("\n", " ").replace("\r", " ")
