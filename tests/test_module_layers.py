"""The package's Python modules form layers whose imports all run downward, with no circle.

Read from the files themselves (every module of ``fastsubs/``, ``indexer/``, ``query/`` and
``bench/``, under its installed name: :mod:`package_layout`): a module depends on each
module of the package that it imports, wherever the import is (at the top, in a function,
in a ``TYPE_CHECKING`` block), and on each module a string of it names in full (a name for
``importlib``, as ``fastsubs.__getattr__`` loads its exports).  A circle (``core.py``
importing ``parquet.py`` for a cache, which imported ``core.py``) makes two modules one:
neither can be read, tested or imported without the other.  LAYERS is the order
docs/development.md draws ("The package's layers"): a module may import its own layer and
those below, never one above, and a new module must be given its place.  The C kernel's
own layers: tests/test_kernel_layers.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import layers
from layers import find_circle
from package_layout import modules

# Lowest first: each layer may use itself and what is below it.  A name ending in ".*"
# places every module below that package; a module's own name places it before any.
LAYERS = [
    ("contract", ["fastsubs.format", "fastsubs.errors", "fastsubs.origin"]),
    ("core", ["fastsubs.core", "fastsubs.limits", "fastsubs.tokens", "fastsubs.stats"]),
    ("options", ["fastsubs.options"]),
    ("pipeline", ["fastsubs.pipeline", "fastsubs.pipeline.*"]),
    ("library", ["fastsubs", "fastsubs.index", "fastsubs.dask", "fastsubs.jsonl", "fastsubs.indexer",
                 "fastsubs.indexer.*"]),
    ("command line", ["fastsubs.cli", "fastsubs.cli.*", "fastsubs.query", "fastsubs.query.*", "fastsubs.indexer.cli",
                      "fastsubs.bench", "fastsubs.bench.*"]),
]


def layer_of(name: str) -> int | None:
    """The rank of ``name``'s layer in LAYERS, or None where none places it."""
    placed = {pattern: rank for rank, (_, patterns) in enumerate(LAYERS) for pattern in patterns}
    if name in placed:
        return placed[name]
    packages = [pattern for pattern in placed if pattern.endswith(".*") and name.startswith(pattern[:-1])]
    return placed[max(packages, key=len)] if packages else None


def imported(name: str, source: str, known: set[str], package: bool) -> set[str]:
    """The modules of ``known`` that module ``name`` (a package's ``__init__`` where
    ``package``), whose code is ``source``, imports or names in a string."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, one level up for each dot past the first
                parts = name.split(".") if package else name.split(".")[:-1]
                base = ".".join(filter(None, [*parts[:len(parts) - node.level + 1], base]))
            # from fastsubs import format: the module fastsubs.format; from fastsubs.core import Core: fastsubs.core
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("fastsubs."):
            found.add(node.value)
    return (found & known) - {name}


def dependencies(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """What each module (by name: its code, whether it is a package) imports of the others."""
    return {name: imported(name, source, set(sources), package) for name, (source, package) in sources.items()}


def package_sources(found: dict[str, Path]) -> dict[str, tuple[str, bool]]:
    return {name: (path.read_text(), path.name == "__init__.py") for name, path in found.items()}


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module of a higher layer, as "module (layer) -> module (layer)"."""
    return layers.upward(graph, LAYERS, layer_of)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return dependencies(package_sources(modules()))


def test_every_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    assert len(graph) > 50 and "fastsubs.indexer.build" in graph and "fastsubs.pipeline.chunks" in graph
    unplaced = sorted(name for name in graph if layer_of(name) is None)
    assert not unplaced, f"modules missing from LAYERS: {unplaced}"
    named = {pattern.removesuffix(".*") for _, patterns in LAYERS for pattern in patterns}
    assert sorted(named - set(graph)) == [], "LAYERS names modules the package does not hold"


def test_no_circle(graph: dict[str, set[str]]) -> None:
    circle = find_circle(graph)
    assert circle is None, "the package's modules import each other in a circle: " + " -> ".join(circle)


def test_imports_run_downward(graph: dict[str, set[str]]) -> None:
    assert upward(graph) == []


def test_the_reading_finds_what_it_checks(graph: dict[str, set[str]]) -> None:
    """The reader sees the imports the modules have, wherever they are and however written.

    Read on the modules' code with one import added each way the checks must see it, so
    that a reading that finds nothing cannot pass them."""
    assert "fastsubs.format" in graph["fastsubs.core"]  # from fastsubs import format as fmt: the module
    assert "fastsubs.pipeline.arrow" in graph["fastsubs.index"]  # in a method
    assert "fastsubs.pipeline.parquet" in graph["fastsubs.pipeline.chunks"]  # in a TYPE_CHECKING block
    assert "fastsubs.indexer.build" in graph["fastsubs"]  # named in a string for importlib, and imported
    assert "fastsubs" not in graph["fastsubs.indexer.build"]  # a dict's key "fastsubs" is no import
    sources = package_sources(modules())
    planted = [
        ("fastsubs.core", "def f():\n    from fastsubs.pipeline.parquet import Vocabulary\n", upward),
        ("fastsubs.core", "def f():\n    from fastsubs.pipeline.parquet import Vocabulary\n", find_circle),
        ("fastsubs.stats", "if TYPE_CHECKING:\n    from fastsubs.core import Rendered\n", find_circle),  # one layer
        ("fastsubs.limits", "from . import options\n", upward),  # relative
        ("fastsubs.pipeline.parts", "from ..query import output_files\n", upward),  # relative, two levels
        ("fastsubs.errors", "import fastsubs.cli.support\n", upward),
        ("fastsubs.tokens", "LOADED = importlib.import_module('fastsubs.index')\n", upward),
        ("fastsubs.dask", "from fastsubs import query\n", upward),
    ]
    for module, line, check in planted:
        source, package = sources[module]
        changed = {**sources, module: (source + line, package)}
        assert check(dependencies(changed)), f"{module}: {line.strip()} went unseen by {check.__name__}"


def test_the_documented_layers_are_these() -> None:
    """docs/development.md draws the same layers in the same order."""
    assert layers.documented_layers("The package's layers") == [name for name, _ in LAYERS]
