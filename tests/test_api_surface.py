"""The library stands under the command line, and shows what docs/api.md documents.

* No module of the library (``fastsubs/``: not ``fastsubs/cli/``, what the three
  command-line tools share, nor the folders ``query/``, ``indexer/``, ``bench/`` beside
  ``fastsubs/``) imports the command line (``fastsubs.query``, ``fastsubs.cli``), by an import
  statement anywhere in it (a function's, a TYPE_CHECKING block's) or by a module name
  it hands to ``importlib``: the library and ``fastsubs.dask`` are built on the pipeline,
  and the command line on them.
* :class:`fastsubs.SubstituteIndex` shows what docs/api.md's reference documents of it,
  and no more: its public names (no leading underscore), on the class and on an open
  index, are the names the reference's rows give it.  The core's own methods stay behind
  it (:mod:`fastsubs.core`); a name added on either side alone fails.  So for the
  functions ``fastsubs.dask`` exports.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import fastsubs
from fastsubs.index import SubstituteIndex

REPO = Path(__file__).resolve().parents[1]
LIBRARY = sorted(path for path in (REPO / "fastsubs").rglob("*.py") if REPO / "fastsubs" / "cli" not in path.parents)
#: The command line's modules, by their name under fastsubs (``fastsubs.cli``, and
#: ``fastsubs.query`` as the folder ``query/`` at the top of the clone is installed) or as a
#: top-level name.
COMMAND_LINE = re.compile(r"(query|cli)(\.\w+)*")


def command_line_imports(source: str) -> list[str]:
    """What ``source`` imports of the command line: modules of its import statements, the
    names ``from fastsubs import query`` takes, and string constants that name one of its
    modules (for ``importlib.import_module``), each as ``line: name``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: within fastsubs/
                module = ".".join(filter(None, ["fastsubs", module]))
            names = [module] + [f"{module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("fastsubs."):
            names = [node.value]
        found += [f"{node.lineno}: {name}" for name in names if COMMAND_LINE.fullmatch(name.removeprefix("fastsubs."))]
    return found


def test_the_library_is_every_module_of_fastsubs_but_the_command_lines() -> None:
    names = {path.relative_to(REPO / "fastsubs").as_posix() for path in LIBRARY}
    assert {"__init__.py", "index.py", "dask.py", "options.py", "pipeline/chunks.py", "pipeline/workers.py"} <= names
    assert not (REPO / "fastsubs" / "query").exists() and "cli/support.py" not in names


@pytest.mark.parametrize("path", LIBRARY, ids=lambda path: path.relative_to(REPO / "fastsubs").as_posix())
def test_no_library_module_imports_the_command_line(path: Path) -> None:
    assert command_line_imports(path.read_text()) == []


@pytest.mark.parametrize("line", [
    "import fastsubs.query.run", "from fastsubs.query.run import execute", "from fastsubs.query import cli",
    "from fastsubs import query", "from .query.run import execute", "from . import query", "import query.run",
    "from query.options import QueryOptions", "LOCATIONS = {'x': 'fastsubs.query.options'}",
    "def f():\n    from fastsubs.query.parquet import schema", "from fastsubs.cli.support import version_option",
    "from fastsubs import cli", "from .cli.support import run_reporting_errors", "import fastsubs.cli"])
def test_each_way_of_importing_the_command_line_is_seen(line: str) -> None:
    assert len(command_line_imports(line)) >= 1


@pytest.mark.parametrize("line", [
    "import fastsubs.index", "from fastsubs.options import QueryOptions", "from fastsubs import queries",
    "import querystring", "'''see :mod:`fastsubs.query.cluster`'''", "x = 'query'",
    "from fastsubs.pipeline.processes import signals_held", "import click"])
def test_what_is_not_the_command_line_is_not_flagged(line: str) -> None:
    assert command_line_imports(line) == []


def documented_names(api: str) -> set[str]:
    """The names docs/api.md's reference gives SubstituteIndex: in each row that names it, every
    ``SubstituteIndex.NAME`` or ``.NAME`` in code in the row's first cell."""
    reference = api[api.index("## API reference"):]
    names = set()
    for row in reference.splitlines():
        cells = row.split(" | ")
        if row.startswith("| ") and "SubstituteIndex." in cells[0]:
            for code in re.findall(r"`([^`]*)`", cells[0]):
                named = re.match(r"(?:SubstituteIndex)?\.(\w+)", code)
                if named:
                    names.add(named.group(1))
    return names


def public_names(thing: object) -> set[str]:
    return {name for name in dir(thing) if not name.startswith("_")}


def test_the_open_index_shows_what_the_reference_documents(demo_index: Path) -> None:
    documented = documented_names((REPO / "docs" / "api.md").read_text())
    assert {"position", "sentence", "batch", "order", "close"} <= documented  # the rows were read
    assert public_names(SubstituteIndex) == documented
    with fastsubs.open_index(demo_index) as index:
        assert public_names(index) == documented
        assert hasattr(index, "__enter__") and hasattr(index, "__exit__")  # "context manager"


def test_fastsubs_dask_exports_what_the_reference_documents() -> None:
    import fastsubs.dask

    reference = (REPO / "docs" / "api.md").read_text().split("## API reference")[1]
    documented = set(re.findall(r"^\| `fastsubs\.dask\.(\w+)\(", reference, re.MULTILINE))
    assert documented == set(fastsubs.dask.__all__) == {"substitutes_bag", "to_textfiles", "substitutes_frame",
                                                         "to_parquet"}


def test_the_reference_is_read_row_by_row() -> None:
    api = """## API reference

| name | what it does |
|---|---|
| `open_index(path) -> SubstituteIndex` | open |
| `SubstituteIndex.position(tokens, position) -> list[Substitute]` | one |
| `SubstituteIndex.order`, `.vocab_size`, `.close()`, context manager | sizes |
| `Batch(ids, scores)` | a named tuple; see `SubstituteIndex.batch` |
"""
    assert documented_names(api) == {"position", "order", "vocab_size", "close"}
