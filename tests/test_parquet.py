"""``--format parquet``: a dataset whose every row equals JSON lines', read back by pyarrow
and by DuckDB (a reader no one here wrote), the same for any ``--workers``, after a
resume and under ``--dask``; never mistaken for complete before it is.

Real ``fastsubs-query`` processes, real files, real signals.  The expected values come from
``--format jsonl`` of the same input, which test_formats.py checks against Python's own
``json.dumps`` of the search's arrays.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import fastsubs
from conftest import demo_text, run_cli
from fastsubs.query.output_files import PARTIAL_SUFFIX, STATE_SUFFIX
from test_long_runs import interrupted_run, one_line, recorded_lines

pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")

QUERY = "fastsubs-query"
#: Bytes a row's text fields may hold: not UTF-8 (a word, a -t name and id), tabs aside.
ODD_LINES = b"caf\xe9 au lait\nthe \xff\xfe dog barks\n\n   \nA b c\n"
RECORDS = (b"n1\tid1\t0\tthe cat sat\n"
           b"n\xe92\ti\xff\t2\tthe cat\n"
           b"bad\t1\tx\tthe\n"
           b"n3\tid3\t1\ta dog barks\n")


def jsonl_rows(index: Path, source: Path, args: list[str]) -> list[dict]:
    out = run_cli(QUERY, index, *args, "-i", source, "-f", "jsonl").stdout
    return [json.loads(line) for line in out.splitlines()]


def dataset_rows(out: Path) -> list[dict]:
    """The rows of the dataset at ``out`` as pyarrow reads the directory."""
    return pq.read_table(out).to_pylist()


def duckdb_rows(out: Path) -> list[dict]:
    """The same rows as DuckDB reads the part files, in input order."""
    with duckdb.connect() as connection:
        result = connection.execute(f"SELECT * FROM read_parquet('{out}/*.parquet') ORDER BY sentence, position")
        names = [column[0] for column in result.description]
        return [dict(zip(names, values)) for values in result.fetchall()]


def duckdb_table(out: Path):
    """The same rows as DuckDB reads the part files, in input order, as DuckDB hands them to
    Arrow (not a Python object per value: -p 0.5 lists some 3.6M substitutes)."""
    with duckdb.connect() as connection:
        return connection.sql(f"SELECT * FROM read_parquet('{out}/*.parquet') ORDER BY sentence, position"
                              ).to_arrow_table()


def same_columns(table, read) -> None:
    """``table`` holds the rows of ``read`` (a dataset as pyarrow reads it): the same columns,
    of the same types, value for value (floats compared with ``==``, as comparing the rows
    as Python objects does)."""
    assert table.column_names == read.column_names and table.schema.types == read.schema.types
    for name in read.column_names:
        assert table.column(name).equals(read.column(name)), f"DuckDB reads another {name} column than pyarrow"


def same_as_jsonl(rows: list[dict], expected: list[dict]) -> None:
    """Every row carries what the JSON object of its position does, scores to the last bit."""
    assert len(rows) == len(expected)
    for row, obj in zip(rows, expected):
        assert (row["sentence"], row["position"], row["word"]) == (obj["sentence"], obj["position"], obj["word"])
        for field in ("word", "name", "id"):
            if field in obj:
                assert row[field] == obj[field]
                raw = row[f"{field}_bytes"]
                assert (raw is None) == (f"{field}_bytes" not in obj), (row, obj)
                assert (raw or obj[field].encode()) == fastsubs.field_bytes(obj, field)
        if "samples" in obj:
            assert row["samples"] == obj["samples"]
            continue
        assert row["substitutes"] == [item["word"] for item in obj["substitutes"]]
        assert row["lp"] == [item["lp"] for item in obj["substitutes"]]  # JSON's repr reads back bit for bit
        if "p" in row:
            assert row["p"] == [item["p"] for item in obj["substitutes"]]


@pytest.fixture(scope="module")
def sentences(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("input") / "sentences.txt"
    path.write_bytes(demo_text(300) + ODD_LINES)
    return path


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("input") / "records.tsv"
    path.write_bytes(RECORDS)
    return path


@pytest.mark.parametrize("args", [["-n", "10"], ["-p", "0.1", "-z"], ["-n", "20", "--sample", "4", "--seed", "7"],
                                  ["-n", "5", "--no-eos", "--exclude", "the", "--exclude", "</s>"]],
                         ids=["n", "p-z", "sample", "no-eos-exclude"])
def test_every_row_equals_json_lines(demo_index: Path, sentences: Path, tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "subs"
    run_cli(QUERY, demo_index, *args, "-i", sentences, "-f", "parquet", "-o", out)
    read = pq.read_table(out)
    same_as_jsonl(read.to_pylist(), jsonl_rows(demo_index, sentences, args))
    same_columns(duckdb_table(out), read)  # so DuckDB's rows are JSON lines' too
    record = json.loads(Path(f"{out}.json").read_bytes())
    assert record["options"]["format"] == "parquet"
    assert record["input"]["lines"] == len(sentences.read_bytes().splitlines())


def frame_rows(frame) -> list[dict]:
    """The rows of a pandas frame read from a dataset, as pyarrow gives a table's."""
    import pyarrow as pa

    return pa.Table.from_pandas(frame, preserve_index=False).to_pylist()


