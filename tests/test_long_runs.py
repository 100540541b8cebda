"""Long unattended runs lose nothing: signals, atomic ``-o``, ``--resume``, damaged input.

Real ``fastsubs-query`` processes, real signals sent at random moments drawn from a
fixed seed, real files; every resumed output is compared byte for byte with an
uninterrupted run of the same command.  A killed run is fed its input through a pipe
that stays open, so it is surely still running when the signal comes, wherever it is.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import fastsubs
from conftest import BIN, TEST_DATA, children, demo_text, poll_until, run_cli
from fastsubs.pipeline.lines import CHUNK_LINES, TAIL_LINES
from fastsubs.pipeline.long_lines import LONG_LINE_BYTES
from fastsubs.pipeline.parts import PART_TEMPORARY_PREFIX
from fastsubs.query.output_files import PARTIAL_SUFFIX, STATE_SUFFIX
from fastsubs.query.output_lock import LOCK_SUFFIX

QUERY = "fastsubs-query"
COMPRESSORS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}
STOPPED = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated"), signal.SIGKILL: (-9, None)}


def partial(out: Path) -> Path:
    return Path(f"{out}{PARTIAL_SUFFIX}")


def recorded_lines(out: Path) -> int:
    """Input lines whose output the record of an interrupted run says is kept."""
    return json.loads(Path(f"{out}{STATE_SUFFIX}").read_bytes())["resume"]["lines"]


def same_output(out: Path, expected: Path) -> bool:
    """Whether OUT holds the bytes of ``expected``: a file's, or a dataset's part files."""
    if not expected.is_dir():
        return out.read_bytes() == expected.read_bytes()
    names = sorted(os.listdir(expected))
    return sorted(os.listdir(out)) == names and all((out / name).read_bytes() == (expected / name).read_bytes()
                                                    for name in names)


def stats_positions(stderr: bytes) -> int:
    line = [entry for entry in stderr.decode().splitlines() if entry.startswith("positions ")][-1]
    return int(line.split()[1])


def sentence_positions(lines: list[bytes]) -> int:
    """Positions a plain run searches in ``lines``: every token and the closing </s>."""
    return sum(len(line.split()) + 1 for line in lines)


def one_line(stderr: bytes) -> str:
    text = stderr.decode()
    assert text.count("\n") == 1 and "Traceback" not in text, text
    return text.strip()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """400 sentences of the demo model's (a few seconds of its index at -n 10)."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_bytes(demo_text(400))
    return path


def gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (exited, or a zombie nobody has reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as stream:
            return stream.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system, all threads) process ``pid`` has used so far."""
    with open(f"/proc/{pid}/stat") as stream:
        fields = stream.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def written(out: Path) -> bool:
    """Whether a run has written output for OUT (to OUT.partial; a dataset's: a part, whole
    or still being written)."""
    if partial(out).is_dir():
        return any(os.scandir(partial(out)))
    return partial(out).exists() and partial(out).stat().st_size > 0


def last_whole_block(done: int, read: int) -> int:
    """The input lines an interrupted run's record keeps: those up to the last block of
    CHUNK_LINES written whole among the first ``done`` lines, the blocks that start in the
    last TAIL_LINES lines of the ``read`` it saw being cut smaller (a resumed run starts at a
    block, and cuts the rest as an uninterrupted run, even of an input mended since)."""
    whole = max(read - (TAIL_LINES - CHUNK_LINES) - 1, 0) // CHUNK_LINES * CHUNK_LINES
    return min(whole, done // CHUNK_LINES * CHUNK_LINES)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def interrupted_run(index: Path, input_data: bytes, out: Path, args: list[str], sig: signal.Signals,
                    delay: float, resume: bool = False, group: bool = False) -> bytes:
    """Start ``fastsubs-query INDEX -o OUT ARGS`` on ``input_data`` through a pipe that stays
    open, send ``sig`` (to its whole process group with ``group``, as a terminal's Ctrl-C)
    ``delay`` seconds after it started, and check how it stopped: its exit status, one
    line on stderr, no file at OUT, the partial output kept, no worker left.  Returns stderr."""
    command = [str(BIN / QUERY), str(index), "-o", str(out), *args] + (["--resume"] if resume else [])
    # --workers N forks N - 1 processes (the run's own process is the Nth)
    forked = int(args[args.index("--workers") + 1]) - 1 if "--workers" in args else 0
    state = Path(f"{out}{STATE_SUFFIX}")
    earlier = _inode(state)
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=group)

    def feed() -> None:
        try:
            assert process.stdin is not None
            process.stdin.write(input_data)
            process.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # stopped before reading it all

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        deadline = time.monotonic() + 120
        # Started: its handlers are in place once it records its (new) state; its workers run;
        # it has written some output, if it was given input.
        while (_inode(state) in (None, earlier) or len(children(process.pid)) < forked
               or (input_data and not written(out))):
            assert process.poll() is None, process.stderr.read().decode()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.02)
        time.sleep(delay)
        assert process.poll() is None, "the run ended without its input's end: it cannot have finished"
        pool = children(process.pid)
        if group:
            os.killpg(process.pid, sig)
        else:
            process.send_signal(sig)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdin is not None:
            process.stdin.close()
        feeder.join()
    status, word = STOPPED[sig]
    assert process.returncode == status, stderr.decode()
    if word is not None:
        assert one_line(stderr).startswith(f"fastsubs-query: {word}")
    assert not out.exists(), "an interrupted run left a file at the -o path"
    assert partial(out).exists()
    deadline = time.monotonic() + 60
    while not all(gone(worker) for worker in pool):
        assert time.monotonic() < deadline, "a worker outlived its parent"
        time.sleep(0.05)
    return stderr


# --- signals, then --resume ------------------------------------------------------------

CASES = [  # signal, output file, options; each resumed and compared byte for byte
    (signal.SIGINT, "subs.txt", ["-n", "10"]),
    (signal.SIGTERM, "subs.txt.gz", ["-n", "10", "--workers", "2"]),
    (signal.SIGKILL, "subs.txt.xz", ["-n", "3", "--format", "jsonl"]),
    pytest.param(signal.SIGTERM, "subs.txt.bz2", ["-n", "5", "--sample", "3", "--seed", "7", "--workers", "2"],
                 marks=pytest.mark.slow),
    pytest.param(signal.SIGINT, "subs.txt.gz", ["-p", "0.5", "-z", "--no-eos"], marks=pytest.mark.slow),
]


def _case_id(case: tuple | object) -> str:
    sig, name, args = case.values if hasattr(case, "values") else case  # type: ignore[union-attr]
    return f"{sig.name}-{name}-{'-'.join(args)}"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("sig, name, args", CASES, ids=[_case_id(case) for case in CASES])
def test_a_stopped_run_resumes_to_the_uninterrupted_bytes(demo_index: Path, corpus: Path, tmp_path: Path,
                                                          sig: signal.Signals, name: str, args: list[str]) -> None:
    rng = random.Random(f"{sig.name}{name}")
    expected = tmp_path / f"expected-{name}"
    whole = run_cli(QUERY, demo_index, "-i", corpus, "-o", expected, "--stats", *args)
    out = tmp_path / name
    interrupted_run(demo_index, corpus.read_bytes(), out, args, sig, rng.uniform(0.0, 1.5))
    done = recorded_lines(out)
    if sig != signal.SIGKILL:  # a stop it sees records every line it wrote
        assert done > 0
    resumed = run_cli(QUERY, demo_index, "-i", corpus, "-o", out, "--resume", "--stats", *args)
    assert out.read_bytes() == expected.read_bytes()
    assert not partial(out).exists() and not Path(f"{out}{STATE_SUFFIX}").exists()
    if "--sample" not in args and "--no-eos" not in args:
        first = corpus.read_bytes().splitlines(keepends=True)[:done]
        assert stats_positions(resumed.stderr) == stats_positions(whole.stderr) - sentence_positions(first)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=["SIGKILL", "SIGTERM", "SIGINT"])
def test_workers_die_with_the_parent_quietly(demo_index: Path, tmp_path: Path, sig: signal.Signals) -> None:
    """Stopped while waiting for input, workers started; SIGINT goes to the whole group, as Ctrl-C does."""
    interrupted_run(demo_index, b"", tmp_path / "subs.txt", ["--workers", "2"], sig, 0.0,
                    group=sig == signal.SIGINT)


def test_ctrl_c_mid_run_stops_every_process_with_one_line(demo_index: Path, corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "subs.txt"
    interrupted_run(demo_index, corpus.read_bytes(), out, ["--workers", "2"], signal.SIGINT,
                    random.Random(3).uniform(0.0, 1.0), group=True)
    run_cli(QUERY, demo_index, "-i", corpus, "-o", out, "--resume")
    assert out.read_bytes() == run_cli(QUERY, demo_index, "-i", corpus).stdout


# --- refusals ----------------------------------------------------------------------------

def test_resume_refuses_a_partial_output_of_another_run(demo_index: Path, tiny_index: Path, corpus: Path,
                                                        tmp_path: Path) -> None:
    """Every run asks for -n 5, which the other index (the tiny one: its 6 words but <s>) gives too."""
    lines = corpus.read_bytes().splitlines(keepends=True)
    truncated = tmp_path / "corpus.txt.gz"
    whole = gzip.compress(b"".join(lines))
    truncated.write_bytes(whole[: len(whole) // 2])
    out = tmp_path / "subs.txt"
    stopped = run_cli(QUERY, demo_index, "-n", "5", "-i", truncated, "-o", out, check=False)
    assert stopped.returncode == 1 and not out.exists()
    kept = partial(out).read_bytes()
    assert recorded_lines(out) > 0

    other_input = tmp_path / "other.txt"
    other_input.write_bytes(b"".join(reversed(lines)))
    refusals = {
        "another input": [demo_index, "-n", "5", "-i", other_input],
        "with other options (-n was 5)": [demo_index, "-n", "6", "-i", corpus],
        "another index": [tiny_index, "-n", "5", "-i", corpus],
        "fewer than": None,  # an input shorter than what is done
    }
    short = tmp_path / "short.txt"
    short.write_bytes(b"".join(lines[:3]))
    refusals["fewer than"] = [demo_index, "-n", "5", "-i", short]
    for words, args in refusals.items():
        refused = run_cli(QUERY, *args, "-o", out, "--resume", check=False)
        assert refused.returncode == 1
        message = one_line(refused.stderr)
        assert str(partial(out)) in message and ("has only" if words == "fewer than" else words) in message
        assert partial(out).read_bytes() == kept and not out.exists()

    state = out.with_name(out.name + STATE_SUFFIX)
    record = state.read_bytes()
    older = json.loads(record)
    older["version"] -= 1  # what an earlier fastsubs-query recorded
    state.write_text(json.dumps(older))
    refused = run_cli(QUERY, demo_index, "-n", "5", "-i", corpus, "-o", out, "--resume", check=False)
    assert refused.returncode == 1 and "written by another version of fastsubs-query" in one_line(refused.stderr)
    assert partial(out).read_bytes() == kept and not out.exists()
    state.write_bytes(record)

    run_cli(QUERY, demo_index, "-n", "5", "-i", corpus, "-o", out, "--resume")
    assert out.read_bytes() == run_cli(QUERY, demo_index, "-n", "5", "-i", corpus).stdout


def test_resume_needs_a_file_and_starts_over_when_there_is_nothing_to_resume(tiny_index: Path,
                                                                            tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes((TEST_DATA / "tiny-input.txt").read_bytes() * 10)
    usage = run_cli(QUERY, tiny_index, "-i", source, "--resume", check=False)
    assert usage.returncode == 2 and b"-o" in usage.stderr
    out = tmp_path / "out.txt"
    fresh = run_cli(QUERY, tiny_index, "-i", source, "-o", out, "--resume")
    assert b"nothing" in fresh.stderr or b"no interrupted run" in fresh.stderr
    assert out.read_bytes() == run_cli(QUERY, tiny_index, "-i", source).stdout


# --- damaged input -------------------------------------------------------------------------

def _damaged(data: bytes, how: str, kind: str) -> bytes:
    packed = COMPRESSORS[kind](data)
    if how == "truncated":
        return packed[: len(packed) * 2 // 3]
    middle = len(packed) // 2
    return packed[:middle] + bytes(byte ^ 0x5A for byte in packed[middle:middle + 64]) + packed[middle + 64:]


def _readable_lines(path: Path) -> list[bytes]:
    """The lines a reader of ``path`` gets before the damage stops it (what the format's own library gives)."""
    opener = {"gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}[path.suffix[1:]]
    lines: list[bytes] = []
    try:
        with opener(path, "rb") as stream:
            for line in stream:
                lines.append(line)
    except (EOFError, OSError, lzma.LZMAError):
        return lines
    raise AssertionError(f"{path} reads without error")


TINY_CORPUS = b"".join(f"the cat sat {i}\ncat the dog\nthe dog sat on the cat\n".encode() for i in range(1500))


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
@pytest.mark.parametrize("how", ["truncated", "corrupt"])
def test_damaged_compressed_input_names_file_and_line(tiny_index: Path, tmp_path: Path, kind: str,
                                                      how: str) -> None:
    source = tmp_path / f"corpus.txt.{kind}"
    source.write_bytes(_damaged(TINY_CORPUS, how, kind))
    good = _readable_lines(source)
    result = run_cli(QUERY, tiny_index, "-i", source, check=False)
    assert result.returncode == 1
    assert one_line(result.stderr).startswith(f"fastsubs-query: error: {source}:{len(good) + 1}: ")
    assert result.stdout == run_cli(QUERY, tiny_index, input=b"".join(good)).stdout


def test_damaged_input_keeps_the_partial_output_for_resume(tiny_index: Path, tmp_path: Path) -> None:
    source = tmp_path / "corpus.txt.gz"
    source.write_bytes(_damaged(TINY_CORPUS, "truncated", "gz"))
    out = tmp_path / "subs.txt.gz"
    result = run_cli(QUERY, tiny_index, "-i", source, "-o", out, "--stats", check=False)
    assert result.returncode == 1 and not out.exists()
    good = _readable_lines(source)
    assert f"{source}:{len(good) + 1}:" in one_line(result.stderr)
    assert gzip.decompress(partial(out).read_bytes()) == run_cli(QUERY, tiny_index, input=b"".join(good)).stdout
    kept = last_whole_block(len(good), len(good))
    assert 0 < kept < len(good) and recorded_lines(out) == kept

    source.write_bytes(gzip.compress(TINY_CORPUS))  # the complete file, downloaded again
    resumed = run_cli(QUERY, tiny_index, "-i", source, "-o", out, "--resume", "--stats")
    expected = tmp_path / "expected.txt.gz"
    run_cli(QUERY, tiny_index, "-i", source, "-o", expected)
    assert out.read_bytes() == expected.read_bytes()
    rest = TINY_CORPUS.splitlines(keepends=True)[kept:]
    assert stats_positions(resumed.stderr) == sentence_positions(rest)


# --- -t stopping at a bad record ----------------------------------------------------------------

def _records(bad_at: int | None) -> bytes:
    sentences = [b"the cat sat", b"cat the dog", b"the dog sat on the cat"]
    lines = [b"r%d\t%d\t%d\t%s\n" % (i, i, i % 3, sentences[i % 3]) for i in range(1, 101)]
    if bad_at is not None:
        lines[bad_at - 1] = b"not a record\n"
    return b"".join(lines)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_targets_stop_exactly_before_the_bad_record(tiny_index: Path, tmp_path: Path, workers: str) -> None:
    bad_at = 70  # inside the third chunk of 32 lines
    source = tmp_path / "records.tsv"
    source.write_bytes(_records(bad_at))
    result = run_cli(QUERY, tiny_index, "-t", "-n", "3", "-i", source, "--workers", workers, check=False)
    assert result.returncode == 1
    assert one_line(result.stderr).startswith(f"fastsubs-query: error: {source}:{bad_at}: ")
    before = b"".join(_records(None).splitlines(keepends=True)[: bad_at - 1])
    assert result.stdout == run_cli(QUERY, tiny_index, "-t", "-n", "3", input=before).stdout

    out = tmp_path / "subs.txt.gz"
    stopped = run_cli(QUERY, tiny_index, "-t", "-n", "3", "-i", source, "-o", out, "--workers", workers,
                      check=False)
    assert stopped.returncode == 1 and not out.exists()
    assert gzip.decompress(partial(out).read_bytes()) == result.stdout
    source.write_bytes(_records(None))  # the record fixed
    resumed = run_cli(QUERY, tiny_index, "-t", "-n", "3", "-i", source, "-o", out, "--resume", "--stats",
                      "--workers", workers)
    expected = tmp_path / "expected.txt.gz"
    run_cli(QUERY, tiny_index, "-t", "-n", "3", "-i", source, "-o", expected)
    assert out.read_bytes() == expected.read_bytes()
    kept = last_whole_block(bad_at - 1, 100)  # 0: the input is shorter than the blocks cut small at its end
    assert stats_positions(resumed.stderr) == 100 - kept


# --- errors that name their file ----------------------------------------------------------------

def test_a_full_stdout_names_it(tiny_index: Path) -> None:
    with open("/dev/full", "wb") as full:
        result = subprocess.run([str(BIN / QUERY), str(tiny_index)], input=TINY_CORPUS, stdout=full,
                                stderr=subprocess.PIPE, timeout=120)
    assert result.returncode == 1
    message = one_line(result.stderr)
    assert "<stdout>" in message and "No space left" in message


@pytest.mark.parametrize("name", ["subs.txt", "subs.txt.gz"])
def test_a_full_disk_names_the_output_and_leaves_no_result(tiny_index: Path, small_disk: Path,
                                                           name: str) -> None:
    out = small_disk / name
    result = run_cli(QUERY, tiny_index, "-o", out, input=TINY_CORPUS * 4, check=False)
    assert result.returncode == 1
    message = one_line(result.stderr)
    assert str(partial(out)) in message and "No space left" in message
    assert not out.exists()


def test_an_unwritable_output_is_named(tiny_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "missing-dir" / "subs.txt"
    result = run_cli(QUERY, tiny_index, "-o", out, input=b"the cat\n", check=False)
    assert result.returncode == 1 and str(out) in one_line(result.stderr)


# --- the Python API's argument errors -----------------------------------------------------------

def test_the_api_raises_fastsubs_errors_for_bad_arguments(tiny_index: Path) -> None:
    with fastsubs.open_index(tiny_index) as index:
        for call in (lambda: index.sentence("the cat", n=0), lambda: index.sentence("the cat", n=2.5),
                     lambda: index.sentence("the cat", p=1.5), lambda: index.sentence("the cat", p=-0.1),
                     lambda: index.position(["the", "cat"], 3), lambda: index.position(["the", "cat"], -1)):
            with pytest.raises(fastsubs.ArgumentError) as raised:
                call()
            assert isinstance(raised.value, fastsubs.FastsubsError) and isinstance(raised.value, ValueError)
        assert len(index.position(["the", "cat"], 2, n=1)) == 1  # </s> is a valid position


# --- slow: many kills in a row ------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name, args", [("subs.txt", ["--workers", "2"]), ("subs.txt.gz", []),
                                        ("subs.txt.gz", ["--workers", "2"]),
                                        ("subs.txt.xz", ["-n", "20", "-p", "0.9"])])
def test_a_run_killed_again_and_again_resumes_to_the_uninterrupted_bytes(demo_index: Path, tmp_path: Path,
                                                                         name: str, args: list[str]) -> None:
    """Kill, resume, kill the resumed run… with random signals at random moments, then let it finish."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(demo_text(1500))
    rng = random.Random(17)
    expected = tmp_path / f"expected-{name}"
    run_cli(QUERY, demo_index, "-i", corpus, "-o", expected, *args)
    out = tmp_path / name
    signals = [signal.SIGKILL, signal.SIGTERM, signal.SIGINT]
    progress = []
    for attempt in range(12):
        interrupted_run(demo_index, corpus.read_bytes(), out, args, rng.choice(signals), rng.uniform(0, 2.5),
                        resume=attempt > 0)
        progress.append(recorded_lines(out))
    assert max(progress) > 0
    run_cli(QUERY, demo_index, "-i", corpus, "-o", out, "--resume", *args)
    assert out.read_bytes() == expected.read_bytes()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_full_disk_under_parquet_names_the_part(demo_index: Path, small_disk: Path, workers: str) -> None:
    """pyarrow's own message names no file: the part being written is named, from the
    process that wrote it too."""
    pytest.importorskip("pyarrow")
    out = small_disk / "subs"
    result = run_cli(QUERY, demo_index, "-n", "100", "-f", "parquet", "-o", out, "--workers", workers,
                     input=demo_text(1200), check=False)
    assert result.returncode == 1
    message = one_line(result.stderr)
    assert f"{partial(out)}/" in message and "cannot write the output" in message and "No space left" in message, \
        message
    assert not out.exists()


def searching_a_long_line(command: list[str], tmp_path: Path) -> subprocess.Popen[bytes]:
    """Start ``command`` on a line of 300,000 words (many seconds of search, in windows: it
    is a long line) and return once it searches the line's windows: their output has
    spilled to its file in the run's $TMPDIR (not a fixed sleep, which waited 2 s)."""
    words = demo_text(400).split()
    source = tmp_path / "long.txt"
    source.write_bytes(b" ".join((words * (300_000 // len(words) + 1))[:300_000]) + b"\n")
    assert source.stat().st_size > LONG_LINE_BYTES
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    process = subprocess.Popen([*command, "-i", str(source)], stderr=subprocess.PIPE,
                               env={**os.environ, "TMPDIR": str(scratch)})
    poll_until(process, lambda: any(scratch.rglob("*.out")), "the run never searched the line")
    time.sleep(0.1)  # some way into the line
    assert process.poll() is None, "the line was done before the signal: make it longer"
    return process


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_signal_is_acted_on_in_the_middle_of_a_long_line(demo_index: Path, tmp_path: Path, sig: signal.Signals,
                                                           workers: str) -> None:
    """One line of 300,000 words (many seconds of search): a stop signal sent in the middle
    of it ends the run within a second (the search asks for signals every few positions),
    with its one line and exit status, not after the line."""
    out = tmp_path / "subs.txt"
    process = searching_a_long_line([str(BIN / QUERY), str(demo_index), "-n", "100", "-o", str(out),
                                     "--workers", workers], tmp_path)
    sent = time.monotonic()
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)
    took = time.monotonic() - sent
    code, word = STOPPED[sig]
    assert process.returncode == code and word in one_line(stderr)
    assert took < 1.0, f"acted on {took:.2f} s after the signal"
    assert not out.exists()


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_an_input_of_no_lines_gives_a_valid_compressed_output(tiny_index: Path, tmp_path: Path, kind: str) -> None:
    out = tmp_path / f"subs.txt.{kind}"
    run_cli(QUERY, tiny_index, "-o", out, input=b"")
    assert {"gz": gzip, "bz2": bz2, "xz": lzma}[kind].decompress(out.read_bytes()) == b""


def test_a_part_stopped_mid_search_leaves_no_temporary_file(demo_index: Path, tmp_path: Path) -> None:
    """SIGTERM in the middle of a part (a long line: the search stops within it): the part
    being written is removed, not left under its temporary name in the dataset."""
    pytest.importorskip("pyarrow")
    out = tmp_path / "subs"
    words = demo_text(400).split()
    source = tmp_path / "long.txt"
    source.write_bytes(b" ".join((words * (300_000 // len(words) + 1))[:300_000]) + b"\n")
    process = subprocess.Popen([str(BIN / QUERY), str(demo_index), "-n", "100", "-i", str(source), "-f", "parquet",
                                "-o", str(out)], stderr=subprocess.PIPE)
    poll_until(process, lambda: partial(out).is_dir() and any(  # the part is being written
        name.startswith(PART_TEMPORARY_PREFIX) for name in os.listdir(partial(out))), "the part was never started")
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143 and "terminated" in one_line(stderr)
    assert partial(out).is_dir() and os.listdir(partial(out)) == []


# --- one writer per output ------------------------------------------------------------------

def holding(process: subprocess.Popen, out: Path) -> None:
    """Wait until ``process`` holds OUT: its lock file names it, and it has recorded its start."""
    lock = Path(f"{out}{LOCK_SUFFIX}")
    poll_until(process, lambda: lock.exists() and lock.read_text().startswith(f"{process.pid} ")
                       and Path(f"{out}{STATE_SUFFIX}").exists(), "the run never took its output")


@pytest.mark.parametrize("resume", [False, True], ids=["anew", "resume"])
@pytest.mark.parametrize("name, args", [("subs.txt.gz", []), ("subs", ["-f", "parquet"])], ids=["gz", "parquet"])
def test_a_second_run_on_an_output_being_written_refuses_in_one_line(demo_index: Path, corpus: Path, tmp_path: Path,
                                                                     name: str, args: list[str], resume: bool) -> None:
    """A run that writes OUT (its input still coming) holds it: a second run of the same
    command, with --resume or not (a scheduler's retry, a second terminal), refuses at once
    in one line naming OUT and the first run's pid, and touches nothing; the first run then
    ends with the output of an uninterrupted run."""
    expected = tmp_path / f"expected-{name}"
    run_cli(QUERY, demo_index, "-n", "3", *args, "-i", corpus, "-o", expected)
    out = tmp_path / name
    again = ["--resume"] if resume else []
    first = subprocess.Popen([str(BIN / QUERY), str(demo_index), "-n", "3", *args, "-o", str(out), *again],
                             stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert first.stdin is not None
    lines = corpus.read_bytes().splitlines(keepends=True)
    try:
        first.stdin.write(b"".join(lines[:200]))
        first.stdin.flush()
        holding(first, out)
        second = run_cli(QUERY, demo_index, "-n", "3", *args, "-i", corpus, "-o", out, *again, check=False)
        assert second.returncode == 1
        assert one_line(second.stderr) == (f"fastsubs-query: error: {out}: cannot write the output (another "
                                           f"fastsubs-query, pid {first.pid}, is writing it: wait for that run to "
                                           "end, or stop it)")
        first.stdin.write(b"".join(lines[200:]))
    finally:
        first.stdin.close()
        stderr = first.stderr.read()  # type: ignore[union-attr]
        first.wait(timeout=300)
    assert first.returncode == 0, stderr.decode()
    assert same_output(out, expected)
    assert not Path(f"{out}{LOCK_SUFFIX}").exists()  # a run that ends removes its lock file


# --- finishing -----------------------------------------------------------------------------

def finished_writing(out: Path, expected: Path) -> bool:
    """Whether a run has written, and for a dataset recorded, all of ``expected``'s output."""
    if expected.is_dir():
        state = Path(f"{out}{STATE_SUFFIX}")
        parts = json.loads(state.read_bytes())["resume"]["output"]["parts"] if state.exists() else []
        return sorted(name for name, *_ in parts) == sorted(os.listdir(expected))
    return partial(out).exists() and partial(out).stat().st_size == expected.stat().st_size


@pytest.mark.parametrize("name, args", [("subs.txt", []), ("subs.txt.gz", []), ("subs.jsonl", ["-f", "jsonl"]),
                                        ("subs", ["-f", "parquet"])], ids=["text", "gz", "jsonl", "parquet"])
def test_a_run_killed_as_it_publishes_is_finished_by_resume(demo_index: Path, corpus: Path, tmp_path: Path,
                                                            name: str, args: list[str]) -> None:
    """SIGKILL after the run has written (a dataset: recorded) the output of its last line,
    before OUT is published: --resume publishes the uninterrupted run's output.  The run is
    held in that stretch by a FIFO where it writes OUT.json (opening one waits for a reader),
    so the kill lands there, wherever in it."""
    expected = tmp_path / f"expected-{name}"
    run_cli(QUERY, demo_index, "-n", "3", *args, "-i", corpus, "-o", expected)
    out = tmp_path / name
    provenance = Path(f"{out}.json.tmp")
    os.mkfifo(provenance)
    process = subprocess.Popen([str(BIN / QUERY), str(demo_index), "-n", "3", *args, "-i", str(corpus), "-o", str(out)],
                               stderr=subprocess.PIPE)
    try:
        poll_until(process, lambda: finished_writing(out, expected), "the run never wrote its whole output")
    finally:
        process.kill()
        process.communicate()
    assert not out.exists()
    provenance.unlink()
    run_cli(QUERY, demo_index, "-n", "3", *args, "-i", corpus, "-o", out, "--resume")
    assert same_output(out, expected)


# --- stops --------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("args", [[], ["-f", "parquet"]], ids=["text", "parquet"])
def test_a_run_stopped_while_its_input_pipe_is_open_exits_with_its_signal(tiny_index: Path, tmp_path: Path,
                                                                         sig: signal.Signals, args: list[str]) -> None:
    """--workers 2, its input written and the pipe left open: the thread that reads it waits
    for more.  Stopped then, the run exits 143 (130) with its one line, three times out of
    three: the reading thread is stopped and waited for (a daemon still holding stdin's lock
    as Python shut down made it abort with 134)."""
    data = b"the cat sat on the mat\na dog barks\n" * 2600  # past a dataset's first part and its tail
    for attempt in range(3):
        out = tmp_path / f"subs-{attempt}"
        process = subprocess.Popen([str(BIN / QUERY), str(tiny_index), "-n", "3", "--workers", "2", *args,
                                    "-o", str(out)], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdin is not None and process.stderr is not None
        try:
            process.stdin.write(data)
            process.stdin.flush()
            # the input read (the first chunk's output comes after it is)
            poll_until(process, lambda out=out: written(out), "the run never wrote")
            process.send_signal(sig)
            status = process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
            process.stdin.close()
        stderr = process.stderr.read()
        process.stderr.close()
        code, word = STOPPED[sig]
        assert status == code, stderr.decode()
        assert one_line(stderr).startswith(f"fastsubs-query: {word}")


# A main thread that ends without stopping the reading thread (as a stop signal that lands
# while the thread starts left it, __enter__ waiting for it): the input pipe stays open, and
# the thread waits for more input, or for room for what it read.
ABANDONED_READING_THREAD = """
import sys
from fastsubs.query.reading import ReadingThread, open_input
stream, raw = open_input(None)
lines = iter(stream.readline, b"")
reading = ReadingThread(lines, int(sys.argv[1]), raw.stop).__enter__()
print("started", flush=True)
"""


@pytest.mark.parametrize("waiting_for", ["input", "room"])
def test_a_reading_thread_ends_with_the_main_thread_that_never_stopped_it(tmp_path: Path, waiting_for: str) -> None:
    """The interpreter, at exit, waits for the thread; the thread sees the main thread has
    ended and ends (a run stopped as its reading thread started hung there, Python 3.10)."""
    ahead = 1 if waiting_for == "room" else 1000
    process = subprocess.Popen([str(BIN / "python"), "-c", ABANDONED_READING_THREAD, str(ahead)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(b"a line\n" * 10)  # more than one item ahead: the thread waits for room
        process.stdin.flush()
        assert process.stdout.readline() == b"started\n"
        status = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        process.stdin.close()
        stderr = process.stderr.read()  # type: ignore[union-attr]
    assert status == 0, stderr.decode()


# The main thread takes chunks from the reading thread while stop signals keep landing (a
# handler that raises, as SIGINT's and SIGTERM's do in a run), then stops the thread and
# waits for it.
SIGNALS_WHILE_TAKING_CHUNKS = """
import signal, sys, threading, time
from pathlib import Path
from fastsubs.query.reading import ReadingThread, open_input

class Stop(Exception):
    pass

armed = False  # raised only within next_ready's call: nowhere else in this loop
def raise_stop(signum, frame):
    if armed:
        raise Stop

signal.signal(signal.SIGINT, raise_stop)
stream, raw = open_input(Path(sys.argv[1]))
reading = ReadingThread(iter(stream.readline, b""), 2, raw.stop).__enter__()
main, sending = threading.main_thread().ident, True
def send():
    while sending:
        signal.pthread_kill(main, signal.SIGINT)
        time.sleep(0.0002)
sender = threading.Thread(target=send)
sender.start()
deadline, stops = time.monotonic() + float(sys.argv[2]), 0
while time.monotonic() < deadline:
    try:
        armed = True
        reading.next_ready()
    except Stop:
        stops += 1
    finally:
        armed = False
sending = False
sender.join()
reading.__exit__(None, None, None)
print(stops, "ended", flush=True)
"""


def test_a_stop_signal_while_a_chunk_is_taken_leaves_the_reading_thread_free_to_end(tmp_path: Path) -> None:
    """A signal whose handler raises as the main thread takes a chunk from the reading
    thread's queue must not leave the queue's lock held (its ``with`` is entered in Python
    code, where the exception can land after the lock is taken and before the block that
    releases it): the reading thread would wait for the lock for ever, and a stopped run
    (``--workers 2``, its input pipe open) for the thread.  Half a second of signals, then
    the thread is stopped: it ends (without the signals held there: hung 10 times in 10)."""
    source = tmp_path / "in.txt"
    source.write_bytes(b"a line\n" * 500_000)  # not all read in the half second: the thread stays busy
    result = subprocess.run([str(BIN / "python"), "-c", SIGNALS_WHILE_TAKING_CHUNKS, str(source), "0.5"],
                            capture_output=True, timeout=30)
    assert result.returncode == 0 and result.stdout.endswith(b" ended\n"), result.stderr.decode()


def test_a_signal_is_acted_on_in_the_middle_of_a_line_just_under_the_long_line_threshold(demo_index: Path,
                                                                                        tmp_path: Path) -> None:
    """A plain line a little shorter than LONG_LINE_BYTES is searched whole, in one call
    into C (tens of seconds at -n 100): a stop signal sent once that search is under way
    ends the run within a second, as in a long line's windows."""
    words = demo_text(400).split()
    line = b" ".join(words * (LONG_LINE_BYTES // len(b" ".join(words)) + 1))[:LONG_LINE_BYTES - 1000]
    source = tmp_path / "in.txt"
    source.write_bytes(demo_text(4) + line.rsplit(b" ", 1)[0] + b"\n")  # 5 lines: chunks of 4, then the long one
    process = subprocess.Popen([str(BIN / QUERY), str(demo_index), "-n", "100", "-i", str(source)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    try:
        ends = 0
        while ends < 4:  # the first chunk's output is out: the line's search follows at once
            output = process.stdout.readline()
            assert output, process.stderr.read().decode()  # type: ignore[union-attr]
            ends += output.startswith(b"</s>\t")
        # ... and has begun once the run has used some CPU since: a signal that lands before
        # the call into C (the run's few steps after the write, or its wait for a CPU on a
        # busy machine) is acted on at once however the search treats signals, and the test
        # passed then without seeing whether the search asks for them.
        searching = cpu_seconds(process.pid) + 0.3
        poll_until(process, lambda: cpu_seconds(process.pid) >= searching, "the run never searched the line")
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 143 and "terminated" in one_line(stderr)
    assert took < 1.0, f"acted on {took:.2f} s after the signal"
