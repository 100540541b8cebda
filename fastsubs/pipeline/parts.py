"""A Parquet dataset's part files by name: the writer (:mod:`fastsubs.pipeline.parquet`) and the
directory a run publishes them into (:mod:`fastsubs.query.output_files`) agree here.

A part is named by the first input line it holds, so the names sort in input order, and
is written under a prefix that hides it from dataset readers (which skip names starting
with a dot) until it is whole and published under its own name.
"""

from __future__ import annotations

import os

PART_NAME = "part-{:010d}.parquet"
PART_TEMPORARY_PREFIX = ".writing-"


def publish_part(temporary: str, directory: str) -> None:
    """A finished part, from its temporary name into ``directory`` under its own name."""
    os.replace(temporary, os.path.join(directory, os.path.basename(temporary).removeprefix(PART_TEMPORARY_PREFIX)))


def is_part(name: str) -> bool:
    """Whether ``name`` is a published part's."""
    before, after = PART_NAME.split("{:010d}")
    return name.startswith(before) and name.endswith(after)
