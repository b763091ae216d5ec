"""A real second process that takes SQLite's write lock on a file and is then SIGSTOPped inside
its transaction (a writer paused by a debugger, a frozen container): what every other process
sees is a file locked past its busy timeout."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("BEGIN IMMEDIATE")
conn.execute("CREATE TABLE IF NOT EXISTS paused_writer (n INTEGER)")
conn.execute("INSERT INTO paused_writer VALUES (1)")
print("holding", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
"""


@contextlib.contextmanager
def paused_writer(path: str) -> Iterator[int]:
    """A process holding ``path``'s write lock inside an open transaction, SIGSTOPped; yields its
    pid. On leaving: SIGCONT, the transaction commits, the process exits (killed by its process
    group if it does not within 10 s)."""
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        line = child.stdout.readline().strip()
        assert line == "holding", f"the lock holder did not start: {line!r}"
        os.kill(child.pid, signal.SIGSTOP)
        try:
            yield child.pid
        finally:
            os.kill(child.pid, signal.SIGCONT)
        child.stdin.write("commit\n")
        child.stdin.flush()
        assert child.wait(timeout=10) == 0
    finally:
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGCONT)
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
