"""What a job module's top level declared, noted in the module's own namespace.

``vars(module)`` holds what the module's names are bound to *in the end*: a job or consumer whose
variable a later definition took (two handlers both named ``handler``, one after the other) is
not among them, and it would vanish without a word. The decorators note every declaration made
at a module's top level (:func:`note`) and :func:`check_held` refuses a module in which one is
held by no top-level name. Declarations made inside a function are not noted (a factory's
result is found where it is bound). The notes live and die with the module's namespace.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import FrameType, ModuleType

from ..model.errors import InvalidJobDefinition

#: the name of the notes in a module's namespace: ``{kind: {name: declared}}``
DECLARED = "__cronwarden_declared__"


def note(kind: str, name: str, declared: object, caller: FrameType) -> None:
    """Note ``declared`` (a ``kind`` named ``name``) when the decorator's ``caller`` is a
    module's top level."""
    if caller.f_code.co_name != "<module>":
        return
    notes = caller.f_globals.setdefault(DECLARED, {})
    if isinstance(notes, dict):
        notes.setdefault(kind, {})[name] = declared


def check_held(module: ModuleType, kind: str, bound: Iterable[object]) -> None:
    """Raise :class:`InvalidJobDefinition` when ``module``'s top level declared a ``kind``
    that no top-level name holds (``bound``: those its names hold), unless one of the same
    name is held (declared again: the later one counts, as before)."""
    notes = vars(module).get(DECLARED)
    declared = notes.get(kind) if isinstance(notes, dict) else None
    if not isinstance(declared, dict):
        return
    held = list(bound)
    names = {getattr(value, "name", None) for value in held}
    for name, value in declared.items():
        if name in names or any(value is h for h in held):
            continue
        function = getattr(getattr(value, "handler", None), "__name__", "?")
        where = getattr(module, "__file__", None) or module.__name__
        raise InvalidJobDefinition(
            f"{kind} {name!r} is declared in {where} but no top-level name holds it any more: "
            f"a later definition took the name {function!r}; give each {kind}'s function a "
            "name of its own"
        )
