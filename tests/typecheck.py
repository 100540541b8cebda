"""mypy on every module of the package under its installed name (``make lint``).

``indexer/``, ``query/`` and ``bench/`` become ``fastsubs.indexer``, ``fastsubs.query`` and
``fastsubs.bench`` when installed (pyproject.toml's ``package-dir``).  mypy, given those
folders, would call their modules ``indexer.build``, ... and could not follow an import of
``fastsubs.indexer.build`` to them (it finds modules by folder, not through setuptools'
editable finder).  So each module is handed to mypy's build with its file and its installed
name (:func:`package_layout.modules`); the options (pyproject.toml's, and any given here)
and the messages are mypy's own.

    .venv/bin/python tests/typecheck.py [MYPY OPTIONS]
"""

from __future__ import annotations

import os
import sys

from mypy.build import BuildSource, build
from mypy.errors import CompileError
from mypy.main import process_options

from package_layout import modules


def main() -> int:
    _, options = process_options(sys.argv[1:], require_targets=False)
    found = modules()
    sources = [BuildSource(os.path.relpath(path), name) for name, path in found.items()]
    try:
        messages = build(sources, options).errors
    except CompileError as error:  # a module mypy cannot read (a syntax error)
        messages = error.messages
    for message in messages:
        print(message)
    if messages:
        print(f"Found errors (checked {len(found)} source files)")
        return 1
    print(f"Success: no issues found in {len(found)} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
