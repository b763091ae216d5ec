"""Deprecated location of the pull workers: they run on any provider and live in
:mod:`cronwarden.hosting.pull` now. ``python -m cronwarden.adapters.gcp.serve`` keeps working.
"""

from __future__ import annotations

from cronwarden.hosting.pull import PullWorkers
from cronwarden.hosting.pull import main as _main


def main(argv: list[str] | None = None) -> None:
    _main(argv, prog="python -m cronwarden.adapters.gcp.serve")


__all__ = ["PullWorkers", "main"]

if __name__ == "__main__":
    main()