READERS = {
    # what docs/output-formats.md runs, as it runs it (tests/test_doc_blocks.py runs the blocks themselves)
    "pandas": lambda out: frame_rows(pytest.importorskip("pandas").read_parquet(
        out, dtype_backend="pyarrow", read_dictionary=["substitutes.list.element"])),
    "dask": lambda out: frame_rows(pytest.importorskip("dask.dataframe").read_parquet(str(out)).compute()),
    "polars": lambda out: pytest.importorskip("polars").read_parquet(f"{out}/*.parquet").to_dicts(),
}


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_the_docs_name_reads_the_rows_of_json_lines(demo_index: Path, sentences: Path,
                                                                tmp_path: Path, reader: str) -> None:
    """pandas, Dask and Polars (pyarrow and DuckDB above, Spark in the slow suite): every
    row, in input order, bytes that are not UTF-8 and scores to the last bit included."""
    args = ["-n", "10", "-z"]
    out = tmp_path / "subs"
    run_cli(QUERY, demo_index, *args, "-i", sentences, "-f", "parquet", "-o", out)
    same_as_jsonl(READERS[reader](out), jsonl_rows(demo_index, sentences, args))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_spark_reads_the_rows_of_json_lines(demo_index: Path, sentences: Path, tmp_path: Path) -> None:
    """Spark (make test-slow installs pyspark, which needs Java 17 or later)."""
    pyspark_sql = pytest.importorskip("pyspark.sql", reason="pyspark is not installed (pip install '.[spark]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java, and there is none here (no java on PATH, no JAVA_HOME)")
    args = ["-n", "10", "-z"]
    out = tmp_path / "subs"
    run_cli(QUERY, demo_index, *args, "-i", sentences, "-f", "parquet", "-o", out)
    spark = pyspark_sql.SparkSession.builder.master("local[1]").appName("fastsubs").getOrCreate()
    try:
        rows = [row.asDict(recursive=True)
                for row in spark.read.parquet(str(out)).orderBy("sentence", "position").collect()]
    finally:
        spark.stop()
    same_as_jsonl(rows, jsonl_rows(demo_index, sentences, args))


def test_target_records_carry_their_name_and_id(demo_index: Path, records: Path, tmp_path: Path) -> None:
    args = ["-t", "-n", "10", "--skip-bad-records"]
    out = tmp_path / "subs"
    result = run_cli(QUERY, demo_index, *args, "-i", records, "-f", "parquet", "-o", out)
    assert f"{records}:3: expected a whole-number token index" in result.stderr.decode()
    expected = jsonl_rows(demo_index, records, args)
    assert [row["sentence"] for row in expected] == [1, 2, 4]
    same_as_jsonl(dataset_rows(out), expected)
    same_as_jsonl(duckdb_rows(out), expected)


def test_a_bad_record_stops_the_run_and_publishes_nothing(demo_index: Path, records: Path, tmp_path: Path) -> None:
    out = tmp_path / "subs"
    result = run_cli(QUERY, demo_index, "-t", "-i", records, "-f", "parquet", "-o", out, check=False)
    assert result.returncode == 1
    assert one_line(result.stderr).startswith(f"fastsubs-query: error: {records}:3: expected a whole-number token")
    assert not out.exists() and Path(f"{out}{PARTIAL_SUFFIX}").is_dir()


