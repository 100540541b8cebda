"""What an index and its build cost, as reported: the size report a build writes (``sizes``
in the metadata, ``fastsubs-index info``, ``python -m fastsubs.bench.index_size``)
accounts for every byte the index stores, and ``python -m fastsubs.bench.build``
measures a real build."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest

import fastsubs
from conftest import TEST_DATA
from fastsubs import format as fmt
from fastsubs.core import Core
from generated_models import write_model
from lmdb_layout import PAGE_FIELDS, PAGE_HEADER, walk


@pytest.fixture(scope="module")
def generated_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated 4-gram model's index: blocks, PATTERN records and joint orders, small
    enough to decode every record of in a second."""
    folder = tmp_path_factory.mktemp("sizes")
    write_model(folder / "model.arpa", vocab_size=700, higher=[4000, 4000, 3000], seed=5, hubs=6, hub_fanout=400)
    fastsubs.build_index(folder / "model.arpa", folder / "model.fsidx", joint_min=8)
    return folder / "model.fsidx"


def test_the_size_report_accounts_for_every_stored_byte(generated_index: Path) -> None:
    with Core(generated_index) as index:
        meta = index.meta
    order, vocab_size = meta["order"], meta["vocab_size"]
    id_bits = max(16, (vocab_size - 1).bit_length())  # (fewer than 2^25 words)
    lines = {line["part"]: line for line in meta["sizes"]}
    assert list(lines) == ["arrays", *(f"{m}-grams" for m in range(2, order + 1))]
    env = lmdb.open(str(generated_index), readonly=True, lock=False, max_dbs=order + 2)
    try:
        for m in range(2, order + 1):
            line, ngrams = lines[f"{m}-grams"], meta["counts"][m - 1]
            # every n-gram is stored once per slot: m ids, packed in each pattern in the fewest
            # bits that hold the vocabulary's ids (in whole bytes); an alpha a word of each pattern but
            # those of one word outside the last slot (format.h: their values are their
            # n-gram's, in the last slot's pattern); below the top order, each pattern's beta
            # codes (a width-bit code per word, packed in whole bytes; the width, where an
            # entry's code does not give it, is structure)
            assert line["ngrams"] == ngrams
            db = env.open_db(fmt.patterns_db_name(m))
            with env.begin(db=db) as txn:
                stored = sum(len(key) + len(value) for key, value in txn.cursor())
                stat = txn.stat(db)
                patterns = [p for key, value in txn.cursor() for p in
                            fmt.decode_record(key, value, m, vocab_size, m < order)["patterns"]]
            one_word = [p for p in patterns if p["count"] == 1 and p["key"][0] < m - 1 and p["joint"] is None]
            assert one_word and all(p["alpha"] is None for p in one_word)
            assert sum(p["count"] for p in patterns) == m * ngrams
            assert line["ids"] == sum(-(-p["count"] * id_bits // 8) for p in patterns)
            assert line["alpha"] == 4 * (m * ngrams - len(one_word))
            assert line["beta"] == (sum(-(-p["count"] * p["beta_width"] // 8) for p in patterns)
                                    if m < order else 0)
            # positions by score: count - 1's bits each (none for one word), packed in whole bytes
            assert line["positions"] == sum(-(-p["count"] * (p["count"] - 1).bit_length() // 8) for p in patterns)
            assert sum(line[part] for part in fmt.PARTS) == stored
            assert line["records"] == stat["entries"]
            assert line["pages"] == stat["psize"] * (stat["branch_pages"] + stat["leaf_pages"]
                                                     + stat["overflow_pages"])
    finally:
        env.close()
    printed = subprocess.run([sys.executable, "-m", "fastsubs.bench.index_size", str(generated_index)],
                             capture_output=True, text=True, check=True).stdout
    assert f"{sum(meta['counts']):,} n-grams" in printed and "4-grams" in printed


def test_the_build_fills_lmdb_leaf_pages(demo_index: Path) -> None:
    """The writer sizes each block to fill the room its LMDB leaf page has left (kernel/codec.c
    models LMDB's appends), so the patterns' leaf pages hold little free room: measured in the
    raw file (a page's free room lies between its node pointers and its nodes, mp_lower ...
    mp_upper), under 4% of them all on the demo model (2.6%; 6.9% when every block was sized
    for half a page, whatever room its page had left)."""
    layout = walk(demo_index)
    data = (demo_index / "data.mdb").read_bytes()
    lower_at = next(at for name, at, _ in PAGE_FIELDS if name == "lower")  # mp_lower, then mp_upper
    leaves = [page for page in layout.of_kind("leaf") if page.db.startswith("patterns")]
    free = sum(upper - lower for lower, upper in
               (struct.unpack_from("<HH", data, page.pgno * layout.page_size + lower_at) for page in leaves))
    assert len(leaves) > 1000 and free < 0.04 * len(leaves) * (layout.page_size - PAGE_HEADER)


def test_the_build_benchmark_measures_a_real_build(tmp_path: Path) -> None:
    """Two builds measured, their temporary directory gone, the last index kept with --keep."""
    (tmp_path / "work").mkdir()
    (tmp_path / "kept").mkdir()
    printed = subprocess.run([sys.executable, "-m", "fastsubs.bench.build", str(TEST_DATA / "tiny.arpa"),
                              "--repeats", "2", "--dir", str(tmp_path / "work"), "--keep", str(tmp_path / "kept")],
                             capture_output=True, text=True, check=True).stdout
    line = printed.splitlines()[-2]
    assert line.startswith("tiny.arpa: 16 n-grams; build ") and "2 runs" in line and "peak PSS" in line
    assert list((tmp_path / "work").iterdir()) == []  # its temporary directory is gone
    with Core(tmp_path / "kept" / "tiny.fsidx") as index:
        assert sum(index.meta["counts"]) == 16
