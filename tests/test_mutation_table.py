"""tests/mutations.py's table stays plantable: each planted bug names a line that its file
holds exactly once, so that a change of that line (a merge, a rename) is seen here, in the
default suite, not as an entry that measures nothing when the planted-bug run comes."""

from __future__ import annotations

import pytest

import mutations
from conftest import REPO


@pytest.mark.parametrize("mutation", mutations.MUTATIONS, ids=lambda m: m.name)
def test_each_planted_bug_names_one_line_of_its_file(mutation: mutations.Mutation) -> None:
    lines = (REPO / mutation.file).read_text().splitlines()
    assert sum(mutation.old in line for line in lines) == 1, f"{mutation.file}: {mutation.old!r}"
    assert mutation.new != mutation.old


def test_planted_bugs_have_distinct_names() -> None:
    names = [m.name for m in mutations.MUTATIONS]
    assert len(set(names)) == len(names)
