"""What the reader's cache hands a search lives as long as the search, checked deterministically.

A search holds records in cache slots, rank maps and sorted prefixes (SlotAids), rank maps
that another thread's reader built, and the open index itself, until it ends.  A bug that
frees or reuses one of them early (tests/mutations.py plants several: cache-hit-not-pinned,
cache-victim-in-use, kept-freed-in-use, shared-map-taken-uncounted, close-frees-in-use)
shows in whole searches only when a later miss or allocation happens to land on it: run
alone such a mutation was caught by an assertion, a hang or a crash, and in the full suite
by whatever earlier tests had left in the process.  tests/c/cache_check.c forces each case
(a set of SLOT_WAYS slots overflowed under a held hit, a kept budget that fits one SlotAids
asked for a second, a shared map released by its builder, an index closed mid-search) on a
small index built here from a generated model, and checks every record, SlotAids and map
against what the store reads afresh, under the sanitizers, so each of those mutations fails
one of its checks on every run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import fastsubs
from c_programs import build_program, no_sanitizer_report, run_program
from generated_models import write_model


@pytest.fixture(scope="module")
def cache_check(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_program(tmp_path_factory, "cache_check.c")


def test_what_the_cache_hands_a_search_outlives_it(cache_check: Path, tmp_path: Path) -> None:
    """A bigram model of 300 words, patterns of up to 100 words: 16+ patterns "w _" to overflow
    a set with, and two with several words for the sorted prefixes and rank maps."""
    write_model(tmp_path / "model.arpa", vocab_size=300, higher=[2000], seed=7, hubs=2, hub_fanout=100)
    index = tmp_path / "model.fsidx"
    fastsubs.build_index(tmp_path / "model.arpa", index)
    result = run_program(cache_check, index, timeout=60)
    errors = no_sanitizer_report(result)
    assert result.returncode == 0 and errors == "", errors
    assert result.stdout.startswith(b"cache_check: ") and result.stdout.endswith(b" checks\n"), result.stdout
