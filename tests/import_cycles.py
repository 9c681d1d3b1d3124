"""Fail when modules under a package import each other in a circle (`make lint`).

Every import counts, those inside functions too (a lazy import hides a circle, it does not remove it),
except those under `if TYPE_CHECKING:`, which never run.  The graph is grimp's; its strongly connected
components of more than one module are the circles, printed with the imports that close them.

    python tests/import_cycles.py [package ...]      # default: evalsuite
"""

from __future__ import annotations

import sys

import grimp


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The graph's strongly connected components of two or more modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main(packages: list[str]) -> int:
    """Print each circle with its imports; 1 when there is any."""
    graph = grimp.build_graph(*packages, exclude_type_checking_imports=True, cache_dir=None)
    found = circles(graph)
    for component in found:
        members = set(component)
        print(f"import circle of {len(component)} modules: {', '.join(component)}")
        for importer in component:
            for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
                lines = [d["line_number"] for d in graph.get_import_details(importer=importer, imported=imported)]
                print(f"    {importer} -> {imported} (line {', '.join(map(str, lines))})")
    if not found:
        print(f"no import circles in {', '.join(packages)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["evalsuite"]))
