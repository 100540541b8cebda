"""A line of any length in bounded memory (fastsubs/pipeline/long_lines.py): a long plain line is read
into a file and searched in windows, with the output of the whole line byte for byte.

The tests make lines "long" at 2,000 bytes and windows of 64 positions through the
environment (FASTSUBS_LONG_LINE_BYTES, FASTSUBS_WINDOW_POSITIONS), and compare with the
same run where every line is read whole (the default threshold, 1 MiB, above them all)."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BIN, demo_text, poll_until
from fastsubs.pipeline import long_lines
from fastsubs.pipeline.long_lines import SPILL_PREFIX, LongLine, windows
from test_long_runs import one_line

QUERY = str(BIN / "fastsubs-query")
WINDOWED = {"FASTSUBS_LONG_LINE_BYTES": "2000", "FASTSUBS_WINDOW_POSITIONS": "64"}


def long_input() -> bytes:
    """Short lines around long ones (1,000 and 900 tokens, some 6,000 bytes each): with ``<s>``
    and ``</s>`` tokens, tabs and runs of spaces inside, one of whitespace alone, the last
    without a final newline."""
    words = demo_text(200).split()
    line = b" ".join(words[:1000]).replace(b" ", b"  <s> ", 3).replace(b" ", b"\t</s> ", 2)
    return (demo_text(3) + line + b"\n" + demo_text(2) + line + b"   \n" + b" \t" * 1500 + b"\n"
            + demo_text(1) + b" ".join(words[1000:1900]))


def query(index: Path, args: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> bytes:
    """The stdout of a run on the input at tmp_path/in.txt, checked to leave no file in its
    own temporary directory (the long lines' and their output's)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    result = subprocess.run([QUERY, str(index), "-i", str(tmp_path / "in.txt"), *args], capture_output=True,
                            env={**os.environ, "TMPDIR": str(scratch), **(env or {})}, timeout=300)
    assert result.returncode == 0, result.stderr.decode()
    assert list(scratch.iterdir()) == []
    return result.stdout


