"""fastsubs-query's input made into output in C, a chunk of lines per call (kernel/chunk.c):
lines split into tokens as :func:`fastsubs.tokens.tokenize` splits them, -t records read
as the rule that was Python's read them (``int()`` for the index, ``repr()`` of the bytes
in the message), each line's output that of the id-level ``render``, for any bytes; bad
records first, in the middle and last in a chunk, skipped or not; one call into C per
chunk; the output buffer a call keeps for the next, only while small; and one open of the
index per process of a run."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import run_cli
from fastsubs.core import Core, Render
from fastsubs.jsonl import text_fields
from fastsubs.limits import Limits
from fastsubs.options import QueryOptions
from fastsubs.pipeline.chunks import process_chunk
from fastsubs.pipeline.formats import render_lines
from fastsubs.pipeline.lines import CHUNK_LINES
from fastsubs.pipeline.processes import usable_cores
from fastsubs.query.run import CHUNKS_AHEAD
from fastsubs.tokens import tokenize

EOS = b"</s>"


@pytest.fixture(scope="module")
def index(demo_index: Path):
    with Core(demo_index) as opened:
        yield opened


def expected_sentence(index: Core, line: bytes, number: int, options: QueryOptions, kind: Render) -> bytes:
    """A plain line's output through the id-level entry, from the line's tokens as Python
    splits them."""
    tokens = tokenize(line)
    shown = tokens if options.no_eos else [*tokens, EOS]
    return index.render(index.sentence_ids(tokens), 1, len(shown) + 1, options.limits, b"", kind, shown,
                        line=number, normalize=options.normalize)


#: Words of the demo model, markers, <unk>, a word it lacks and bytes that are not UTF-8 ...
WORDS = st.sampled_from([b"the", b"of", b"cat", b".", b",", b"<s>", b"</s>", b"<unk>", b"<S>", b"zzyzx",
                         b"caf\xe9", b"\xff", b"\x00", b"\xc2\xa0the"])
#: ... between ASCII whitespace and bytes that look like it but are none for bytes.split().
GAPS = st.sampled_from([b" ", b"\t", b"\n", b"\v", b"\f", b"\r", b"  \t", b"", b"\x1c", b"\x85", b"\xa0", b"\x1f"])
LINES = st.lists(st.tuples(GAPS, WORDS), max_size=8).map(lambda pairs: b"".join(g + w for g, w in pairs))


@settings(max_examples=120, deadline=None)
@given(lines=st.lists(st.tuples(LINES, GAPS), min_size=1, max_size=6), first=st.integers(1, 10**9),
       no_eos=st.booleans(), jsonl=st.booleans())
def test_a_chunk_is_its_lines_split_as_tokenize_splits_them(index: Core, lines: list[tuple[bytes, bytes]],
                                                           first: int, no_eos: bool, jsonl: bool) -> None:
    chunk = [line + end for line, end in lines]
    options = QueryOptions(n=4, no_eos=no_eos, format="jsonl" if jsonl else "text")
    rendered = render_lines(index, chunk, first, options)
    kind = Render.JSON if jsonl else Render.LINE
    assert rendered.data == b"".join(expected_sentence(index, line, first + i, options, kind)
                                     for i, line in enumerate(chunk))
    assert (rendered.done, rendered.problem) == (len(chunk), None)
    assert rendered.stats.positions == sum(len(tokenize(line)) + (not no_eos) for line in chunk)


def quoted(field: bytes) -> str:
    """A field as a message quotes it: its first 40 bytes, then its length if it is longer."""
    return repr(field[:40]) + (f"… ({len(field)} bytes)" if len(field) > 40 else "")


def python_record_rule(line: bytes) -> tuple[bytes, bytes, list[bytes], int] | str:
    """How fastsubs-query read a -t record when the rule was Python's (fastsubs/lines.py, before
    the rule moved into kernel/chunk.c): the test's oracle.  The record's name, id, tokens
    and target position, or the message saying what is wrong."""
    fields = line.rstrip(b"\r\n").split(b"\t", 3)
    if len(fields) != 4:
        return f"expected 'name<TAB>id<TAB>index<TAB>text', found {len(fields)} field(s)"
    tokens = tokenize(fields[3])
    try:
        position = int(fields[2])
    except ValueError:
        return f"expected a whole-number token index, found {quoted(fields[2])}"
    if not 0 <= position <= len(tokens):
        digits = str(abs(position))
        shown = digits[:40] + (f"… ({len(digits)} digits)" if len(digits) > 40 else "")
        return f"token index {'-' if position < 0 else ''}{shown} is outside 0 … {len(tokens)} for this text"
    return fields[0], fields[1], tokens, position


INDEXES = st.one_of(st.binary(max_size=6), st.from_regex(rb"\A[ \t\v\f\r\n]*[+-]?[0-9_]{0,5}[ \v\f\r\n]*\Z"),
                    st.integers(-3, 12).map(lambda i: b"%d" % i))
FIELDS = st.binary(max_size=5).filter(lambda field: b"\t" not in field)
ENDS = st.sampled_from([b"", b"\n", b"\r\n", b"\r", b"\n\r\r", b"\t\n"])


@settings(max_examples=400, deadline=None)
@given(name=FIELDS, record_id=FIELDS, at=INDEXES, text=LINES, end=ENDS, tabs=st.integers(0, 3),
       jsonl=st.booleans())
@example(name=b"n", record_id=b"i", at=b"1" * 4300, text=b"the", end=b"\n", tabs=3, jsonl=False)
@example(name=b"n", record_id=b"i", at=b"1" * 4301, text=b"the", end=b"\n", tabs=3, jsonl=False)
@example(name=b"n", record_id=b"i", at=b"0" * 4300 + b"1", text=b"the", end=b"\n", tabs=3, jsonl=False)
@example(name=b"n", record_id=b"i", at=b"99999999999999999999", text=b"the", end=b"\n", tabs=3, jsonl=False)
@example(name=b"n", record_id=b"i", at=b"\xff'\"\\\x7f\x1f", text=b"the", end=b"\n", tabs=3, jsonl=False)
@example(name=b"n", record_id=b"i", at=b"'", text=b"the", end=b"\n", tabs=3, jsonl=False)
@example(name=b"n", record_id=b"i", at=b" -0_0 ", text=b"the", end=b"\n", tabs=3, jsonl=True)
@example(name=b"n", record_id=b"i", at=b"1\x00", text=b"the", end=b"\n", tabs=3, jsonl=False)
def test_a_record_is_read_as_the_python_rule_read_it(index: Core, name: bytes, record_id: bytes,
                                                     at: bytes, text: bytes, end: bytes, tabs: int,
                                                     jsonl: bool) -> None:
    line = b"\t".join([name, record_id, at, text][:tabs + 1]) + (b" ".join([name, record_id, at, text][tabs + 1:]))
    line += end
    options = QueryOptions(n=3, targets=True, format="jsonl" if jsonl else "text")
    rendered = render_lines(index, [line], 7, options)
    rule = python_record_rule(line)
    if isinstance(rule, str):
        assert (rendered.data, rendered.done, rendered.problem) == (b"", 0, rule)
        return
    name, record_id, tokens, position = rule
    word = (tokens + [EOS])[position]
    fields = index.render(index.sentence_ids(tokens), position + 1, position + 2, options.limits, b"",
                          Render.JSON if jsonl else Render.FIELDS, [word], line=7, first_position=position,
                          name=name, id=record_id)
    echoed = b"" if jsonl else line if line.endswith(b"\n") else line + b"\n"
    assert (rendered.data, rendered.done, rendered.problem) == (echoed + fields, 1, None)


def records(count: int, bad: set[int]) -> list[tuple[int, bytes]]:
    """A chunk of ``count`` -t records numbered from 1, those numbered in ``bad`` malformed
    (each in another way)."""
    broken = [b"no tabs at all\n", b"r\t1\tx\tthe cat\n", b"r\t1\t9\tthe cat\n", b"r\t1\n"]
    return [(number, broken[number % len(broken)] if number in bad else
             b"r%d\t%d\t%d\tthe cat of the\n" % (number, number, number % 5)) for number in range(1, count + 1)]


@pytest.mark.parametrize("bad", [set(), {1}, {16}, {CHUNK_LINES}, {1, 2}, {1, 16, CHUNK_LINES},
                                 set(range(1, CHUNK_LINES + 1))])
@pytest.mark.parametrize("output", ["text", "jsonl"])
def test_bad_records_first_in_the_middle_and_last_in_a_chunk(index: Core, monkeypatch: pytest.MonkeyPatch,
                                                             bad: set[int], output: str) -> None:
    """A chunk is one call into C, and one more after each record skipped; without
    --skip-bad-records the first bad record ends it, after the output of the lines before."""
    calls = []
    render_chunk = Core.render_chunk
    monkeypatch.setattr(Core, "render_chunk", lambda *a, **k: calls.append(a[2]) or render_chunk(*a, **k))
    chunk = records(CHUNK_LINES, bad)
    options = QueryOptions(n=3, targets=True, format=output, skip_bad_records=True)
    each = {number: render_lines(index, [line], number, options) for number, line in chunk}
    calls.clear()
    skipped = process_chunk(index, chunk, options, "in.tsv")
    assert calls == [1] + [number + 1 for number in sorted(bad) if number < CHUNK_LINES]
    assert skipped.data == b"".join(each[number].data for number, _ in chunk)
    assert skipped.done == CHUNK_LINES and skipped.error is None
    assert skipped.warnings == [f"fastsubs-query: warning: skipped in.tsv:{number}: {each[number].problem}"
                                for number in sorted(bad)]
    assert all(each[number].problem for number in bad)
    calls.clear()
    stopped = process_chunk(index, chunk, QueryOptions(n=3, targets=True, format=output), "in.tsv")
    first_bad = min(bad, default=CHUNK_LINES + 1)
    assert calls == [1] and stopped.done == first_bad - 1 and stopped.warnings == []
    assert stopped.data == b"".join(each[number].data for number, _ in chunk[:first_bad - 1])
    assert str(stopped.error) == (f"in.tsv:{first_bad}: {each[first_bad].problem}" if bad else "None")


@pytest.mark.parametrize("bad_line", [1, 16, CHUNK_LINES, CHUNK_LINES + 1, 2 * CHUNK_LINES, 70])
def test_the_cli_stops_at_a_bad_record_or_skips_it(tmp_path: Path, tiny_index: Path, bad_line: int) -> None:
    """As the command line runs it, one process or two: the output of the lines before a bad
    record and one line naming it, or with --skip-bad-records the output of the others."""
    good = [b"r%d\t%d\t%d\tthe cat sat\n" % (n, n, n % 4) for n in range(1, 71)]
    lines = good[:bad_line - 1] + [b"r\t1\t3.0\tthe cat sat\n"] + good[bad_line:]
    (tmp_path / "in.tsv").write_bytes(b"".join(lines))
    (tmp_path / "before.tsv").write_bytes(b"".join(lines[:bad_line - 1]))
    (tmp_path / "others.tsv").write_bytes(b"".join(lines[:bad_line - 1] + lines[bad_line:]))
    before = run_cli("fastsubs-query", tiny_index, "-t", "-n", "3", "-i", tmp_path / "before.tsv").stdout
    others = run_cli("fastsubs-query", tiny_index, "-t", "-n", "3", "-i", tmp_path / "others.tsv").stdout
    message = f"{tmp_path / 'in.tsv'}:{bad_line}: expected a whole-number token index, found b'3.0'\n"
    for workers in ("1", "2"):
        stopped = run_cli("fastsubs-query", tiny_index, "-t", "-n", "3", "-i", tmp_path / "in.tsv", "-w", workers,
                          check=False)
        assert (stopped.returncode, stopped.stdout) == (1, before)
        assert stopped.stderr.decode() == f"fastsubs-query: error: {message}"
        skipped = run_cli("fastsubs-query", tiny_index, "-t", "-n", "3", "-i", tmp_path / "in.tsv", "-w", workers,
                          "--skip-bad-records")
        assert skipped.stdout == others and skipped.stderr.decode() == f"fastsubs-query: warning: skipped {message}"


def test_the_cli_splits_lines_as_tokenize_splits_them(tiny_index: Path) -> None:
    """Odd whitespace, markers inside a line, empty lines, bytes that are not UTF-8: every
    position of every line, numbered as Python splits the line."""
    text = [b"\vthe\fcat\rsat\t\n", b"the <s> cat </s> sat <s>\n", b"\n", b"<s>\n", b"the\x1ccat \x85 \xa0\n",
            b"\xff\xfe cat\x00 \r\n", b" \t\v\f\r\n", b"the cat"]
    out = run_cli("fastsubs-query", tiny_index, "-n", "2", "--format", "jsonl", input=b"".join(text)).stdout
    places = [{key: found[key] for key in ("sentence", "position", "word", "word_bytes") if key in found}
              for found in map(json.loads, out.splitlines())]
    assert places == [{"sentence": number, "position": position, **text_fields("word", word)}
                      for number, line in enumerate(text, start=1)
                      for position, word in enumerate(tokenize(line) + [EOS])]


#: Runs fastsubs-query as its entry point does, writing the id of the process to the file
#: named first on its command line each time it opens an index.
_COUNT_OPENS = """
import os, sys
from fastsubs.core import Core
log = sys.argv.pop(1)
open_index = Core.__init__
def counted(self, path):
    with open(log, "a") as out:
        out.write(f"{os.getpid()}\\n")
    open_index(self, path)
