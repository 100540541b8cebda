"""What the two tests of layers share (the C kernel's files, tests/test_kernel_layers.py; the
package's Python modules, tests/test_module_layers.py): a circle in a graph of
dependencies, the dependencies that run upward, and the layers docs/development.md draws.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

DEVELOPMENT = Path(__file__).resolve().parents[1] / "docs" / "development.md"


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of the graph as its nodes in order (the first one again at the end), or None."""
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for after in sorted(graph.get(node, ())):
            if state.get(after) == 1:
                return path[path.index(after):] + [after]
            if after not in state and (circle := walk(after)):
                return circle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (circle := walk(node)):
            return circle
    return None


def upward(graph: dict[str, set[str]], layers: list[tuple[str, list[str]]],
           layer_of: Callable[[str], int | None]) -> list[str]:
    """Every dependency on a node of a higher layer (``layer_of`` gives a node's rank in
    ``layers``, or None: a node of no layer, not checked), as "node (layer) -> node (layer)"."""
    names = [name for name, _ in layers]
    found = []
    for node, uses in sorted(graph.items()):
        for used in sorted(uses):
            below, above = layer_of(node), layer_of(used)
            if below is not None and above is not None and above > below:
                found.append(f"{node} ({names[below]}) -> {used} ({names[above]})")
    return found


def documented_layers(title: str) -> list[str]:
    """The layers docs/development.md's section ``title`` draws, in its table's order."""
    section = DEVELOPMENT.read_text().split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| ")]
    return rows[1:]  # rows[0]: the table's head
