"""``nox -s bench`` / ``python -m tests.bench``: cost per run, ledger throughput, trigger latency,
cold start, watcher scaling and broker throughput, each measured against a baseline in the same
run, written as JSON and as the markdown table in ``docs/benchmarks.md``.

Modules: :mod:`.costs` (round trips), :mod:`.ledger`, :mod:`.latency`, :mod:`.coldstart`,
:mod:`.liveness`, :mod:`.brokers`; :mod:`.emulators` starts and stops every emulator used,
:mod:`.machine` describes the machine, :mod:`.report` renders the markdown.
"""
