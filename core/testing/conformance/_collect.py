"""How the contract tests become reusable test classes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


@contextmanager
def opened(made: AbstractContextManager[T] | T) -> Iterator[T]:
    """What a factory made, ready for one test: a context manager is entered (and exited after
    the test); anything else is used as it is and closed after the test."""
    if isinstance(made, AbstractContextManager):
        with made as value:
            yield value
        return
    try:
        yield made
    finally:
        close: Callable[[], None] | None = getattr(made, "close", None)
        if close is not None:
            close()


def attach_tests(contract: type, namespace: Mapping[str, Any]) -> None:
    """Make every ``test_*`` function of ``namespace`` a test of ``contract``.

    The contract tests are written as plain functions of a ``store`` / ``queue`` fixture; as
    static methods of the class, pytest runs them for every subclass, with the class's
    fixture (built from the subclass's factory).
    """
    for name, value in namespace.items():
        if name.startswith("test_") and callable(value):
            setattr(contract, name, staticmethod(value))


__all__ = ["attach_tests", "opened"]