Core.__init__ = counted
from fastsubs.query.cli import main
main()
"""


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_each_process_of_a_run_opens_the_index_once(tmp_path: Path, tiny_index: Path, workers: int) -> None:
    """The run's own process opens the index once, for the check, the run's record, the
    warnings and the search; each forked worker once, its own."""
    (tmp_path / "in.txt").write_bytes(b"the cat sat\n" * (8 * CHUNK_LINES))
    log = tmp_path / "opens"
    command = [sys.executable, "-c", _COUNT_OPENS, str(log), str(tiny_index), "-n", "2", "-w", str(workers),
               "-i", str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt"), "--exclude", "dog"]
    with subprocess.Popen(command, stderr=subprocess.PIPE) as run:
        _, errors = run.communicate(timeout=300)
    assert run.returncode == 0, errors.decode()
    assert (tmp_path / "out.txt").read_bytes() == run_cli("fastsubs-query", tiny_index, "-n", "2",
                                                          input=b"the cat sat\n" * (8 * CHUNK_LINES)).stdout
    opens = Counter(int(pid) for pid in log.read_text().split())
    assert opens[run.pid] == 1
    assert sorted(opens.values()) == [1] * min(workers, usable_cores())


#: Runs fastsubs-query as its entry point does, writing to the file named first on its
#: command line "search PID" for each chunk a process searches and "collect PID" each time
#: the run's own process looks for its workers' answers.
_COUNT_SEARCHES = """
import os, sys
from fastsubs.pipeline import workers
from fastsubs.query import run
log = sys.argv.pop(1)
def logged(what, call):
    def counted(*args, **named):
        with open(log, "a") as out:
            out.write(f"{what} {os.getpid()}\\n")
        return call(*args, **named)
    return counted
