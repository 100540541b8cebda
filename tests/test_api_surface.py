"""The library stands under the command line, and shows what docs/api.md documents.

* No module of the library (``fastsubs/*.py``: not the linked folders ``query``,
  ``indexer``, ``bench``) imports the command line (``fastsubs.query``), by an import
  statement anywhere in it (a function's, a TYPE_CHECKING block's) or by a module name
  it hands to ``importlib``: the library and ``fastsubs.dask`` are built on the pipeline,
  and the command line on them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIBRARY = sorted(path for path in (REPO / "fastsubs").glob("*.py") if not path.is_symlink())
#: The command line's modules, by their name under fastsubs (as the folder ``query/`` at the
#: top of the clone is imported: ``fastsubs.query``) or as a top-level name.
COMMAND_LINE = re.compile(r"query(\.\w+)*")


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


def test_the_library_is_every_module_of_fastsubs_but_the_linked_folders() -> None:
    names = {path.name for path in LIBRARY}
    assert {"__init__.py", "index.py", "dask.py", "options.py", "chunks.py"} <= names
    assert (REPO / "fastsubs" / "query").is_symlink() and "query" not in names


@pytest.mark.parametrize("path", LIBRARY, ids=lambda path: path.name)
def test_no_library_module_imports_the_command_line(path: Path) -> None:
    assert command_line_imports(path.read_text()) == []


@pytest.mark.parametrize("line", [
    "import fastsubs.query.run", "from fastsubs.query.run import execute", "from fastsubs.query import cli",
    "from fastsubs import query", "from .query.run import execute", "from . import query", "import query.run",
    "from query.options import QueryOptions", "LOCATIONS = {'x': 'fastsubs.query.options'}",
    "def f():\n    from fastsubs.query.parquet import schema"])
def test_each_way_of_importing_the_command_line_is_seen(line: str) -> None:
    assert len(command_line_imports(line)) >= 1


@pytest.mark.parametrize("line", [
    "import fastsubs.index", "from fastsubs.options import QueryOptions", "from fastsubs import queries",
    "import querystring", "'''see :mod:`fastsubs.query.cluster`'''", "x = 'query'"])
def test_what_is_not_the_command_line_is_not_flagged(line: str) -> None:
    assert command_line_imports(line) == []
