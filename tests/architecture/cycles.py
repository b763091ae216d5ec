"""Import circles in the installed ``cronwarden`` package, counted the way import-linter sees
imports (function-level imports included; imports under ``if TYPE_CHECKING:`` left out).

``python -m tests.architecture.cycles`` prints each circle (a strongly connected component of
the module import graph) and exits 1 if there is any; :class:`AcyclicContract` is the same check
as an import-linter contract (``[tool.importlinter]`` in ``pyproject.toml``, ``nox -s lint``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

import grimp
from importlinter import Contract, ContractCheck, fields, output


def circles(imports: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself),
    each sorted, largest first (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(imports.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in imports.get(node, ()):
                    found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def graph_imports(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


class AcyclicContract(Contract):
    """No import circle among the modules of ``containers`` (all of them by default)."""

    containers = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        roots = [str(c) for c in (self.containers or [])]  # type: ignore[attr-defined]
        imports = {
            m: {
                t
                for t in targets
                if not roots or any(t == r or t.startswith(r + ".") for r in roots)
            }
            for m, targets in graph_imports(graph).items()
            if not roots or any(m == r or m.startswith(r + ".") for r in roots)
        }
        found = circles(imports)
        return ContractCheck(kept=not found, metadata={"circles": found})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for circle in check.metadata["circles"]:
            output.print_error(f"{len(circle)} modules in a circle: {', '.join(circle)}")
            output.new_line()


def main(argv: list[str]) -> int:
    package = argv[0] if argv else "cronwarden"
    graph = grimp.build_graph(package, exclude_type_checking_imports=True, cache_dir=None)
    found = circles(graph_imports(graph))
    for circle in found:
        print(f"{len(circle)}: {' '.join(circle)}")
    modules = sum(len(c) for c in found)
    print(f"{len(found)} import circle(s), {modules} module(s) in them")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
