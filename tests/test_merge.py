"""The build's merge of sorted runs (indexer/runs.py ``merged_blocks``) against a plain sort.

A slot's rows are sorted in runs that fit a job's memory, then merged a block at a time:
each step takes, from every run, the rows up to the smallest last key of the runs still
open.  Whatever the runs (key ranges that overlap, or follow one another as the spill of
a model sorted by context gives them for the last slot), the merge must yield every row
once, in key order, and no pattern (rows with equal fixed words) split across two blocks.
(Equal rows, a repeated n-gram, may come in either order: the build refuses them, and
finds their lines again in the spill.)
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsubs.indexer import runs

ROW = np.dtype([("ids", np.uint32, (3,)), ("line", np.int64)])


def sorted_run(rows: np.ndarray) -> np.ndarray:
    return rows[runs.sort_order(rows["ids"])]


@st.composite
def rows_in_runs(draw: st.DrawFn) -> list[np.ndarray]:
    """Rows of small ids (many equal fixed words, some equal rows), split into 1 ... 40 runs:
    at random places of the rows in file order, or of the rows sorted (runs that follow
    one another)."""
    count = draw(st.integers(1, 400))
    words = draw(st.integers(1, 12))
    ids = np.array(draw(st.lists(st.lists(st.integers(0, words), min_size=3, max_size=3), min_size=count,
                                 max_size=count)), np.uint32)
    rows = np.zeros(count, ROW)
    rows["ids"], rows["line"] = ids, np.arange(count)
    if draw(st.booleans()):
        rows = sorted_run(rows)
    cuts = sorted(set(draw(st.lists(st.integers(1, max(count - 1, 1)), max_size=39)))) if count > 1 else []
    return [sorted_run(part) for part in np.split(rows, cuts)]


@settings(max_examples=300, deadline=None)
@given(parts=rows_in_runs(), merge_rows=st.integers(1, 64), run_rows=st.integers(1, 16))
def test_merged_runs_are_the_rows_sorted_a_pattern_at_a_time(parts: list[np.ndarray], merge_rows: int,
                                                              run_rows: int) -> None:
    previous = (runs.MERGE_ROWS, runs.MERGE_RUN_ROWS)
    runs.MERGE_ROWS, runs.MERGE_RUN_ROWS = merge_rows, run_rows  # many steps, few rows a step
    try:
        blocks = list(runs.merged_blocks([runs._ArrayRun(part) for part in parts], order=3))
    finally:
        runs.MERGE_ROWS, runs.MERGE_RUN_ROWS = previous
    merged = np.concatenate(blocks) if blocks else np.zeros(0, ROW)
    expected = sorted_run(np.concatenate(parts))
    assert merged["ids"].tolist() == expected["ids"].tolist()
    assert sorted(merged["line"].tolist()) == sorted(expected["line"].tolist())  # every row, once
    for before, after in zip(blocks, blocks[1:]):
        assert before["ids"][-1, :-1].tolist() != after["ids"][0, :-1].tolist()  # no pattern split


@pytest.mark.parametrize("bound", [[0, 0, 0], [1, 2, 3], [1, 2, 2], [1, 2, 4], [9, 9, 9], [1, 3, 0]])
def test_count_at_most_is_a_count_of_the_rows_at_most_the_bound(bound: list[int]) -> None:
    ids = np.array([[0, 5, 5], [1, 2, 2], [1, 2, 3], [1, 2, 3], [1, 2, 9], [2, 0, 0]], np.uint32)
    assert runs._count_at_most(ids, bound) == sum(row <= bound for row in ids.tolist())
