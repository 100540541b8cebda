"""An order's back-off table (indexer/beta_table.py): every value its chunks held, once,
the most frequent first, ties by their float32 bits; -0.0 and 0.0 are two values, as the
records' bits are.  Checked against a plain count, with the tally merging as it goes
(a small merge threshold) and once at the end."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsubs.indexer.beta_table import MERGE_PENDING, BetaTally

POOL = np.array([0.0, -0.0, -0.25, 0.5, -1.5, 3e-8, -np.float32(1) / 3, 1e30], np.float32)


@pytest.mark.parametrize("merge_pending", [1, 3, MERGE_PENDING])
@settings(max_examples=60, deadline=None)
@given(chunks=st.lists(st.lists(st.integers(0, len(POOL) - 1), max_size=40), max_size=8))
def test_the_table_holds_each_value_once_most_frequent_first(merge_pending: int, chunks: list[list[int]]) -> None:
    tally = BetaTally(merge_pending)
    counts: Counter[int] = Counter()
    for chunk in chunks:
        values = POOL[chunk]
        tally.add(values)
        counts.update(values.view(np.uint32).tolist())
    table = tally.table()
    assert table.dtype == np.float32
    assert table.view(np.uint32).tolist() == sorted(counts, key=lambda bits: (-counts[bits], bits))
