"""cronwarden beside its peers on one PostgreSQL server: ``python -m tests.bench.peers``.

``nox -s peers`` installs the peers (DBOS, PgQueuer, procrastinate: benchmark-only, never
cronwarden's dependencies) and runs this. One private PostgreSQL 15 server (the launcher the
tests use, ``pg_stat_statements`` preloaded with ``track=all``, so statements that server-side
functions run are counted too); per measurement a fresh database and a fresh process
(:mod:`tests.bench.peer_runs`); rounds interleaved (the order rotates each round: load drifts
on a shared machine); medians of ``--rounds`` (3). Reported per system: runs/s, statements
executed per run (every statement of the measured part on that database, pollers included;
set-up excluded), the machine's load averages before and after, and cronwarden ÷ peer (per
round, then the median). Then the faults (``--no-faults`` skips them): a late double fire of
every window (:func:`double_fire`), and a SIGKILLed or SIGSTOPped owner in the middle of a run
(:func:`faults`, workers in :mod:`tests.bench.peer_faults`).

Writes the JSON (``--json``) and replaces the peer section of docs/benchmarks.md between its
markers (``--markdown``; ``-`` prints it instead).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from typing import Any

from .peer_runs import EXTRA_SYSTEMS, SYSTEMS
from .stats import summary

RUNS = 200
ROUNDS = 3
START, END = "<!-- peers:start -->", "<!-- peers:end -->"
PEER_PACKAGES = ("dbos", "pgqueuer", "procrastinate", "psycopg")
SERVER_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "shared_buffers": "64MB",
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "all",
    "pg_stat_statements.max": "10000",
}
#: cronwarden ÷ peer: the issue's targets (see docs/benchmarks.md)
TARGETS = {
    ("cronwarden-queue", "dbos"): 1.0,
    ("cronwarden-queue", "pgqueuer"): 0.5,
    ("cronwarden-engine", "dbos"): 1.5,
    # measured only when named (--only): the worker's poll at PgQueuer's batch (100)
    ("cronwarden-queue-batch100", "pgqueuer"): 0.5,
}


def _sql(dsn: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def _database_dsn(server_dsn: str, name: str) -> str:
    return server_dsn.rsplit("/", 1)[0] + "/" + name


def _available(system: str) -> str | None:
    """Why ``system`` cannot run here, or None."""
    package = {"dbos": "dbos", "pgqueuer": "pgqueuer", "procrastinate": "procrastinate"}
    name = package.get(system)
    if name is None:
        return None
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return f"{name} is not installed (nox -s peers installs it)"
    return None


def _one(server_dsn: str, system: str, runs: int, tag: str, fires: int = 1) -> dict[str, Any]:
    """One measurement: a fresh database, a fresh child process; the statements it executed
    after set-up (``pg_stat_statements`` of that database, reset when the child is ready)."""
    name = f"peer_{system.replace('-', '_')}_{tag}"
    _sql(server_dsn, f'CREATE DATABASE "{name}"')
    dsn = _database_dsn(server_dsn, name)
    (oid,) = _sql(server_dsn, "SELECT oid FROM pg_database WHERE datname = %s", (name,))[0]
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.bench.peer_runs", system, dsn, str(runs)],
        env={**os.environ, "CW_PEERS_FIRES": str(fires)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        line = child.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"{system}: set-up failed (exit {child.wait(60)}): {line!r}")
        _sql(server_dsn, "SELECT pg_stat_statements_reset(0, %s, 0)", (oid,))
        load_before = os.getloadavg()
        child.stdin.write("go\n")
        child.stdin.flush()
        out = child.stdout.read()
        code = child.wait(600)
        if code != 0:
            raise RuntimeError(f"{system}: exit {code}: {out[-500:]}")
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        (statements,) = _sql(
            server_dsn,
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE dbid = %s",
            (oid,),
        )[0]
        top = _sql(
            server_dsn,
            "SELECT calls, toplevel, left(regexp_replace(query, '\\s+', ' ', 'g'), 160) "
            "FROM pg_stat_statements WHERE dbid = %s ORDER BY calls DESC LIMIT 30",
            (oid,),
        )
    finally:
        if child.poll() is None:
            os.killpg(child.pid, 9)
            child.wait(30)
    if result["done"] < runs if fires > 1 else result["done"] != runs:
        raise RuntimeError(f"{system}: {result['done']} of {runs} runs done")
    result.update(
        statements=int(statements),
        top_statements=[
            {"per_run": round(calls / runs, 2), "toplevel": toplevel, "query": query}
            for calls, toplevel, query in top
        ],
        load_before=[round(x, 2) for x in load_before],
        load_after=[round(x, 2) for x in os.getloadavg()],
    )
    _sql(server_dsn, f'DROP DATABASE "{name}" WITH (FORCE)')
    return result


def measure(systems: list[str], runs: int = RUNS, rounds: int = ROUNDS) -> dict[str, Any]:
    from cronwarden.emulators.postgres import PostgresServer

    skipped = {s: why for s in systems if (why := _available(s)) is not None}
    wanted = [s for s in systems if s not in skipped]
    samples: dict[str, list[dict[str, Any]]] = {s: [] for s in wanted}
    with PostgresServer(settings=SERVER_SETTINGS) as server:
        _sql(server.dsn, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        for r in range(rounds):
            order = wanted[r % len(wanted) :] + wanted[: r % len(wanted)]
            for system in order:
                result = _one(server.dsn, system, runs, f"r{r}")
                samples[system].append(result)
                print(
                    f"round {r + 1}: {system}: {runs / result['seconds']:.0f} runs/s, "
                    f"{result['statements'] / runs:.1f} statements/run",
                    file=sys.stderr,
                    flush=True,
                )
    table: dict[str, Any] = {}
    for system, rows in samples.items():
        table[system] = {
            "runs_per_s": summary([runs / row["seconds"] for row in rows]),
            "statements_per_run": summary([row["statements"] / runs for row in rows]),
            "load_before": [row["load_before"] for row in rows],
            "load_after": [row["load_after"] for row in rows],
            "top_statements": rows[-1]["top_statements"],
        }
    ratios = {}
    for (ours, peer), target in TARGETS.items():
        if ours in samples and peer in samples:
            # per round (measured minutes apart at most), then the median of those
            per_round = [
                b["seconds"] / a["seconds"]
                for a, b in zip(samples[ours], samples[peer], strict=True)
            ]
            got = summary(per_round)
            ratios[f"{ours} / {peer}"] = {
                "ratio": round(got["median"], 2),
                "min": round(got["min"], 2),
                "max": round(got["max"], 2),
                "target": target,
            }
    versions = {}
    for package in ("cronwarden", *PEER_PACKAGES):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return {
        "runs": runs,
        "rounds": rounds,
        "systems": table,
        "ratios": ratios,
        "skipped": skipped,
        "versions": versions,
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def double_fire(systems: list[str], runs: int = 50) -> dict[str, Any]:
    """Every window fired twice, the second fire after the first run finished (a scheduler's
    retry, a late redelivery): how many runs the second fires made (0 is once per window), and
    whether any window was lost (fewer runs than windows)."""
    from cronwarden.emulators.postgres import PostgresServer

    out: dict[str, Any] = {}
    with PostgresServer(settings=SERVER_SETTINGS) as server:
        _sql(server.dsn, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        for system in systems:
            if _available(system) is not None:
                continue
            result = _one(server.dsn, system, runs, "double", fires=2)
            out[system] = {"windows": runs, "re_runs": result["done"] - runs, "lost": 0}
            print(f"double fire: {system}: {out[system]}", file=sys.stderr, flush=True)
    return out


FAULT_SYSTEMS = ("cronwarden-queue", "dbos", "pgqueuer", "procrastinate")


def _marks(path: str) -> list[tuple[str, int, float]]:
    try:
        with open(path) as handle:
            rows = [line.split() for line in handle if line.strip()]
    except OSError:
        return []
    return [(what, int(pid), float(at)) for what, pid, at in rows]


def _wait_for(path: str, what: str, count: int, deadline: float) -> bool:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if sum(1 for m in _marks(path) if m[0] == what) >= count:
            return True
        time.sleep(0.05)
    return False


def _worker(system: str, dsn: str, role: str, marks: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.bench.peer_faults", system, dsn, role, marks],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGCONT)
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _fault(server_dsn: str, system: str, fault: str) -> dict[str, Any]:
    """One slow job of one window; its first worker is SIGKILLed (``kill``) or SIGSTOPped
    (``pause``, resumed once a second worker ran it or gave up) in the middle of its run."""
    from .peer_faults import DEADLINE

    name = f"fault_{system.replace('-', '_')}_{fault}"
    _sql(server_dsn, f'CREATE DATABASE "{name}"')
    dsn = _database_dsn(server_dsn, name)
    marks = os.path.join(tempfile.mkdtemp(prefix="cw-peer-faults-"), "marks")
    first = _worker(system, dsn, "first", marks)
    second: subprocess.Popen[bytes] | None = None
    try:
        if not _wait_for(marks, "start", 1, 60):
            raise RuntimeError(f"{system}: the job never started")
        hit = time.time()
        os.killpg(first.pid, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
        second = _worker(system, dsn, "second", marks)
        ended = _wait_for(marks, "end", 1, DEADLINE + 10)
        if fault == "pause":
            os.killpg(first.pid, signal.SIGCONT)
            started = sum(1 for m in _marks(marks) if m[0] == "start")
            _wait_for(marks, "end", started, 15)  # the resumed owner finishes its run
        second.wait(DEADLINE + 30)
        first.wait(DEADLINE + 30) if fault == "pause" else None
    finally:
        for proc in (first, second):
            if proc is not None:
                _stop(proc)
    rows = _marks(marks)
    starts = [m for m in rows if m[0] == "start"]
    ends = [m for m in rows if m[0] == "end"]
    # a paused owner overlaps when another run started before the owner's run ended (it
    # resumes and finishes its handler); a SIGKILLed owner cannot
    owner_end = min((at for _, pid, at in ends if pid == first.pid), default=float("inf"))
    others = [at for _, pid, at in starts if pid != first.pid]
    overlap = fault == "pause" and any(at < owner_end for at in others)
    _sql(server_dsn, f'DROP DATABASE "{name}" WITH (FORCE)')
    return {
        "runs_started": len(starts),
        "runs_finished": len(ends),
        "re_runs": max(0, len(starts) - 1),
        "overlap": overlap,
        "lost": 0 if ends else 1,
        "recovered": ended,
        "outcomes": sorted(m[0].removeprefix("outcome-") for m in rows if m[0][:8] == "outcome-"),
        "recovered_after_s": round(starts[1][2] - hit, 1) if len(starts) > 1 else None,
    }


def faults(systems: list[str]) -> dict[str, Any]:
    """SIGKILL and a paused owner, per system (see :mod:`tests.bench.peer_faults`)."""
    from cronwarden.emulators.postgres import PostgresServer

    out: dict[str, Any] = {}
    with PostgresServer(settings=SERVER_SETTINGS) as server:
        for system in systems:
            if system not in FAULT_SYSTEMS or _available(system) is not None:
                continue
            for fault in ("kill", "pause"):
                try:
                    row = _fault(server.dsn, system, fault)
                except Exception as exc:  # one peer's harness failing must not hide the rest
                    row = {"error": f"{type(exc).__name__}: {exc}"}
                out.setdefault(system, {})[fault] = row
                print(f"{fault}: {system}: {row}", file=sys.stderr, flush=True)
    return out


def _render_faults(table: dict[str, Any]) -> list[str]:
    if not table:
        return []
    lines = [
        "",
        "Faults: one job of one window that holds for 2 s; its worker process is SIGKILLed, "
        "or SIGSTOPped and resumed once a second worker ran the job (or gave up after 30 s), "
        "in the middle of the run; a second worker process starts at once.",
        "",
        "| system | fault | run again (after) | overlap | the resumed owner's result | lost |",
        "|---|---|---|---|---|---|",
    ]
    for system, rows in table.items():
        for fault, row in rows.items():
            if "error" in row:
                lines.append(f"| {system} | {fault} | not measured: {row['error']} | | | |")
                continue
            again = "no"
            if row["re_runs"]:
                again = f"{row['re_runs']} ({row['recovered_after_s']} s)"
            outcomes = row.get("outcomes") or []
            if fault == "kill":
                stale = "-"
            elif system.startswith("cronwarden"):
                stale = "refused (lease_lost)" if "lease_lost" in outcomes else "none"
            else:
                # the handler finished; whether the peer's store took its result: not checked
                stale = (
                    "handler finished (result not checked)" if row["runs_finished"] > 1 else "none"
                )
            lost = "no" if not row["lost"] else "yes (stays running: needs a stalled-jobs task)"
            overlap = "yes" if row["overlap"] else "no"
            lines.append(f"| {system} | {fault} | {again} | {overlap} | {stale} | {lost} |")
    return lines


def render(results: dict[str, Any]) -> str:
    lines = [
        START,
        f"Measured {results['measured_at']} by `nox -s peers` ({results['runs']} windows of a "
        f"trivial job per run, medians of {results['rounds']} interleaved rounds, a fresh "
        "database and process per run, one PostgreSQL 15 server; versions: "
        + ", ".join(f"{k} {v}" for k, v in results["versions"].items())
        + ").",
        "",
        "| system | runs/s (median, min-max) | statements executed per run "
        "| load avg (1 min) before -> after |",
        "|---|---|---|---|",
    ]
    for system, row in results["systems"].items():
        rate, stmts = row["runs_per_s"], row["statements_per_run"]
        loads = ", ".join(
            f"{b[0]:.1f} -> {a[0]:.1f}"
            for b, a in zip(row["load_before"], row["load_after"], strict=True)
        )
        lines.append(
            f"| {system} | {rate['median']:.0f} ({rate['min']:.0f}-{rate['max']:.0f}) "
            f"| {stmts['median']:.1f} | {loads} |"
        )
    if results["ratios"]:
        lines += [
            "",
            "| cronwarden / peer (runs/s, per round) | median (min-max) | target |",
            "|---|---|---|",
        ]
        for name, row in results["ratios"].items():
            mark = "met" if row["ratio"] >= row["target"] else "**not met**"
            lines.append(
                f"| {name} | {row['ratio']:.2f}x ({row['min']:.2f}-{row['max']:.2f}) "
                f"| >= {row['target']}x ({mark}) |"
            )
    double = results.get("double_fire") or {}
    if double:
        lines += [
            "",
            "Double fire: each of "
            f"{next(iter(double.values()))['windows']} windows fired again after its run "
            "finished (a scheduler's retry, a late redelivery).",
            "",
            "| system | runs made by the second fires | windows lost |",
            "|---|---|---|",
        ]
        for system, row in double.items():
            lines.append(f"| {system} | {row['re_runs']} | {row['lost']} |")
    lines += _render_faults(results.get("faults") or {})
    for system, why in results["skipped"].items():
        lines.append(f"\n{system}: not measured: {why}")
    lines.append(END)
    return "\n".join(lines)


PEERS_HEADING = "## Peers on one PostgreSQL server"


def carried(path: str, rendered: str) -> str:
    """``rendered`` (the rest of the bench's page) with the peer section of the page at
    ``path`` kept, before the notes: ``nox -s bench`` does not measure the peers, and must not
    erase what ``nox -s peers`` wrote."""
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError:
        return rendered
    if START not in text or END not in text:
        return rendered
    start = text.index(START)
    head = text.rfind(PEERS_HEADING, 0, start)
    block = text[head if head >= 0 else start : text.index(END) + len(END)]
    notes = rendered.find("## Notes")
    if notes < 0:
        return rendered.rstrip("\n") + "\n\n" + block + "\n"
    return rendered[:notes] + block + "\n\n" + rendered[notes:]


def _write_section(path: str, section: str) -> None:
    with open(path) as handle:
        text = handle.read()
    if START in text and END in text:
        head, _, rest = text.partition(START)
        _, _, tail = rest.partition(END)
        text = head + section + tail
    else:
        text = text.rstrip("\n") + f"\n\n{PEERS_HEADING}\n\n" + section + "\n"
    with open(path, "w") as handle:
        handle.write(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.peers")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--only", nargs="*", choices=SYSTEMS + EXTRA_SYSTEMS, default=list(SYSTEMS))
    parser.add_argument(
        "--no-faults", action="store_true", help="skip the double-fire, SIGKILL and pause runs"
    )
    parser.add_argument("--json", default="bench-peers.json")
    parser.add_argument("--markdown", default="docs/benchmarks.md")
    args = parser.parse_args(argv)
    results = measure(args.only, runs=args.runs, rounds=args.rounds)
    if not args.no_faults:
        results["double_fire"] = double_fire(args.only)
        results["faults"] = faults(args.only)
    with open(args.json, "w") as handle:
        json.dump(results, handle, indent=2)
    section = render(results)
    if args.markdown == "-":
        print(section)
    else:
        _write_section(args.markdown, section)
        print(section)


if __name__ == "__main__":
    main()
