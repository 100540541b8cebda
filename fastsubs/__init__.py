"""fastsubs: the exact K most likely lexical substitutes of every word, from an n-gram model.

Public API (see :mod:`fastsubs.index`)::

    fastsubs.build_index(model_path, index_path=None, force=False)
    with fastsubs.open_index(index_path) as index:
        index.sentence(tokens, n=10)        # one list of Substitute per position
    fastsubs.QueryOptions(n=100, no_eos=True, format="jsonl", exclude=["</s>"])   # fastsubs-query's options
    fastsubs.field_bytes(json_object, "word")   # the exact input bytes of a --format jsonl text field

Pipelines on Dask: :mod:`fastsubs.dask`.

Names are loaded on first use, so importing ``fastsubs`` (and starting the command-line
tools) costs next to nothing.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any


def _hand_over_to_the_installed_copy() -> None:
    """When this file is the clone's ``fastsubs/`` imported in place of an installed
    ``fastsubs``, make the installed one what ``import fastsubs`` gives (the usual case,
    no clone, is decided by one ``stat``).

    In the clone, ``fastsubs/``, ``query/``, ``indexer/`` and ``bench/`` are sibling
    folders; an install maps the last three into the package as ``fastsubs.query``,
    ``fastsubs.indexer`` and ``fastsubs.bench`` (pyproject.toml's package-dir), and builds
    the C kernel into it.  Python started in the clone's root puts that directory first on
    ``sys.path``, so ``import fastsubs`` finds the clone's folder, which has neither the
    subpackages nor the kernel: after ``pip install .``, ``fastsubs.open_index`` failed
    there with ``No module named 'fastsubs.query'``.  So the clone's copy (recognised by
    the clone's pyproject.toml beside it) looks for another ``fastsubs`` on the rest of
    ``sys.path`` and, if there is one, loads it in its place: the user gets the package they
    installed, whole, and no mix of the clone's Python files with another build's kernel.
    An editable install (``make``) leaves no other copy on ``sys.path`` (its import hook
    maps the subpackages to the clone's folders), so the clone's copy stays and is the one
    meant.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    if not os.path.isfile(os.path.join(root, "pyproject.toml")):
        return
    import importlib.machinery
    import importlib.util

    elsewhere = [entry for entry in sys.path if os.path.realpath(entry or os.curdir) != os.path.realpath(root)]
    spec = importlib.machinery.PathFinder.find_spec(__name__, elsewhere)
    if spec is None or spec.loader is None or spec.origin is None or os.path.samefile(spec.origin, __file__):
        return
    installed = importlib.util.module_from_spec(spec)
    sys.modules[__name__] = installed  # what ``import fastsubs`` returns, and what its submodules belong to
    spec.loader.exec_module(installed)


# After a hand-over, the rest of this file only fills in the module object that the import
# drops (its imports are the installed package's, already loaded).
_hand_over_to_the_installed_copy()

__version__ = "0.2.0"

__all__ = [
    "build_index", "open_index", "SubstituteIndex", "Substitute", "BuildSummary", "QueryOptions", "field_bytes",
    "FastsubsError", "ModelFormatError", "NotAnIndexError", "IndexVersionError",
    "DamagedIndexError", "IndexExistsError", "TargetNotAnIndexError", "BuildCheckError", "QueryInputError",
    "ArgumentError", "OutputError", "ResumeError",
]

_LOCATIONS = {
    "build_index": "fastsubs.indexer.build",
    "BuildSummary": "fastsubs.indexer.build",
    "open_index": "fastsubs.index",
    "SubstituteIndex": "fastsubs.index",
    "Substitute": "fastsubs.index",
    "QueryOptions": "fastsubs.query.options",
    "field_bytes": "fastsubs.jsonl",
}

if TYPE_CHECKING:
    from fastsubs.index import Substitute, SubstituteIndex, open_index
    from fastsubs.indexer.build import BuildSummary, build_index
    from fastsubs.jsonl import field_bytes
    from fastsubs.query.options import QueryOptions

from fastsubs.errors import (  # noqa: E402  (light: plain exception classes)
    ArgumentError,
    BuildCheckError,
    DamagedIndexError,
    FastsubsError,
    IndexExistsError,
    IndexVersionError,
    ModelFormatError,
    NotAnIndexError,
    OutputError,
    QueryInputError,
    ResumeError,
    TargetNotAnIndexError,
)


def __getattr__(name: str) -> Any:
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'fastsubs' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
