"""The checks a build passes before it publishes: what was written is the whole model.

A fault in the builder (such as a section read in chunks of which only one was kept)
must surface as a build error, never as a published index that fails to open or that
answers from part of a model.  So, before the atomic rename, the build checks that the
per-word arrays hold the header's vocabulary, that the n-grams written for every order
and slot add up to the header's count, and that the finished directory opens as the
query side opens it (which checks every array's size against the metadata).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fastsubs import format as fmt
from fastsubs.errors import BuildCheckError, IndexFileError


def check_count(what: str, written: int, declared: int) -> None:
    """Raise BuildCheckError unless ``written`` (things the build wrote) equals ``declared`` (the header's)."""
    if written != declared:
        raise BuildCheckError(f"the build wrote {written:,} {what}, the model's header declares {declared:,}")


def check_unigram_arrays(arrays: dict[int, np.ndarray], vocab_size: int) -> None:
    """Every per-word array (by its place, fastsubs.format.ARRAY_*) must hold one entry per word
    (``word_offsets`` one more; ``word_bytes`` and ``beta_values`` are no per-word arrays)."""
    for place, array in arrays.items():
        if place not in (fmt.ARRAY_WORD_BYTES, fmt.ARRAY_BETA_VALUES):
            expected = vocab_size + 1 if place == fmt.ARRAY_WORD_OFFSETS else vocab_size
            check_count(f"entries of the array {fmt.ARRAY_NAMES[place].decode()}", len(array), expected)


def check_opens(directory: Path) -> None:
    """Open the finished index as a query would; any complaint is a build error."""
    from fastsubs.core import Core

    try:
        with Core(directory):
            pass
    except IndexFileError as error:
        raise BuildCheckError(f"the finished index does not open ({error})") from None
