"""index.table() / index.frame(): the rows of the CLI's Parquet dataset, straight from the
core into Arrow and pandas, for the same lines given in Python."""

from __future__ import annotations

from pathlib import Path

import pytest

import fastsubs
from conftest import demo_text, run_cli

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ODD_LINES = b"caf\xe9 au lait\nthe \xff\xfe dog barks\n\n   \nA b c\n"
RECORDS = (b"n1\tid1\t0\tthe cat sat\n"
           b"n\xe92\ti\xff\t2\tthe cat\n"
           b"bad\t1\tx\tthe\n"
           b"n3\tid3\t1\ta dog barks\n")


def cli_dataset(index: Path, source: Path, flags: list[str], out: Path) -> pa.Table:
    run_cli("fastsubs-query", index, *flags, "--format", "parquet", "-i", source, "-o", out)
    return pq.read_table(out)


def same_rows(made: pa.Table, expected: pa.Table) -> None:
    """Row for row, value for value, as comparing their ``to_pylist()`` would (floats with
    ``==``), by Arrow's comparison of the columns (-p 0.1 lists some 0.5M substitutes: as
    Python objects, seconds); the first row that differs is shown when one does."""
    if not made.equals(expected):
        rows, wanted = made.to_pylist(), expected.to_pylist()
        first = next((i for i, (a, b) in enumerate(zip(rows, wanted)) if a != b), min(len(rows), len(wanted)))
        raise AssertionError(f"{len(rows)} rows, the CLI's dataset {len(wanted)}; first difference at row {first}: "
                             f"{rows[first:first + 1]} vs {wanted[first:first + 1]}")


@pytest.fixture(scope="module")
def sentences(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("input") / "sentences.txt"
    path.write_bytes(demo_text(300) + ODD_LINES)  # 300 lines: more than one call into the core
    return path


@pytest.mark.parametrize(("flags", "fields"), [
    (["-n", "10"], {"n": 10}),
    (["-p", "0.1", "-z"], {"p": 0.1, "normalize": True}),  # (0.1: ~170 words a position, not 700)
    (["-n", "20", "--sample", "4", "--seed", "7"], {"n": 20, "sample": 4, "seed": 7}),
    (["-n", "5", "--no-eos", "--exclude", "the"], {"n": 5, "no_eos": True, "exclude": ["the"]}),
], ids=["n", "p-z", "sample", "no-eos-exclude"])
def test_a_table_is_the_clis_dataset(demo_index: Path, sentences: Path, tmp_path: Path, flags: list[str],
                                     fields: dict) -> None:
    """The same schema and the same rows, bit for bit, for lines given as they are read
    (bytes that are not UTF-8 included)."""
    expected = cli_dataset(demo_index, sentences, flags, tmp_path / "out")
    with fastsubs.open_index(demo_index) as index:
        made = index.table(sentences.read_bytes().splitlines(keepends=True), **fields)
    assert made.schema == expected.schema.remove_metadata()
    same_rows(made, expected)


def test_strings_and_token_lists_are_the_lines_they_make(demo_index: Path) -> None:
    with fastsubs.open_index(demo_index) as index:
        options = fastsubs.QueryOptions(n=5)
        as_text = index.table(["the cat sat", "a dog"], options)
        assert index.table([["the", "cat", "sat"], [b"a", "dog"]], options).equals(as_text)
        assert index.table(iter([b"the cat sat\n", "a  dog"]), options).equals(as_text)


def test_records_and_a_bad_one(demo_index: Path, tmp_path: Path) -> None:
    """-t records: the bad one is an error naming its line, or left out as the CLI skips it."""
    source = tmp_path / "records.tsv"
    source.write_bytes(RECORDS)
    expected = cli_dataset(demo_index, source, ["-t", "-n", "3", "--skip-bad-records"], tmp_path / "out")
    records = RECORDS.splitlines()
    with fastsubs.open_index(demo_index) as index:
        made = index.table(records, targets=True, n=3, skip_bad_records=True)
        assert made.to_pylist() == expected.to_pylist()
        with pytest.raises(fastsubs.QueryInputError, match=r"^<sentences>:3: "):
            index.table(records, targets=True, n=3)


def test_a_frame_is_what_pandas_reads_of_the_dataset(demo_index: Path, sentences: Path, tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    cli_dataset(demo_index, sentences, ["-n", "10", "-z"], tmp_path / "out")
    read = pd.read_parquet(tmp_path / "out", dtype_backend="pyarrow")
    with fastsubs.open_index(demo_index) as index:
        made = index.frame(sentences.read_bytes().splitlines(), n=10, normalize=True)
    pd.testing.assert_frame_equal(made, read)


def test_no_sentences_is_an_empty_table_of_the_columns(demo_index: Path) -> None:
    with fastsubs.open_index(demo_index) as index:
        made = index.table([], n=3, normalize=True)
    assert made.num_rows == 0 and made.column_names == ["sentence", "position", "word", "word_bytes",
                                                        "substitutes", "lp", "p"]


@pytest.mark.parametrize(("sentences", "fields", "said"), [
    ([["the", "big cat"]], {}, "one word without whitespace"),
    ([["the", ""]], {}, "one word without whitespace"),
    (["the cat\nsat"], {}, "must be one line"),
    (["the cat"], {"options": fastsubs.QueryOptions(), "n": 3}, "not both"),
])
def test_what_cannot_be_a_line_is_an_argument_error(demo_index: Path, sentences: list, fields: dict,
                                                     said: str) -> None:
    with fastsubs.open_index(demo_index) as index, pytest.raises(fastsubs.ArgumentError, match=said):
        index.table(sentences, **fields)


def test_an_open_index_has_one_vocabulary_which_goes_with_it(demo_index: Path) -> None:
    """The words' columns are gathered from one Vocabulary per open index (made at its first
    table or part), held beside it, not by it: the index is not kept alive by it."""
    import gc
    import weakref

    from fastsubs.core import Core
    from fastsubs.pipeline import parquet

    index = Core(demo_index)
    words = parquet.vocabulary_of(index)
    assert parquet.vocabulary_of(index) is words and len(words.lengths) == index.vocab_size
    gone = weakref.ref(index)
    index.close()
    del index
    gc.collect()
    assert gone() is None and words not in parquet._vocabularies.values()
