"""The command-line tools as a user runs them: real processes, real files, real pipes."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fastsubs
from conftest import BIN, TEST_DATA, FedFifo, clone_version, demo_text, run_cli
from fastsubs import format as fmt

SENTENCES = b"the cat sat\ncat the\n"


def test_build_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    target = tmp_path / "tiny.fsidx"
    run_cli("fastsubs-index", "build", TEST_DATA / "tiny.arpa", "-o", target, "-q")
    before = run_cli("fastsubs-query", target, input=SENTENCES).stdout
    again = run_cli("fastsubs-index", "build", TEST_DATA / "tiny.arpa", "-o", target, check=False)
    assert again.returncode != 0
    assert again.stderr.decode().strip().count("\n") == 0
    assert "--force" in again.stderr.decode()
    assert run_cli("fastsubs-query", target, input=SENTENCES).stdout == before
    run_cli("fastsubs-index", "build", TEST_DATA / "tiny.arpa", "-o", target, "--force", "-q")
    assert run_cli("fastsubs-query", target, input=SENTENCES).stdout == before


def test_build_writes_beside_the_model_by_default_and_prints_a_summary(tmp_path: Path) -> None:
    model = tmp_path / "tiny.arpa"
    model.write_bytes((TEST_DATA / "tiny.arpa").read_bytes())
    result = run_cli("fastsubs-index", "build", model)
    assert (tmp_path / "tiny.fsidx" / "data.mdb").is_file()
    assert "built" in result.stderr.decode() and "3-grams" in result.stderr.decode()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_info_json_prints_the_metadata(tiny_index: Path) -> None:
    meta = json.loads(run_cli("fastsubs-index", "info", tiny_index, "--json").stdout)
    assert meta["order"] == 3 and meta["counts"] == [6, 7, 3] and meta["vocab_size"] == 6
    assert meta["source"]["name"] == "tiny.arpa" and len(meta["source"]["sha256"]) == 64


def test_info_says_what_the_index_holds_in_a_few_lines(tiny_index: Path) -> None:
    """For a person: the model (name, size and SHA-256 of the file, as a methods section
    cites it), order, counts, vocabulary, the size on disk and per order, the build."""
    model = (TEST_DATA / "tiny.arpa").read_bytes()
    first, *lines = run_cli("fastsubs-index", "info", tiny_index).stdout.decode().splitlines()
    said = {name: value.strip() for name, value in (line.split(":", 1) for line in lines)}
    assert first == f"{tiny_index}: a fastsubs index (format {fmt.FORMAT_VERSION})"
    assert said["model"] == f"tiny.arpa ({len(model)} bytes, sha256 {hashlib.sha256(model).hexdigest()})"
    assert said["order"] == "3" and said["n-grams"] == "6 1-grams, 7 2-grams, 3 3-grams"
    assert said["vocabulary"] == "6 words, <unk> among them (2-byte ids)"
    on_disk = sum(f.stat().st_size for f in tiny_index.iterdir())  # data.mdb, lock.mdb, the tag
    sizes = json.loads(run_cli("fastsubs-index", "info", tiny_index, "--json").stdout)["sizes"]
    per_order = {part["part"]: part["pages"] / part["ngrams"] for part in sizes if part["part"] != "arrays"}
    assert re.fullmatch(rf"{on_disk / 2**20:.1f} MiB \({on_disk / (6 + 7 + 3):,.1f} B/n-gram\): "
                        rf"2-grams [\d.]+ MiB \({per_order['2-grams']:,.1f} B/n-gram\), "
                        rf"3-grams [\d.]+ MiB \({per_order['3-grams']:,.1f} B/n-gram\), "
                        r"the vocabulary's arrays [\d.]+ MiB", said["size"]), said["size"]
    assert re.fullmatch(rf"\d{{4}}-\d\d-\d\dT[\d:]+Z by fastsubs {re.escape(clone_version())} "
                        rf"\(Python {sys.version_info.major}\.{sys.version_info.minor}\.\d+\)", said["built"])
    assert said["read by"] == f"fastsubs {clone_version()}"
    assert set(said) == {"model", "order", "n-grams", "vocabulary", "size", "built", "read by"}


@pytest.mark.parametrize("compression", ["", ".gz", ".bz2", ".xz"])
def test_compressed_models_build_the_same_index(tmp_path: Path, tiny_index: Path, compression: str) -> None:
    import bz2
    import lzma

    compress = {"": bytes, ".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[compression]
    model = tmp_path / f"tiny.arpa{compression}"
    model.write_bytes(compress((TEST_DATA / "tiny.arpa").read_bytes()))
    run_cli("fastsubs-index", "build", model, "-o", tmp_path / "x.fsidx", "-q")
    assert (run_cli("fastsubs-query", tmp_path / "x.fsidx", input=SENTENCES).stdout
            == run_cli("fastsubs-query", tiny_index, input=SENTENCES).stdout)


@pytest.mark.parametrize("through", ["fifo", "pipe"])
def test_a_model_read_through_a_pipe_is_built_with_its_bytes_provenance(tmp_path: Path, tiny_index: Path,
                                                                         through: str) -> None:
    """A model given as a FIFO or as a shell's ``<(xzcat model.arpa.xz)`` (a pipe named
    /dev/fd/N) can be read once only: the build reads it once, and records the size and
    SHA-256 of the bytes it read (a second read to hash it hung on the FIFO and hashed
    nothing of the pipe)."""
    model = gzip.compress((TEST_DATA / "tiny.arpa").read_bytes())
    target = tmp_path / "x.fsidx"
    if through == "fifo":
        with FedFifo(tmp_path / "tiny.arpa.gz", model):
            run_cli("fastsubs-index", "build", tmp_path / "tiny.arpa.gz", "-o", target, "-q", timeout=120)
    else:
        reader, writer = os.pipe()
        build = subprocess.Popen([str(BIN / "fastsubs-index"), "build", f"/dev/fd/{reader}", "-o", str(target), "-q"],
                                 pass_fds=[reader], stderr=subprocess.PIPE)
        os.close(reader)
        with os.fdopen(writer, "wb") as stream:
            stream.write((TEST_DATA / "tiny.arpa").read_bytes())
        assert build.wait(timeout=120) == 0, build.stderr.read()  # type: ignore[union-attr]
        model = (TEST_DATA / "tiny.arpa").read_bytes()
    source = json.loads(run_cli("fastsubs-index", "info", target, "--json").stdout)["source"]
    assert (source["size"], source["sha256"]) == (len(model), hashlib.sha256(model).hexdigest())
    assert (run_cli("fastsubs-query", target, input=SENTENCES).stdout
            == run_cli("fastsubs-query", tiny_index, input=SENTENCES).stdout)


def test_query_on_a_missing_index_is_one_clear_line(tmp_path: Path) -> None:
    result = run_cli("fastsubs-query", tmp_path / "nothing", check=False, input=b"a\n")
    assert result.returncode == 1
    assert result.stderr.decode().count("\n") == 1
    assert "nothing: does not exist" in result.stderr.decode() and "Traceback" not in result.stderr.decode()


def lines_of(output: bytes) -> list[bytes]:
    return output.split(b"\n")[:-1]


def test_every_input_line_yields_its_records(tiny_index: Path) -> None:
    """Empty, blank, CRLF, tabs, markers, invalid UTF-8, NUL bytes, no final newline."""
    text = (b"\n   \t \n<s> the cat </s>\r\nthe\tcat  sat\n\xff\xfe cat\nca\x00t sat\nthe cat")
    out = lines_of(run_cli("fastsubs-query", tiny_index, "-n", "2", input=text).stdout)
    words = [line.split(b"\t")[0] for line in out]
    assert words == [b"</s>", b"</s>", b"the", b"cat", b"</s>", b"the", b"cat", b"sat", b"</s>",
                     b"\xff\xfe", b"cat", b"</s>", b"ca\x00t", b"sat", b"</s>", b"the", b"cat", b"</s>"]
    assert all(len(line.split(b"\t")) == 3 for line in out)


def test_a_one_megabyte_line_is_one_sentence(tiny_index: Path) -> None:
    """The original splits lines longer than 64 KB into two sentences; this must not."""
    long_token = b"x" * (1 << 20)
    out = lines_of(run_cli("fastsubs-query", tiny_index, "-n", "1", input=b"the " + long_token + b" sat\n").stdout)
    assert [line.split(b"\t")[0] for line in out] == [b"the", long_token, b"sat", b"</s>"]


UTF8_BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("args, text", [([], SENTENCES), (["-t"], b"r1\t1\t1\tthe cat sat\n"),
                                        (["-f", "jsonl"], SENTENCES)], ids=["text", "targets", "jsonl"])
@pytest.mark.parametrize("how", ["stdin", "gz", "long-line"])
def test_a_byte_order_mark_is_not_part_of_the_first_token(demo_index: Path, tmp_path: Path, args: list[str],
                                                          text: bytes, how: str) -> None:
    """A UTF-8 byte-order mark, as some editors write, at the start of an input (a -t file,
    a compressed one, one whose first line is long): the output of the text without it.
    Kept, it made the first token (a -t record's name) a word the model lacks, and changed
    the substitutes of the next position."""
    if how == "long-line":
        long = b" ".join(demo_text(100).split()[:600]) + b"\n"  # kept in a file, searched in windows
        text = (b"r0\t0\t5\t" if "-t" in args else b"") + long + text
    env = {**os.environ, "FASTSUBS_LONG_LINE_BYTES": "2000"}

    def run(data: bytes) -> bytes:
        source = tmp_path / ("in.txt.gz" if how == "gz" else "in.txt")
        source.write_bytes(gzip.compress(data) if how == "gz" else data)
        where = [] if how == "stdin" else ["-i", str(source)]
        result = subprocess.run([str(BIN / "fastsubs-query"), str(demo_index), "-n", "5", *args, *where],
                                input=data if how == "stdin" else None, capture_output=True, env=env, timeout=300)
        assert result.returncode == 0 and not result.stderr, result.stderr.decode()
        return result.stdout

    assert run(UTF8_BOM + text) == run(text)


def test_an_exclude_file_with_a_byte_order_mark_excludes_its_first_word(demo_index: Path, tmp_path: Path) -> None:
    words = tmp_path / "words.txt"
    words.write_bytes(UTF8_BOM + b"the\n,\n")
    listed = run_cli("fastsubs-query", demo_index, "-n", "20", "--exclude-from", words, input=SENTENCES)
    assert not listed.stderr  # no warning of a word the model lacks
    assert listed.stdout == run_cli("fastsubs-query", demo_index, "-n", "20", "--exclude", "the", "--exclude", ",",
                                    input=SENTENCES).stdout


def test_malformed_target_record_names_its_line(tiny_index: Path) -> None:
    records = b"r1\t1\t0\tthe cat\nbroken record\nr3\t3\t9\tthe cat\n"
    result = run_cli("fastsubs-query", tiny_index, "-t", check=False, input=records)
    assert result.returncode == 1
    assert result.stderr.decode().startswith(
        "fastsubs-query: error: <stdin>:2: expected 'name<TAB>id<TAB>index<TAB>text'")
    skipped = run_cli("fastsubs-query", tiny_index, "-t", "--skip-bad-records", check=False, input=records)
    assert skipped.returncode == 0
    assert lines_of(skipped.stdout)[0] == b"r1\t1\t0\tthe cat" and len(lines_of(skipped.stdout)) == 2
    warnings = skipped.stderr.decode().splitlines()
    assert len(warnings) == 2 and ":2:" in warnings[0] and ":3:" in warnings[1] and "outside" in warnings[1]


def test_compressed_input_and_output_by_extension(tmp_path: Path, tiny_index: Path) -> None:
    plain = run_cli("fastsubs-query", tiny_index, input=SENTENCES).stdout
    (tmp_path / "in.txt.gz").write_bytes(gzip.compress(SENTENCES))
    run_cli("fastsubs-query", tiny_index, "-i", tmp_path / "in.txt.gz", "-o", tmp_path / "out.txt.xz")
    import lzma

    assert lzma.decompress((tmp_path / "out.txt.xz").read_bytes()) == plain


def test_broken_pipe_ends_quietly(demo_index: Path, tmp_path: Path) -> None:
    """Far more output than a pipe holds, whose reader goes after the first line."""
    text = tmp_path / "text.txt"
    text.write_bytes(demo_text(400))
    result = subprocess.run(f"'{BIN / 'fastsubs-query'}' '{demo_index}' -n 5 -i '{text}' | head -n 1",
                            shell=True, capture_output=True, timeout=300)
    assert result.stdout.count(b"\n") == 1
    assert result.stderr == b""


def test_workers_give_the_same_output_as_one_process(demo_index: Path) -> None:
    text = demo_text(80)
    lines = text.splitlines()
    one = run_cli("fastsubs-query", demo_index, "-n", "20", input=text).stdout
    two = run_cli("fastsubs-query", demo_index, "-n", "20", "--workers", "2", input=text).stdout
    assert two == one
    assert one.count(b"\n") == sum(len(line.split()) + 1 for line in lines)


#: Runs fastsubs-query as its entry point does, then says whether numpy was imported.
_QUERY_THEN_SAY_NUMPY = """
import sys
from fastsubs.query.cli import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write("numpy imported" if "numpy" in sys.modules else "no numpy")
"""


TEXT = b"the cat sat"
RECORD = b"r1\t7\t1\tthe cat sat"


@pytest.mark.parametrize("args, record, lines", [
    ([], TEXT, 4), (["-z"], TEXT, 4), (["--workers", "2"], TEXT, 4), (["-t"], RECORD, 2),
    (["-f", "jsonl"], TEXT, 4), (["-t", "-f", "jsonl"], RECORD, 1), (["--sample", "3"], TEXT, 12),
    (["--sample", "3", "-f", "jsonl"], TEXT, 4)])
def test_every_output_format_runs_without_numpy(demo_index: Path, args: list[str], record: bytes,
                                                lines: int) -> None:
    """Start-up: importing numpy takes ~70 ms, a third of a short run.  The C core writes
    every format (text, JSON lines, samples), so no run of the command line needs numpy."""
    run = subprocess.run([str(BIN / "python"), "-c", _QUERY_THEN_SAY_NUMPY, str(demo_index), "-n", "5", *args],
                         input=record + b"\n", capture_output=True, check=True)
    assert run.stderr == b"no numpy"
    assert run.stdout.count(b"\n") == lines
    assert run.stdout == run_cli("fastsubs-query", demo_index, "-n", "5", *args, input=record + b"\n").stdout


def test_the_numpy_check_can_tell(demo_index: Path) -> None:
    """The check above says so when numpy was imported."""
    run = subprocess.run([str(BIN / "python"), "-c", "import numpy\n" + _QUERY_THEN_SAY_NUMPY, str(demo_index)],
                         input=TEXT + b"\n", capture_output=True, check=True)
    assert run.stderr == b"numpy imported"


def test_stats_are_printed_on_stderr(tiny_index: Path) -> None:
    result = run_cli("fastsubs-query", tiny_index, "--stats", input=SENTENCES)
    assert "positions 7" in result.stderr.decode() and "candidates evaluated" in result.stderr.decode()


def test_the_index_gets_the_permissions_of_any_new_directory(tmp_path: Path) -> None:
    """Other users and cluster workers read shared indexes: not mkdtemp's private 0700."""
    import os

    target = tmp_path / "shared.fsidx"
    run_cli("fastsubs-index", "build", TEST_DATA / "tiny.arpa", "-o", target, "-q")
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o777 & ~umask


#: A unigram model whose words' probabilities span 11 orders of magnitude: at every
#: position lp(x) is x's own alpha, so p / Σp of each word is known from the model alone.
SPREAD_MODEL = """\\data\\
ngram 1=9

\\1-grams:
-99\t<s>
-0.5\t</s>
-1\t<unk>
-0.3\ta
-2\tb
-4\tc
-6\td
-9\te
-11\tf

\\end\\
"""


def test_z_lists_down_to_the_first_share_below_1e_8(tmp_path: Path) -> None:
    """``-z`` writes p / Σp over the listed substitutes and stops before the first below
    1e-8 (the original's cut).  With every word asked for, each line lists the words by
    alpha, each with its share of the listed words' probability, down to the first share
    below 1e-8, derived here from the model's numbers."""
    (tmp_path / "spread.arpa").write_text(SPREAD_MODEL)
    fastsubs.build_index(tmp_path / "spread.arpa", tmp_path / "spread.fsidx")
    alphas = {word: float(alpha) for alpha, word in (line.split("\t") for line in SPREAD_MODEL.splitlines()
                                                      if line.count("\t") == 1) if word != "<s>"}
    ranked = sorted(alphas, key=lambda word: -alphas[word])
    total = sum(10.0 ** alphas[word] for word in ranked)
    shares = [10.0 ** alphas[word] / total for word in ranked]
    kept = next(i for i, share in enumerate(shares) if share < 1e-8)
    assert 0 < kept < len(ranked) - 1  # the cut falls inside the list
    written = run_cli("fastsubs-query", tmp_path / "spread.fsidx", "-z", "-n", str(len(ranked)),
                      input=b"a b\n").stdout.decode()
    rows = written.splitlines()
    assert [row.split("\t")[0] for row in rows] == ["a", "b", "</s>"]
    for row in rows:
        fields = [field.split(" ") for field in row.split("\t")[1:]]
        assert [word for word, _ in fields] == ranked[:kept]
        assert [float(value) for _, value in fields] == pytest.approx(shares[:kept], abs=1e-7)
