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

import importlib.machinery
import os
from typing import TYPE_CHECKING, Any

# Python started in the clone's root imports the clone's fastsubs/ whatever is installed (the
# current directory leads sys.path). That folder is what make's editable install imports
# (docs/development.md, "Layout"), but has no C kernel until one is built in place: then say
# what to do, in one line.
if importlib.machinery.PathFinder.find_spec(f"{__name__}._kernel", __path__) is None:
    raise ImportError(f"{os.path.dirname(__path__[0])} is fastsubs's source tree, without its compiled kernel: "
                      "start Python outside it to import an installed fastsubs, or build the kernel here (make demo)")

from fastsubs.origin import VERSION as __version__  # noqa: E402, F401  (written once, in origin.py)

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
    "QueryOptions": "fastsubs.options",
    "field_bytes": "fastsubs.jsonl",
}

if TYPE_CHECKING:
    from fastsubs.index import Substitute, SubstituteIndex, open_index
    from fastsubs.indexer.build import BuildSummary, build_index
    from fastsubs.jsonl import field_bytes
    from fastsubs.options import QueryOptions

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
    return getattr(importlib.import_module(module), name)
