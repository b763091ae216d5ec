"""Run a page's shell steps as written: every ```bash block, in order, as one bash script.

A block runs as it stands unless an HTML comment (invisible on the rendered page) right before
it says otherwise:

``<!-- run-as-written: skip (why) -->``
    The block is not run (the whole test suite, say). The reason is for the reader of the
    markdown; the page itself tells its reader what the step does.
``<!-- run-as-written: background until /REGEX/ (why) -->``
    A step that does not return (a server in the foreground; the page tells its reader to
    leave it running and go on in a second shell). The block is started in the background in a
    process group of its own, the next block waits (with a deadline) until its output matches
    ``REGEX``, and it is stopped by its process group when the page is done.

Any other marker is an error, so a typo cannot silently turn a step off. Everything a page
starts is stopped at the end by process group: the background steps, the emulator stacks that
``cronwarden emulators up … --detach`` recorded in ``.cronwarden/emulators-*.pid``, and the
script's own group.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

#: the folder, in the page's working directory, for background logs and process ids
STATE = ".run-as-written"
#: how long a background step may take to print its ready line
READY_SECONDS = 180

_BLOCK = re.compile(
    r"(?:<!--\s*run-as-written:\s*(?P<mark>.*?)\s*-->[ \t]*\n)?^```bash[ \t]*\n(?P<body>.*?)^```",
    re.S | re.M,
)
_BACKGROUND = re.compile(r"background until /(?P<ready>.+?)/(?:\s+\(.*\))?$", re.S)
_SKIP = re.compile(r"skip(?:\s+\(.*\))?$", re.S)


@dataclass(frozen=True)
class Step:
    """One ```bash block: its command lines and how it is run."""

    commands: tuple[str, ...]
    mode: Literal["run", "skip", "background"] = "run"
    ready: str | None = None  #: background only: the regex its output matches once ready


def section(markdown: str, heading: str) -> str:
    """The part of ``markdown`` under the heading line starting with ``heading`` (``## Set-up``),
    up to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = markdown.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        raise ValueError(f"no heading {heading!r}")
    end = len(lines)
    for i in range(start + 1, len(lines)):
        hashes = len(lines[i]) - len(lines[i].lstrip("#"))
        if 0 < hashes <= level and lines[i][hashes : hashes + 1] == " ":
            end = i
            break
    return "".join(lines[start:end])


def steps(markdown: str) -> list[Step]:
    """The ```bash blocks of ``markdown`` in order, with their markers; raises ValueError on a
    marker this module does not know."""
    found: list[Step] = []
    for match in _BLOCK.finditer(markdown):
        commands = tuple(line for line in match["body"].splitlines() if line.strip())
        mark = match["mark"]
        if mark is None:
            found.append(Step(commands))
        elif _SKIP.match(mark):
            found.append(Step(commands, "skip"))
        elif background := _BACKGROUND.match(mark):
            found.append(Step(commands, "background", background["ready"]))
        else:
            raise ValueError(f"unknown run-as-written marker {mark!r}")
    return found


def script(page: list[Step]) -> str:
    """One bash script running ``page``'s steps in order; it stops at the first failure."""
    lines = ["set -e", f"mkdir -p {STATE}"]
    for n, step in enumerate(page):
        if step.mode == "skip":
            lines.append(f"# step {n} skipped")
        elif step.mode == "run":
            lines.extend(step.commands)
        else:
            log = f"{STATE}/background-{n}.log"
            lines += [
                "set -m",  # a process group of its own, stopped as one at the end
                "(",
                *step.commands,
                f") > {log} 2>&1 < /dev/null &",
                "set +m",
                f"echo $! >> {STATE}/pids",
                f"_end=$((SECONDS + {READY_SECONDS}))",
                f"until grep -Eq {shlex.quote(step.ready or '')} {log}; do",
                f'  kill -0 $! 2>/dev/null || {{ echo "step {n} exited:" >&2; cat {log} >&2; '
                "exit 1; }",
                f'  [ "$SECONDS" -lt "$_end" ] || {{ echo "step {n} not ready in '
                f'{READY_SECONDS}s" >&2; exit 1; }}',
                "  sleep 0.2",
                "done",
            ]
    return "\n".join(lines) + "\n"


def run(
    page: list[Step], cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``page`` in ``cwd`` with ``env``; afterwards (also on a timeout) stop by process
    group everything it started."""
    path = cwd / f"{STATE}.sh"
    path.write_text(script(page))
    child = subprocess.Popen(
        ["bash", str(path)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(child.pid)
        out, err = child.communicate()
        err += f"\n(timed out after {timeout}s)"
    finally:
        for pid in started(cwd):
            stop_group(pid)
        stop_group(child.pid)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def started(cwd: Path) -> list[int]:
    """Process group ids the page left behind: background steps and detached emulators."""
    files = [cwd / STATE / "pids", *sorted((cwd / ".cronwarden").glob("emulators-*.pid"))]
    return [int(pid) for file in files if file.exists() for pid in file.read_text().split()]


def stop_group(pgid: int, grace: float = 10.0) -> None:
    """SIGTERM process group ``pgid``, then SIGKILL whatever is left after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
        end = time.monotonic() + grace
        while time.monotonic() < end:
            os.killpg(pgid, 0)  # raises ProcessLookupError once the group is gone
            time.sleep(0.1)
        os.killpg(pgid, signal.SIGKILL)


def alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
