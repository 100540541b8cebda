"""The on-disk index format, as Python reads it from the core: spelled nowhere here.

``kernel/format.h`` is the format's one definition: every constant of it, once, in lists
that the core exports (``fastsubs._kernel.FORMAT``), so that ``fmt.NO_WORD``,
``fmt.H_VALUE_BOUND`` or ``fmt.PATTERN`` here are format.h's ``FS_NO_WORD``,
``FS_H_VALUE_BOUND`` and ``FS_PATTERN`` as the core was compiled with them; its rules
(widths, lengths, a pattern's layout) are format.h's functions.  ``kernel/codec.c`` makes
and parses every byte of an index: the indexer hands it sorted n-grams and gets records
back (:func:`encode_patterns`), and the tests and tools take single records and headers
apart and put them together with it (:func:`decode_record`, :func:`encode_record`,
:func:`decode_header`, :func:`encode_header`).  docs/index-format.md describes the layout in
prose.

What this module adds is Python's view of those lists: the arrays' numpy dtypes and the
names of the pattern databases.
"""

from __future__ import annotations

from typing import Any

from fastsubs._kernel import FORMAT as _CORE_FORMAT
from fastsubs._kernel import (  # noqa: F401  (the core's codec, re-exported as the format's API)
    beta_index,
    checksum,
    decode_header,
    decode_record,
    encode_end,
    encode_header,
    encode_patterns,
    encode_record,
    id_bits,
    id_bytes,
    key_bytes,
    name_previous,
    pattern_key,
    position_bits,
)

_FORMAT: dict[str, Any] = dict(_CORE_FORMAT)

#: The whole-vocabulary arrays' names and numpy dtypes, in the header's order (the
#: ``ARRAY_*`` constants are their places in it).
ARRAY_NAMES: tuple[bytes, ...] = tuple(name for name, _ in _FORMAT["ARRAYS"])
ARRAY_DTYPES: tuple[str, ...] = tuple(dtype for _, dtype in _FORMAT["ARRAYS"])
#: The dtypes of word ids, scores and spelling offsets (in the arrays, and as the core hands them).
ID_DTYPE: str = _FORMAT["ITEM_TYPES"]["ID"]
SCORE_DTYPE: str = _FORMAT["ITEM_TYPES"]["SCORE"]
OFFSET_DTYPE: str = _FORMAT["ITEM_TYPES"]["OFFSET"]
#: Where the bytes of the records go (``encode_patterns``'s parts; ``fastsubs-index info``).
PARTS: tuple[str, ...] = _FORMAT["PARTS"]


def patterns_db_name(order: int) -> bytes:
    """Name of the LMDB database holding the patterns of n-grams of ``order``."""
    return _FORMAT["PATTERNS_DB"] % order


def __getattr__(name: str) -> Any:
    """Every other constant of the format: format.h's ``FS_<name>``."""
    try:
        return _FORMAT[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