@pytest.mark.parametrize("workers", ["2", "3"])
def test_any_workers_write_the_same_parts(tiny_index: Path, tmp_path: Path, workers: str) -> None:
    """Parts are cut by the input alone and written whole by whichever process searched
    them: the same files, byte for byte, from one process and from several."""
    source = tmp_path / "in.txt"
    source.write_bytes(b"the cat sat on the mat\na dog\n" * 1800)  # a whole part and the tail's small ones
    one, many = tmp_path / "one", tmp_path / "many"
    run_cli(QUERY, tiny_index, "-n", "3", "-i", source, "-f", "parquet", "-o", one)
    run_cli(QUERY, tiny_index, "-n", "3", "-i", source, "-f", "parquet", "-o", many, "--workers", workers)
    names = sorted(os.listdir(one))
    assert len(names) > 2 and names == sorted(os.listdir(many))
    assert all((one / name).read_bytes() == (many / name).read_bytes() for name in names)
    assert sum(pq.ParquetFile(one / name).metadata.num_rows for name in names) == 1800 * (7 + 3)  # tokens and </s>


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig, args", [(signal.SIGKILL, ["-n", "3"]), (signal.SIGINT, ["-n", "3"]),
                                       (signal.SIGTERM, ["-n", "3", "--workers", "2"])],
                         ids=["SIGKILL", "SIGINT", "SIGTERM-workers-2"])
def test_a_stopped_run_resumes_to_the_uninterrupted_parts(tiny_index: Path, tmp_path: Path, sig: signal.Signals,
                                                          args: list[str]) -> None:
    """Stopped while its input pipe is still open (so at least its tail is not done), a
    run leaves no OUT, and --resume keeps its recorded parts and ends with the files of an
    uninterrupted run.  Killed, it keeps what it recorded last (the tiny model's blocks are
    done within the first second, before a record is due, so maybe none); with workers,
    the parts searched meanwhile may wait for more input before they are published."""
    data = b"the cat sat on the mat\na dog barks\n" * 2600
    source = tmp_path / "in.txt"
    source.write_bytes(data)
    expected = tmp_path / "expected"
    run_cli(QUERY, tiny_index, *args, "-i", source, "-f", "parquet", "-o", expected)
    out = tmp_path / "subs"
    interrupted_run(tiny_index, data, out, [*args, "-f", "parquet"], sig, 0.5)
    building = Path(f"{out}{PARTIAL_SUFFIX}")
    done = recorded_lines(out)
    if sig != signal.SIGKILL and "--workers" not in args:
        assert done >= 1024  # a block was published, and recorded as the run stopped

    def stamps(directory: Path) -> dict[str, tuple[int, int]]:
        return {entry.name: (entry.inode(), entry.stat().st_mtime_ns) for entry in os.scandir(directory)}

    kept = stamps(building)
    run_cli(QUERY, tiny_index, *args, "-i", source, "-f", "parquet", "-o", out, "--resume")
    assert sum(kept.get(name) == stamp for name, stamp in stamps(out).items()) == done // 1024  # kept, not rewritten
    assert sorted(os.listdir(out)) == sorted(os.listdir(expected))
    assert all((out / name).read_bytes() == (expected / name).read_bytes() for name in os.listdir(expected))
    assert not building.exists() and not Path(f"{out}{STATE_SUFFIX}").exists()


