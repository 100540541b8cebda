"""Where the clone holds the package's modules: ``fastsubs/``, and the folders that
pyproject.toml's ``package-dir`` installs into it (``indexer/`` as ``fastsubs.indexer``, ...),
each module under its one name, the installed one (docs/development.md, "Layout").
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest's and mypy's own reader of TOML on Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def setuptools_table() -> dict:
    """pyproject.toml's ``[tool.setuptools]``."""
    table: dict = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    return table


def package_folders() -> dict[str, Path]:
    """``fastsubs`` and each package that lies elsewhere than its name says, with its folder."""
    mapped = setuptools_table()["package-dir"]
    return {"fastsubs": REPO / "fastsubs", **{name: REPO / folder for name, folder in mapped.items()}}


def modules() -> dict[str, Path]:
    """Every module of the package by its installed name (``fastsubs.indexer.build``; a
    package by its own, ``fastsubs.indexer`` for ``indexer/__init__.py``), with its file."""
    found = {}
    for package, folder in package_folders().items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            found[".".join((package, *parts)).removesuffix(".__init__")] = path
    return found