def test_windows_cover_every_position_once_with_the_context_of_the_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The windows of a 1,000-token line (64 positions each), read back 7 bytes at a time
    (tokens cut between pieces): their positions follow one another from 0 to the end,
    each window holds order - 1 tokens on each side of them (<s> before the first, </s>
    after the last), and the tokens are the line's."""
    monkeypatch.setattr(long_lines, "PIECE_BYTES", 7)
    tokens = [f"w{i}".encode() for i in range(1000)]
    text = b" ".join(tokens[:10]) + b" <s> </s>\t " + b" ".join(tokens[10:]) + b"  \n"
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"line-{os.getpid()}"
    path.write_bytes(text)
    try:
        made = list(windows(LongLine(str(path), len(text)), order=4, size=64))
    finally:
        path.unlink()
    assert len(made) == -(-1000 // 64)
    position = 0
    for text_of_window, (first, lead, trail, at_start, at_end) in made:
        held = text_of_window.split()
        assert first == position and at_start == (first - lead == 0) and at_end == (first + 64 >= 1000)
        assert lead == min(3, first) and trail == (0 if at_end else 3)
        assert held == tokens[first - lead:first + len(held) - lead]
        position += len(held) - lead - trail
    assert position == 1000


@pytest.mark.parametrize("args", [[], ["-z"], ["--format", "jsonl"], ["--sample", "3", "--seed", "7"],
                                  ["--sample", "2", "--format", "jsonl"], ["--no-eos"], ["--workers", "2"]],
                         ids=["text", "z", "jsonl", "sample", "sample-jsonl", "no-eos", "workers-2"])
def test_a_long_line_in_windows_gives_the_whole_lines_bytes(demo_index: Path, tmp_path: Path,
                                                              args: list[str]) -> None:
    (tmp_path / "in.txt").write_bytes(long_input())
    whole = query(demo_index, ["-n", "5", *args], tmp_path)
    assert query(demo_index, ["-n", "5", *args], tmp_path, WINDOWED) == whole


@pytest.mark.parametrize("name, level, decompress", [("subs.txt.gz", "9", gzip.decompress),
                                                     ("subs.txt.bz2", None, bz2.decompress),
                                                     ("subs.txt.xz", None, lzma.decompress)])
def test_a_long_lines_compressed_output_is_compressed_as_it_is_made(demo_index: Path, tmp_path: Path, name: str,
                                                                    level: str | None, decompress) -> None:
    """The chunk of a long line is compressed a window at a time into one member: with zlib,
    bz2 and xz the same bytes as the member of the whole chunk (ISA-L's gzip, levels 1-6,
    cuts its blocks where the pieces end: the same text in another valid member)."""
    (tmp_path / "in.txt").write_bytes(long_input())
    level_args = ["--compress-level", level] if level else []
    query(demo_index, ["-n", "5", "-o", str(tmp_path / name), *level_args], tmp_path)
    whole = (tmp_path / name).read_bytes()
    query(demo_index, ["-n", "5", "-o", str(tmp_path / name), *level_args], tmp_path, WINDOWED)
    assert (tmp_path / name).read_bytes() == whole
    assert decompress(whole) == query(demo_index, ["-n", "5"], tmp_path)


def test_a_long_lines_parquet_rows_are_the_whole_lines(demo_index: Path, tmp_path: Path) -> None:
    """The same rows; the windows of a line of 9,000 tokens gathered into row groups of
    LONG_LINE_ROW_GROUP_ROWS positions (and a window), not one a window nor one in all."""
    pq = pytest.importorskip("pyarrow.parquet")
    from fastsubs.pipeline.parquet import LONG_LINE_ROW_GROUP_ROWS

    words = demo_text(1500).split()
    (tmp_path / "in.txt").write_bytes(long_input() + b"\n" + b" ".join(words[:9000]) + b"\n")
    query(demo_index, ["-n", "5", "--format", "parquet", "-o", str(tmp_path / "whole")], tmp_path)
    query(demo_index, ["-n", "5", "--format", "parquet", "-o", str(tmp_path / "windowed")], tmp_path, WINDOWED)
    rows = pq.read_table(tmp_path / "whole").to_pylist()
    assert len(rows) > 11_000 and pq.read_table(tmp_path / "windowed").to_pylist() == rows
    (part,) = (tmp_path / "windowed").iterdir()
    sizes = [group.num_rows for group in (pq.ParquetFile(part).metadata.row_group(i)
                                           for i in range(pq.ParquetFile(part).metadata.num_row_groups))]
    assert sum(sizes) == len(rows) and max(sizes) <= LONG_LINE_ROW_GROUP_ROWS + 64
    assert sum(size >= LONG_LINE_ROW_GROUP_ROWS for size in sizes) == 2, sizes


def long_records() -> bytes:
    """-t records of 1,000 tokens (some 6,000 bytes each), their targets at the text's start,
    inside, at its last token and its </s>, with <s> and </s> tokens and a CR in the text;
    bad ones: an index past the text, negative, not a number, a record of two fields; an
    index with spaces and an underscore, a tab in the text; the last without a newline."""
    text = b" ".join(demo_text(200).split()[:1000])
    marked = text.replace(b" ", b" <s> ", 2).replace(b" ", b" </s>\t", 1)
    return b"".join([b"r1\t1\t0\t" + text + b"\n", b"r2\t2\t3\t" + marked + b"\n", b"r3\t3\t500\t" + text + b"\r\n",
                     b"r4\t4\t999\t" + text + b"\n", b"r5\t5\t1000\t" + text + b"\n", b"r6\t6\t1001\t" + text + b"\n",
                     b"r7\t7\t-1\t" + text + b"\n", b"r8\t8\tx5\t" + text + b"\n", b"r9 of two fields\t" + text + b"\n",
                     b"r10\t10\t 1_0 \t\t" + text + b" \t\n", b"r11\t11\t998\t" + text])


@pytest.mark.parametrize("args", [["-t"], ["-t", "--format", "jsonl"], ["-t", "--sample", "3", "--seed", "7"],
                                  ["-t", "-o", "subs.txt.gz", "--compress-level", "9"],
                                  ["-t", "--format", "parquet", "-o", "subs"], ["-t", "--workers", "2"]],
                         ids=["text", "jsonl", "sample", "gz", "parquet", "workers-2"])
def test_a_long_target_record_in_a_window_gives_the_whole_records_output(demo_index: Path, tmp_path: Path,
                                                                         args: list[str]) -> None:
    """A -t record names one target: held whole or as the window of its text around it, the
    same output, the same warnings for the bad records (their token count included), the
    record's own line copied whole in the original's format."""
    (tmp_path / "in.txt").write_bytes(long_records())
    args = [arg if arg not in ("subs.txt.gz", "subs") else str(tmp_path / arg) for arg in args]

    def run(env: dict[str, str] | None) -> tuple[bytes, bytes, list[dict]]:
        scratch = tmp_path / "tmp"
        scratch.mkdir(exist_ok=True)
        result = subprocess.run([QUERY, str(demo_index), "-n", "5", "--skip-bad-records", "-i",
                                 str(tmp_path / "in.txt"), *args], capture_output=True,
                                env={**os.environ, "TMPDIR": str(scratch), **(env or {})},
                                timeout=300)
        assert result.returncode == 0, result.stderr.decode()
        assert list(scratch.iterdir()) == []
        if "parquet" in args:
            rows = pytest.importorskip("pyarrow.parquet").read_table(tmp_path / "subs").to_pylist()
            return result.stdout, result.stderr, rows
        written = (tmp_path / "subs.txt.gz").read_bytes() if "-o" in args else b""
        return result.stdout + written, result.stderr, []

    whole = run(None)
    assert whole[1].count(b"warning: skipped") == 4 and (whole[0] or whole[2])
    assert run(WINDOWED) == whole


def forty_megabyte_record(path: Path) -> None:
    """One -t record of 40 MB (some 7.5M demo words), its target in the middle, then a short one."""
    sentence = b" ".join(demo_text(1500).split())
    text = b" ".join([sentence] * (40_000_000 // (len(sentence) + 1) + 1))[:40_000_000].rsplit(b" ", 1)[0]
    path.write_bytes(b"r1\t1\t%d\t%s\nr2\t2\t1\tthe cat sat\n" % (text.count(b" ") // 2, text))


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_signal_is_acted_on_within_a_long_target_record(demo_index: Path, tmp_path: Path, workers: str) -> None:
    """A 40 MB -t record (the default threshold): a stop signal sent while it is copied,
    scanned or its line written ends the run within a second, not after the whole record
    was read (which took seconds when it was held whole); its files go with the run."""
    source, scratch, out = tmp_path / "records.tsv", tmp_path / "tmp", tmp_path / "subs.txt"
    forty_megabyte_record(source)
    scratch.mkdir()
    process = subprocess.Popen([QUERY, str(demo_index), "-t", "-n", "100", "-i", str(source), "-o", str(out),
                                "--workers", workers], stderr=subprocess.PIPE,
                               env={**os.environ, "TMPDIR": str(scratch)})
    poll_until(process, lambda: any(scratch.rglob("*.line")),  # the record is being kept in its file
                       "the record was never kept in a file")
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    took = time.monotonic() - sent
    assert process.returncode == 143 and b"terminated" in stderr, stderr.decode()
    assert took < 1.0, f"acted on {took:.2f} s after the signal"
    assert list(scratch.iterdir()) == [] and not out.exists()


def test_a_run_stopped_in_a_long_line_resumes_to_the_uninterrupted_bytes(demo_index: Path, tmp_path: Path) -> None:
    """SIGTERM while a long line's windows are searched: the line was never recorded, so
    --resume searches it again from its block, and the output is the uninterrupted one."""
    words = demo_text(400).split()
    source = demo_text(40) + b" ".join((words * 40)[:100_000]) + b"\n" + demo_text(40)
    (tmp_path / "in.txt").write_bytes(source)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "FASTSUBS_LONG_LINE_BYTES": "65536", "TMPDIR": str(scratch)}
    out = tmp_path / "subs.txt"
    command = [QUERY, str(demo_index), "-n", "20", "-i", str(tmp_path / "in.txt"), "-o", str(out)]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
    # the signal goes as soon as the line's windows are being searched: their output has
    # spilled to its temporary file (a fixed sleep raced the run on a fast, idle machine)
    deadline = time.monotonic() + 120
    while process.poll() is None and not any(scratch.rglob("*.out")) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert process.poll() is None, "the run was done before the signal: make the line longer"
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=60)
    assert process.returncode == 143 and not out.exists()
    subprocess.run([*command, "--resume"], env=env, check=True, capture_output=True, timeout=300)
    assert out.read_bytes() == query(demo_index, ["-n", "20"], tmp_path)


#: Runs the command in its argv and prints its peak resident memory in KiB: a process forked
#: from the test's own keeps the test's memory as its high-water mark, this small one's not.
PEAK_RSS = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


@pytest.mark.slow
@pytest.mark.timeout(900)  # millions of positions searched: minutes on a slow machine
def test_a_40_mb_target_record_takes_under_100_mib(demo_index: Path, tmp_path: Path) -> None:
    """One 40 MB -t record (some 7.5M words): the process's peak resident memory stays under
    100 MiB (it took some 240 MiB held whole), and its output is the whole record's: its
    line, then its target's substitutes."""
    forty_megabyte_record(tmp_path / "records.tsv")
    result = subprocess.run([sys.executable, "-c", PEAK_RSS, QUERY, str(demo_index), "-t", "-n", "10", "-i",
                             str(tmp_path / "records.tsv"), "-o", str(tmp_path / "subs.txt")],
                            capture_output=True, timeout=1800)
    assert result.returncode == 0, result.stderr.decode()
    peak = int(result.stdout)
    assert peak < 100 * 1024, f"peak RSS {peak / 1024:.0f} MiB"
    with open(tmp_path / "records.tsv", "rb") as records, open(tmp_path / "subs.txt", "rb") as output:
        assert output.readline() == records.readline()
        assert output.readline().count(b"\t") == 9  # its 10 substitutes


@pytest.mark.slow
@pytest.mark.timeout(900)  # millions of positions searched: minutes on a slow machine
def test_a_20_mb_line_takes_under_100_mib(demo_index: Path, tmp_path: Path) -> None:
    """One 20 MB line (some 3.8M words, at the default thresholds): the process's peak
    resident memory stays under 100 MiB (it took 1.3 GiB held whole, at -n 10)."""
    sentence = b" ".join(demo_text(1500).split())
    copies = 20_000_000 // (len(sentence) + 1) + 1
    (tmp_path / "in.txt").write_bytes(b" ".join([sentence] * copies) + b"\n")
    words = (sentence.count(b" ") + 1) * copies
    result = subprocess.run([sys.executable, "-c", PEAK_RSS, QUERY, str(demo_index), "-n", "10", "-i",
                             str(tmp_path / "in.txt"), "-o", str(tmp_path / "subs.txt")],
                            capture_output=True, timeout=1800)
    assert result.returncode == 0, result.stderr.decode()
    peak = int(result.stdout)
    assert peak < 100 * 1024, f"peak RSS {peak / 1024:.0f} MiB"
    with open(tmp_path / "subs.txt", "rb") as output:
        assert sum(1 for _ in output) == words + 1


def test_a_run_without_a_long_line_makes_no_temporary_directory(demo_index: Path, tmp_path: Path) -> None:
    """The directory for long lines is made when the first is met: a run killed by SIGKILL
    (which no cleanup survives) leaves nothing in $TMPDIR unless it held one."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    process = subprocess.Popen([QUERY, str(demo_index), "-n", "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               env={**os.environ, "TMPDIR": str(scratch)})
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(demo_text(200))
    process.stdin.flush()
    assert process.stdout.read(1)  # searching: the input is being read
    process.kill()
    process.communicate(timeout=60)
    assert list(scratch.iterdir()) == []


def test_a_long_lines_files_are_removed_once_its_chunk_is_written(demo_index: Path, tmp_path: Path) -> None:
    """The files of a long line and of its chunk's output go as soon as the chunk is written,
    not at the end of the run (a corpus of many long lines would fill the disk): with the
    first 40 of 200 lines long and the input still open, the temporary directory empties
    once the output of the first two chunks (64 lines) is out."""
    words = demo_text(200).split()
    long_line = b" ".join(words[:600]) + b"\n"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    process = subprocess.Popen([QUERY, str(demo_index), "-n", "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env={**os.environ, "TMPDIR": str(scratch), **WINDOWED})
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(long_line * 40 + demo_text(160))
        process.stdin.flush()
        ends = 0
        while ends < 63:  # line 63's end is out: its chunk is being written
            line = process.stdout.readline()
            assert line, process.stderr.read().decode()  # type: ignore[union-attr]
            ends += line.startswith(b"</s>\t")
        deadline = time.monotonic() + 10
        while (left := [p for p in scratch.rglob("*") if p.is_file()]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert left == []
    finally:
        process.communicate(timeout=60)  # closes the input: the run ends
    assert process.returncode == 0


def test_a_temporary_directory_left_by_a_killed_run_is_removed_by_the_next_run(demo_index: Path,
                                                                               tmp_path: Path) -> None:
    """SIGKILL, which no cleanup survives, leaves a run's temporary directory (its long line
    in it); the next run, whatever its input, removes it, its run being gone, and leaves
    that of a run still going (which holds its lock), which goes when that run ends."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), **WINDOWED}
    line = b" ".join(demo_text(200).split()[:600]) + b"\n"

    def in_a_long_line() -> tuple[subprocess.Popen, Path]:
        """A run that holds a long line and waits for more input, and its directory."""
        process = subprocess.Popen([QUERY, str(demo_index), "-n", "2"], stdin=subprocess.PIPE,
                                   stdout=subprocess.DEVNULL, env=env)
        assert process.stdin is not None
        process.stdin.write(line)
        process.stdin.flush()
        deadline = time.monotonic() + 120
        while not (held := list(scratch.glob(f"{SPILL_PREFIX}{process.pid}-*/*.line"))):
            assert process.poll() is None and time.monotonic() < deadline, "the line was never kept"
            time.sleep(0.02)
        return process, held[0].parent

    killed, left = in_a_long_line()
    going, kept = in_a_long_line()
    try:
        killed.kill()
        killed.wait()
        assert left.exists()
        subprocess.run([QUERY, str(demo_index), "-n", "2"], input=b"the cat\n", env=env, check=True,
                       capture_output=True, timeout=300)
        assert not left.exists() and kept.exists()
    finally:
        for process in (killed, going):
            process.stdin.close()  # type: ignore[union-attr]
            process.wait(timeout=300)
    assert going.returncode == 0 and list(scratch.iterdir()) == []


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("what, size", [("line", 300_000), ("output", 20_000)])
def test_a_full_temporary_directory_is_one_line_that_says_to_set_tmpdir(demo_index: Path, small_disk: Path,
                                                                        tmp_path: Path, what: str, size: int,
                                                                        workers: str) -> None:
    """$TMPDIR a 192 KiB disk: a long line that does not fit there (or whose output does not:
    a worker writes it), and the run stops with one line that names the run's temporary
    directory and says to set TMPDIR (not a read error of the input, nor an error naming no
    file), and leaves nothing there."""
    words = demo_text(1500).split()
    line = b" ".join(words * (size // len(b" ".join(words)) + 1))[:size].rsplit(b" ", 1)[0]
    (tmp_path / "in.txt").write_bytes(demo_text(3) + line + b"\n")
    result = subprocess.run([QUERY, str(demo_index), "-n", "100", "-i", str(tmp_path / "in.txt"), "-o",
                             str(tmp_path / "subs.txt"), "--workers", workers], capture_output=True, timeout=300,
                            env={**os.environ, "TMPDIR": str(small_disk), **WINDOWED})
    assert result.returncode == 1
    message = one_line(result.stderr)
    assert message.startswith(f"fastsubs-query: error: {small_disk}/{SPILL_PREFIX}") and "set TMPDIR" in message
    assert "No space left on device" in message
    assert list(small_disk.iterdir()) == []