def test_a_new_run_replaces_a_dataset_but_nothing_else(demo_index: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes(b"the cat\n")
    out = tmp_path / "subs"
    run_cli(QUERY, demo_index, "-n", "3", "-i", source, "-f", "parquet", "-o", out)
    run_cli(QUERY, demo_index, "-n", "4", "-i", source, "-f", "parquet", "-o", out)
    assert [len(row["substitutes"]) for row in dataset_rows(out)] == [4, 4, 4]
    (out / "notes.txt").write_text("mine")
    result = run_cli(QUERY, demo_index, "-i", source, "-f", "parquet", "-o", out, check=False)
    assert one_line(result.stderr) == (f"fastsubs-query: error: {out}: cannot write the output (it holds 'notes.txt', "
                                       "which is not a part of a dataset: name a new or empty directory)")
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("output, extra, message", [
    (None, [], "--format parquet writes a dataset directory: name it with -o"),
    ("subs.gz", [], "--format parquet compresses its columns itself (zstd)"),
    ("subs", ["--compress-level", "3"], "--format parquet compresses its columns itself (zstd)"),
    ("file.txt", [], "file.txt: cannot write the output (it is not a directory; --format parquet writes a "
                     "dataset directory)"),
])
def test_what_a_dataset_cannot_be_is_one_line(tiny_index: Path, tmp_path: Path, output: str | None,
                                              extra: list[str], message: str) -> None:
    (tmp_path / "file.txt").write_text("kept")
    where = ["-o", tmp_path / output] if output else []
    result = run_cli(QUERY, tiny_index, "-f", "parquet", *where, *extra, input=b"a b\n", check=False)
    assert result.returncode != 0
    assert message in one_line(result.stderr)
    assert (tmp_path / "file.txt").read_text() == "kept"


def _run_without_pyarrow(*args: str | os.PathLike[str], check_imports: bool = False) -> subprocess.CompletedProcess:
    """fastsubs-query in a Python where pyarrow cannot be imported (as without the extra);
    with ``check_imports``, failing if the run imported it."""
    code = ("import sys; sys.modules['pyarrow'] = None\n"
            "from fastsubs.query.cli import main\n"
            f"sys.argv = ['fastsubs-query', *{[str(a) for a in args]!r}]\n"
            "try:\n    main()\nfinally:\n"
            "    assert not any(name.startswith('pyarrow') for name in sys.modules if sys.modules[name])\n")
    if check_imports:
        code = code.replace("sys.modules['pyarrow'] = None\n", "")
    return subprocess.run([sys.executable, "-c", code], input=b"the cat\n", capture_output=True)


def test_without_pyarrow_parquet_names_the_install_line(tiny_index: Path, tmp_path: Path) -> None:
    result = _run_without_pyarrow(tiny_index, "-f", "parquet", "-o", tmp_path / "subs")
    assert result.returncode == 1
    assert one_line(result.stderr).startswith("fastsubs-query: error: --format parquet needs pyarrow: run in the "
                                              "fastsubs clone: pip install '.[parquet]'")
    assert not (tmp_path / "subs").exists() and not (tmp_path / f"subs{PARTIAL_SUFFIX}").exists()


@pytest.mark.parametrize("output_format", ["text", "jsonl"])
def test_the_other_formats_never_import_pyarrow(tiny_index: Path, tmp_path: Path, output_format: str) -> None:
    result = _run_without_pyarrow(tiny_index, "-f", output_format, "-o", tmp_path / "subs", check_imports=True)
    assert result.returncode == 0, result.stderr.decode()
    assert (tmp_path / "subs").is_file()


def test_dask_writes_each_file_as_a_single_machine_dataset(demo_index: Path, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_bytes(demo_text(20))
    (folder / "b.txt").write_bytes(ODD_LINES)
    out = tmp_path / "out"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        run_cli(QUERY, demo_index, "-n", "10", "-f", "parquet", "--dask", cluster.scheduler_address,
                "-i", f"{folder}/*.txt", "-o", out)
    for source in sorted(folder.iterdir()):
        single = tmp_path / f"single-{source.name}"
        run_cli(QUERY, demo_index, "-n", "10", "-f", "parquet", "-i", source, "-o", single)
        names = sorted(os.listdir(single))
        assert sorted(os.listdir(out / source.name)) == names
        assert all((out / source.name / name).read_bytes() == (single / name).read_bytes() for name in names)
        same_as_jsonl(dataset_rows(out / source.name), jsonl_rows(demo_index, source, ["-n", "10"]))
    shutil.rmtree(out)


def test_a_run_of_another_format_replaces_an_interrupted_one(tiny_index: Path, tmp_path: Path) -> None:
    """OUT.partial of an interrupted text run is replaced by a parquet run's directory
    (the record says it was another run: nothing to resume), and the other way round."""
    out = tmp_path / "subs"
    Path(f"{out}{PARTIAL_SUFFIX}").write_bytes(b"half a text output")
    result = run_cli(QUERY, tiny_index, "-f", "parquet", "-o", out, input=b"a b\n")
    assert result.returncode == 0 and len(dataset_rows(out)) == 3
    shutil.rmtree(out)
    (Path(f"{out}{PARTIAL_SUFFIX}") / "part-0000000001.parquet").parent.mkdir()
    run_cli(QUERY, tiny_index, "-o", out, input=b"a b\n")
    assert out.is_file() and len(out.read_bytes().splitlines()) == 3