run.process_chunk = logged("search", run.process_chunk)
workers.WorkerProcesses.collect = logged("collect", workers.WorkerProcesses.collect)
from fastsubs.query.cli import main
main()
"""

#: Reads its input slowly, as a consumer busy with each line would, up to the number of
#: bytes its second argument gives, then at once; keeps it whole.
_SLOW_READER = """
import sys, time
slow = int(sys.argv[2])
with open(sys.argv[1], "wb") as out:
    while piece := sys.stdin.buffer.read(16384):
        out.write(piece)
        if out.tell() < slow:
            time.sleep(0.01)
"""


def chunks_searched(tmp_path: Path, index: Path, text: bytes, slow_output: bool) -> tuple[Counter[int], int, int]:
    """Chunks each process of a ``--workers 2`` run searched, the run's own id, and how
    often it looked for answers; its output checked against one process's.  A slow output
    is taken slowly for its first three quarters, then at once."""
    expected = run_cli("fastsubs-query", index, "-n", "20", input=text).stdout
    (tmp_path / "in.txt").write_bytes(text)
    log, out = tmp_path / "searches", tmp_path / "out.txt"
    log.unlink(missing_ok=True)
    query = [sys.executable, "-c", _COUNT_SEARCHES, str(log), str(index), "-n", "20", "-w", "2",
             "-i", str(tmp_path / "in.txt")]
    if slow_output:
        with subprocess.Popen([sys.executable, "-c", _SLOW_READER, str(out), str(len(expected) * 3 // 4)],
                              stdin=subprocess.PIPE) as reader:
            with subprocess.Popen(query, stdout=reader.stdin, stderr=subprocess.PIPE) as run:
                _, errors = run.communicate(timeout=300)
            assert reader.stdin is not None
            reader.stdin.close()
    else:
        with subprocess.Popen([*query, "-o", str(out)], stderr=subprocess.PIPE) as run:
            _, errors = run.communicate(timeout=300)
    assert run.returncode == 0, errors.decode()
    assert out.read_bytes() == expected
    events = [line.split() for line in log.read_text().splitlines()]
    searches = Counter(int(pid) for what, pid in events if what == "search")
    assert {int(pid) for what, pid in events if what == "collect"} <= {run.pid}
    return searches, run.pid, sum(what == "collect" for what, _ in events)


@pytest.mark.skipif(usable_cores() < 2, reason="--workers 2 needs two cores")
def test_the_run_searches_beside_its_worker_while_writing_leaves_it_time(tmp_path: Path, demo_index: Path) -> None:
    """With output that is cheap to write, the run's own process searches chunks too (two
    processes busy on two cores); with output a slow consumer takes, writing costs it more
    than searching, and it leaves the chunks to its worker once it has measured that (a
    worker would wait for it to write its answers while it searched).  Before it has
    written anything it may search what its worker does not hold: at most
    CHUNKS_AHEAD * 3 chunks (``most`` of parallel_results, less the worker's)."""
    text = b"the cat sat on the mat\n" * (48 * CHUNK_LINES) + (b"the cat sat on the mat " * 50 + b"\n") * 8
    before_measuring = CHUNKS_AHEAD * 3
    fast, run, _ = chunks_searched(tmp_path, demo_index, text, slow_output=False)
    chunks = sum(fast.values())
    assert len(fast) == 2 and fast[run] > before_measuring, fast
    slow, run, looks = chunks_searched(tmp_path, demo_index, text, slow_output=True)
    assert sum(slow.values()) == chunks and len(slow) == 2
    assert slow[run] <= chunks // 8, slow
    # Each round of its loop looks twice at most, and a round follows an answer, input
    # read or a chunk searched.  Its last chunks (long lines), once the reading thread has
    # read them all and the output is taken at once, find it waiting for its worker: a wait
    # that ended at once (the thread's pipe, once closed, is always readable) would look
    # hundreds of times more.
    assert looks <= 4 * chunks + 8, looks


@pytest.mark.parametrize("field", [b"x" * 1_000_000, b"7" * 1_000_000])
def test_a_message_quotes_a_short_prefix_of_a_huge_field(tiny_index: Path, field: bytes) -> None:
    """A position field of a megabyte (not a number, or a number far outside the text) is
    refused in one short line: its first 40 bytes, then its length."""
    result = run_cli("fastsubs-query", tiny_index, "-t", input=b"r\t1\t" + field + b"\tthe cat\n", check=False)
    lines = result.stderr.decode().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and len(lines[0]) < 200, lines
    assert field[:40].decode() in lines[0] and f"({len(field)} " in lines[0]


def _anonymous_memory() -> int:
    """This process's resident anonymous memory, in bytes (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon in /proc/self/status")


def test_a_chunks_output_buffer_is_kept_only_while_small(index: Core) -> None:
    """render_chunk keeps its output buffer for the next call (a chunk's text, ~700 KB at -n
    100, would be new pages, each a fault), but not past 8 MiB: after a chunk whose text is
    bigger (every word of the demo model a substitute, ~80 MB), the process holds no more
    memory than before it, but for the search's own arrays grown to K = V; and a small chunk
    after it writes its own text alone."""
    from conftest import demo_text

    lines = demo_text(16).splitlines(keepends=True)
    small = index.render_chunk(lines[:1], 1, Limits(10), index.excluded([]), Render.LINE).data
    before = _anonymous_memory()
    big = index.render_chunk(lines, 1, Limits(index.vocab_size), index.excluded([]), Render.LINE).data
    size = len(big)
    assert size > 16 << 20  # (bigger than what is kept, by a margin)
    del big
    # A kept buffer would hold all of big's text; what the search keeps after K = V (4-7 MB
    # here, the same after a second such chunk) must not be mistaken for it.
    assert _anonymous_memory() - before < size // 2
    assert index.render_chunk(lines[:1], 1, Limits(10), index.excluded([]), Render.LINE).data == small
