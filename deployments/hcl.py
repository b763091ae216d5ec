"""A small HCL writer whose output is already in ``terraform fmt`` style.

Values: ``str`` (a quoted string, ``${`` and ``%{`` escaped), ``bool``, ``int``, ``float``,
:class:`Expr` (raw expression text, e.g. ``var.project``), ``list`` and ``dict`` (objects).
Bodies are lists of :class:`Attr`, :class:`Block` and :data:`BLANK`.

The layout rules copied from ``terraform fmt``: two-space indentation; the ``=`` of a run of
consecutive single-line attributes is aligned; a multi-line attribute, a block or a blank line
ends the run. The deploy tests run ``terraform fmt -check`` on everything rendered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Expr:
    """Raw HCL expression text, written as is."""

    text: str


@dataclass(frozen=True)
class Attr:
    name: str
    value: Any


@dataclass(frozen=True)
class Comment:
    text: str


@dataclass(frozen=True)
class Block:
    type: str
    labels: tuple[str, ...] = ()
    body: Sequence[Item] = field(default_factory=tuple)


class _Blank:
    pass


BLANK = _Blank()
Item = Attr | Block | Comment | _Blank


def string(text: str) -> str:
    """``text`` as an HCL quoted string (template sequences escaped)."""
    quoted = json.dumps(text, ensure_ascii=False)
    return quoted.replace("${", "$${").replace("%{", "%%{")


def _key(name: str) -> str:
    return name if _IDENT.match(name) else string(name)


def _scalar(value: Any) -> str | None:
    if isinstance(value, Expr):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return string(value)
    if value is None:
        return "null"
    return None


def _value_lines(value: Any, indent: int) -> list[str]:
    """``value`` as lines; the first line has no indentation (it follows ``name = ``)."""
    scalar = _scalar(value)
    if scalar is not None:
        return [scalar]
    pad = "  " * (indent + 1)
    if isinstance(value, Mapping):
        if not value:
            return ["{}"]
        inner = _body_lines([Attr(str(k), v) for k, v in value.items()], indent + 1, keys=True)
        return ["{", *inner, "  " * indent + "}"]
    if isinstance(value, Sequence):
        items = [_value_lines(v, indent + 1) for v in value]
        if not items:
            return ["[]"]
        if all(len(lines) == 1 for lines in items):
            one = "[" + ", ".join(lines[0] for lines in items) + "]"
            if len(one) + indent * 2 < 100:
                return [one]
        out = ["["]
        for lines in items:
            out.append(pad + lines[0])
            out.extend(lines[1:])
            out[-1] += ","
        out.append("  " * indent + "]")
        return out
    raise TypeError(f"cannot write {type(value).__name__} as HCL")


def _body_lines(items: Sequence[Item], indent: int, *, keys: bool = False) -> list[str]:
    pad = "  " * indent
    out: list[str] = []
    run: list[tuple[str, str]] = []

    def flush() -> None:
        width = max((len(k) for k, _ in run), default=0)
        out.extend(f"{pad}{k.ljust(width)} = {v}" for k, v in run)
        run.clear()

    for item in items:
        if isinstance(item, Attr):
            name = _key(item.name) if keys else item.name
            lines = _value_lines(item.value, indent)
            if len(lines) == 1:
                run.append((name, lines[0]))
                continue
            flush()
            out.append(f"{pad}{name} = {lines[0]}")
            out.extend(lines[1:])
        elif isinstance(item, Block):
            flush()
            out.extend(_block_lines(item, indent))
        elif isinstance(item, Comment):
            flush()
            out.extend(f"{pad}# {line}".rstrip() for line in item.text.splitlines())
        else:
            flush()
            out.append("")
    flush()
    return out


def _block_lines(block: Block, indent: int) -> list[str]:
    pad = "  " * indent
    head = " ".join([block.type, *(string(label) for label in block.labels)])
    if not block.body:
        return [f"{pad}{head} {{}}"]
    return [f"{pad}{head} {{", *_body_lines(block.body, indent + 1), f"{pad}}}"]


def render(items: Sequence[Item]) -> str:
    """A whole file: top-level blocks separated by one blank line, ending with a newline."""
    chunks: list[str] = []
    for item in items:
        if isinstance(item, Block):
            chunks.append("\n".join(_block_lines(item, 0)))
        elif isinstance(item, Comment):
            chunks.append("\n".join(f"# {line}".rstrip() for line in item.text.splitlines()))
        elif isinstance(item, Attr):
            chunks.append("\n".join(_body_lines([item], 0)))
    text = ""
    for i, chunk in enumerate(chunks):
        if i:
            glue_comment = isinstance(items[i - 1], Comment)
            text += "\n" if glue_comment else "\n\n"
        text += chunk
    return text + "\n"


__all__ = ["BLANK", "Attr", "Block", "Comment", "Expr", "Item", "render", "string"]
