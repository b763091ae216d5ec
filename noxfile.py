"""Developer and CI sessions.

``tests`` builds the wheel and runs the suite against the *installed wheel*, so CI proves that
the packaging (the ``core/`` → ``cronwarden`` mapping) works, not only an editable checkout.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"
TEST_EXTRAS = "dev,gcp,azure,aws,emulators,postgres"


def _build_wheel(session: nox.Session) -> str:
    out = tempfile.mkdtemp(prefix="cronwarden-wheel-")
    session.run("python", "-m", "build", "--wheel", "--outdir", out, silent=True)
    wheels = glob.glob(os.path.join(out, "cronwarden-*.whl"))
    if len(wheels) != 1:
        session.error(f"expected one wheel in {out}, found {wheels}")
    return wheels[0]


def _install_wheel(session: nox.Session, extras: str) -> None:
    session.install("build")
    wheel = _build_wheel(session)
    session.install("--force-reinstall", "--no-deps", wheel)
    session.install(f"{wheel}[{extras}]")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite, against the built wheel (also proves the wheel imports cleanly)."""
    _install_wheel(session, TEST_EXTRAS)
    # Run from a neutral directory so nothing can import the source folders by accident.
    session.run(
        "python",
        "-c",
        "import cronwarden, cronwarden.adapters.local, cronwarden.emulators, sys;"
        "assert 'site-packages' in cronwarden.__file__, cronwarden.__file__;"
        "print('wheel ok:', cronwarden.__file__)",
    )
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def chaos(session: nox.Session) -> None:
    """The reliability harness at full size on every provider stack (tests/chaos); writes
    docs/chaos-report.md and the JSON report ($CW_CHAOS_REPORT, default chaos-report.json)."""
    _install_wheel(session, TEST_EXTRAS)
    env = {
        "CW_CHAOS": "full",
        "CW_CHAOS_REPORT": os.environ.get("CW_CHAOS_REPORT", "chaos-report.json"),
        "CW_CHAOS_REPORT_MD": os.environ.get("CW_CHAOS_REPORT_MD", "docs/chaos-report.md"),
    }
    session.run("pytest", "tests/chaos", "-m", "chaos", *session.posargs, env=env)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (lint and formatting), then the architecture: import-linter's contracts
    (``[tool.importlinter]`` in pyproject.toml: the core's layers, the faces apart, no adapter
    in the core, no import circle) over the installed wheel, where adapters/, emulators/ and
    deployments/ sit inside the ``cronwarden`` package as users get it."""
    session.install("ruff>=0.6", "import-linter>=2.1")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.install("build")
    session.install("--force-reinstall", "--no-deps", _build_wheel(session))
    session.run("lint-imports", "--no-cache")


@nox.session(python=PYTHON)
def types(session: nox.Session) -> None:
    """mypy --strict over the installed package (core, adapters, emulators)."""
    _install_wheel(session, TEST_EXTRAS)
    session.run("mypy", "-p", "cronwarden")


@nox.session(python=PYTHON)
def editable(session: nox.Session) -> None:
    """The README's install path: an editable install imports and runs the example."""
    session.install("-e", ".")
    tmp = tempfile.mkdtemp(prefix="cronwarden-editable-")
    try:
        session.run(
            "cronwarden",
            "run",
            "--jobs",
            "examples/nightly_export.py",
            "--once",
            env={"CRONWARDEN_LOCAL_PATH": os.path.join(tmp, "state.db")},
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks against the installed wheel, on the emulators: writes docs/benchmarks.md and
    bench-results.json (paths: --json / --markdown after ``--``; ``--quick`` to try it out)."""
    _install_wheel(session, TEST_EXTRAS)
    session.install("aws-lambda-powertools>=3,<4")  # bench only: Powertools side by side
    session.run("python", "-m", "tests.bench", *session.posargs)


#: the peers ``nox -s peers`` compares against: benchmark-only, never cronwarden's dependencies
PEERS = ("dbos>=2,<4", "pgqueuer>=0.20,<2", "procrastinate>=3,<4")


@nox.session(python=PYTHON)
def peers(session: nox.Session) -> None:
    """cronwarden beside DBOS, PgQueuer and procrastinate on one private PostgreSQL server
    (tests/bench/peers.py): runs/s and statements executed per run, interleaved rounds, a
    fresh database and process per run; writes the peer section of docs/benchmarks.md and
    bench-peers.json (``-- --runs N --rounds N --only ...``). Powertools on moto is the
    ``powertools`` section of ``nox -s bench``."""
    _install_wheel(session, "postgres")
    session.install(*PEERS)
    session.run("python", "-m", "tests.bench.peers", *session.posargs)


@nox.session(name="deploy_check", python=PYTHON)
def deploy_check(session: nox.Session) -> None:
    """checkov (offline) over the rendered example deployments, with cronwarden's dead-letter
    policies. Own session: checkov pins packaging<24 and ships its own `hcl2` module, neither of
    which can share the test virtualenv (python-hcl2, pytest 9)."""
    session.install("build")
    session.install(_build_wheel(session), "checkov>=3.2")  # no extras: no python-hcl2 here
    session.run("python", "tests/deploy/run_checkov.py")
