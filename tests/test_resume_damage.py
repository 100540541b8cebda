"""``--resume`` trusts nothing of a stopped run's state unchecked: damage to the partial
output or to its record is refused in one line (OUT is never published), or the output
is correct.

A run is stopped by a bad ``-t`` record (deterministic: the record then describes the
blocks before it, and more is written after it), its state damaged in one way, and the
same command rerun with ``--resume`` on the mended input: it must end with exit 1, one
line saying to start over and no OUT, or with exactly the bytes (the part files) of an
uninterrupted run.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import BIN, run_cli
from fastsubs.query.output_files import PARTIAL_SUFFIX, STATE_SUFFIX
from test_long_runs import one_line, same_output

QUERY = "fastsubs-query"
SENTENCES = [b"the cat sat", b"cat the dog", b"the dog sat on the cat"]


def records(count: int, bad_at: int | None = None) -> bytes:
    lines = [b"r%d\t%d\t%d\t%s\n" % (i, i, i % 3, SENTENCES[i % 3]) for i in range(1, count + 1)]
    if bad_at is not None:
        lines[bad_at - 1] = b"not a record\n"
    return b"".join(lines)


def state_of(out: Path) -> dict:
    return json.loads(Path(f"{out}{STATE_SUFFIX}").read_bytes())


def edit_state(out: Path, change: Callable[[dict], None]) -> None:
    state = state_of(out)
    change(state["resume"])
    Path(f"{out}{STATE_SUFFIX}").write_text(json.dumps(state))


def overwrite(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as stream:
        stream.seek(offset)
        stream.write(data)


def flip(path: Path, offset: int, count: int = 16) -> None:
    data = path.read_bytes()
    overwrite(path, offset, bytes(byte ^ 0xFF for byte in data[offset:offset + count]))


def stopped(index: Path, tmp_path: Path, out_name: str, count: int, bad_at: int, args: list[str]) -> tuple[Path, Path]:
    """A run stopped by a bad record, its partial output kept; returns OUT and the mended input."""
    source = tmp_path / "records.tsv"
    source.write_bytes(records(count, bad_at))
    out = tmp_path / out_name
    result = run_cli(QUERY, index, "-t", *args, "-i", source, "-o", out, check=False)
    assert result.returncode == 1 and not out.exists()
    assert state_of(out)["resume"]["lines"] > 0
    source.write_bytes(records(count))
    return out, source


@pytest.fixture(scope="module")
def uninterrupted(tiny_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[int, list[str], str], Path]:
    """``uninterrupted(count, args, name)``: the output (named ``name``) of an uninterrupted
    ``-t`` run with ``args`` on ``records(count)``, what a resumed run must end with; made
    once for the module, not once for each damage compared with it (the bytes of an output
    depend on its input's bytes, not on its name or the input's)."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    made: dict[tuple[int, tuple[str, ...], str], Path] = {}

    def output(count: int, args: list[str], name: str) -> Path:
        key = (count, tuple(args), name)
        if key not in made:
            source = folder / f"records-{count}.tsv"
            source.write_bytes(records(count))
            made[key] = folder / f"{len(made)}" / name
            made[key].parent.mkdir()
            run_cli(QUERY, tiny_index, "-t", *args, "-i", source, "-o", made[key])
        return made[key]

    return output


def resumed_or_refused(index: Path, source: Path, out: Path, args: list[str], expected: Path) -> str:
    """Resume; either refused in one line with nothing published, or exactly the expected output."""
    result = run_cli(QUERY, index, "-t", *args, "-i", source, "-o", out, "--resume", check=False)
    if result.returncode == 0:
        assert same_output(out, expected)
        return "correct"
    assert result.returncode == 1 and not out.exists()
    line = one_line(result.stderr)
    assert "run without --resume to start over" in line, line
    return line


# --- a file: text, or gzip members ------------------------------------------------------------

def _middle_of_recorded(out: Path) -> int:
    return state_of(out)["resume"]["output"]["bytes"] // 2


FILE_DAMAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "none": (lambda out: None, "correct"),
    "partial-overwritten": (lambda out: overwrite(Path(f"{out}{PARTIAL_SUFFIX}"), _middle_of_recorded(out), b"X" * 16),
                            "SHA-256 differs"),
    "partial-truncated": (lambda out: os.truncate(f"{out}{PARTIAL_SUFFIX}", _middle_of_recorded(out)), "shorter"),
    "bytes-lowered": (lambda out: edit_state(out, lambda point: point["output"].update(
        bytes=point["output"]["bytes"] - 1000)), "SHA-256 differs"),
    "bytes-raised": (lambda out: edit_state(out, lambda point: point["output"].update(
        bytes=point["output"]["bytes"] + 7)), "SHA-256 differs"),
    "sha256-changed": (lambda out: edit_state(out, lambda point: point["output"].update(sha256="0" * 64)),
                       "SHA-256 differs"),
    "sha256-missing": (lambda out: edit_state(out, lambda point: point["output"].pop("sha256")), "damaged"),
    "lines-lowered": (lambda out: edit_state(out, lambda point: point.update(lines=point["lines"] - 32)),
                      "belongs to another input, or its record was changed: the first"),
    "lines-zeroed": (lambda out: edit_state(out, lambda point: point.update(lines=0)),
                     "is damaged: its record says no input line is done"),
    "kind-changed": (lambda out: edit_state(out, lambda point: point["output"].update(kind="dataset")),
                     "cannot read the record"),
}


@pytest.mark.parametrize("suffix", ["txt", "txt.gz"])
@pytest.mark.parametrize("damage", sorted(FILE_DAMAGES))
def test_a_damaged_partial_file_is_refused_or_resumed_correctly(tiny_index: Path, tmp_path: Path, suffix: str,
                                                                damage: str, uninterrupted) -> None:
    args = ["-n", "3"]
    out, source = stopped(tiny_index, tmp_path, f"subs.{suffix}", 400, 250, args)
    expected = uninterrupted(400, args, f"expected.{suffix}")
    change, said = FILE_DAMAGES[damage]
    change(out)
    outcome = resumed_or_refused(tiny_index, source, out, args, expected)
    assert said in outcome
    if outcome != "correct":  # the way out the line names: start over
        run_cli(QUERY, tiny_index, "-t", *args, "-i", source, "-o", out)
        assert out.read_bytes() == expected.read_bytes()
    if suffix.endswith(".gz"):
        gzip.decompress(out.read_bytes())  # whole members, CRCs right


def test_resume_cuts_the_file_back_to_the_record(tiny_index: Path, tmp_path: Path) -> None:
    """What was written after the record (the lines before the bad one) is cut off, not
    overwritten: the resumed run has each record's output once, and none for a record not in
    its input."""
    args = ["-n", "3"]
    out, source = stopped(tiny_index, tmp_path, "subs.txt", 400, 250, args)
    recorded = state_of(out)["resume"]["output"]["bytes"]
    assert Path(f"{out}{PARTIAL_SUFFIX}").stat().st_size > recorded  # more written than recorded
    # the mended input, shorter: its rest's output is shorter than what was cut off
    source.write_bytes(records(230))
    run_cli(QUERY, tiny_index, "-t", *args, "-i", source, "-o", out, "--resume")
    expected = tmp_path / "expected.txt"
    run_cli(QUERY, tiny_index, "-t", *args, "-i", source, "-o", expected)
    assert out.read_bytes() == expected.read_bytes()


def test_resume_with_a_shorter_input_is_refused(tiny_index: Path, tmp_path: Path) -> None:
    args = ["-n", "3"]
    out, source = stopped(tiny_index, tmp_path, "subs.txt", 400, 250, args)
    source.write_bytes(records(100))  # fewer lines than the record holds
    result = run_cli(QUERY, tiny_index, "-t", *args, "-i", source, "-o", out, "--resume", check=False)
    assert result.returncode == 1 and not out.exists()
    assert "has only 100" in one_line(result.stderr)


# --- a Parquet dataset ----------------------------------------------------------------------------

def _parts(out: Path) -> list[Path]:
    return [Path(f"{out}{PARTIAL_SUFFIX}") / entry[0] for entry in state_of(out)["resume"]["output"]["parts"]]


def _unrecorded_part(out: Path) -> None:
    """A part the record does not hold, named as a later part (a SIGTERM's usual state)."""
    first = _parts(out)[0]
    shutil.copyfile(first, first.with_name("part-0000009999.parquet"))


DATASET_DAMAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "none": (lambda out: None, "correct"),
    "unrecorded-part": (_unrecorded_part, "correct"),
    "part-deleted": (lambda out: _parts(out)[1].unlink(), "missing"),
    "part-copied-over-another": (lambda out: shutil.copyfile(_parts(out)[0], _parts(out)[1]), "differs"),
    "part-truncated": (lambda out: os.truncate(_parts(out)[1], _parts(out)[1].stat().st_size // 2), "differs"),
    "part-flipped": (lambda out: flip(_parts(out)[0], _parts(out)[0].stat().st_size // 2), "differs"),
    "parts-unsorted": (lambda out: edit_state(out, lambda point: point["output"]["parts"].reverse()),
                       "does not list the parts"),
    "part-renamed-in-record": (lambda out: edit_state(out, lambda point: point["output"]["parts"][1].__setitem__(
        0, "part-0000009999.parquet")), "does not list the parts"),
    # a part gone from the record and the directory alike: its lines would be missing
    "part-dropped-from-record": (lambda out: (_parts(out)[0].unlink(), edit_state(
        out, lambda point: point["output"]["parts"].pop(0))), "does not list the parts"),
}


@pytest.mark.parametrize("damage", sorted(DATASET_DAMAGES))
def test_a_damaged_dataset_is_refused_or_resumed_correctly(tiny_index: Path, tmp_path: Path, damage: str,
                                                           uninterrupted) -> None:
    pytest.importorskip("pyarrow")
    args = ["-n", "3", "-f", "parquet"]
    # blocks of 1,024 lines: two whole parts recorded, the third published up to the bad record
    out, source = stopped(tiny_index, tmp_path, "subs", 5000, 3000, args)
    assert len(_parts(out)) == 2 and len(os.listdir(f"{out}{PARTIAL_SUFFIX}")) == 3
    expected = uninterrupted(5000, args, "expected")
    change, said = DATASET_DAMAGES[damage]
    change(out)
    assert said in resumed_or_refused(tiny_index, source, out, args, expected)


def test_a_dataset_resumed_on_another_input_is_refused(tiny_index: Path, tmp_path: Path) -> None:
    """A line of the first recorded part changed: the dataset's parts are of another input,
    so --resume refuses in one line, publishes nothing and keeps the parts."""
    pytest.importorskip("pyarrow")
    args = ["-n", "3", "-f", "parquet"]
    out, source = stopped(tiny_index, tmp_path, "subs", 5000, 3000, args)
    kept = sorted(os.listdir(f"{out}{PARTIAL_SUFFIX}"))
    source.write_bytes(records(5000).replace(b"r5\t5\t2\t", b"r5\t5\t1\t"))
    line = resumed_or_refused(tiny_index, source, out, args, tmp_path / "not-made")
    assert "belongs to another input, or its record was changed: the first 2,048 lines" in line
    assert sorted(os.listdir(f"{out}{PARTIAL_SUFFIX}")) == kept


@pytest.mark.parametrize("out_name, args, count, bad", [("subs.txt.gz", ["-n", "3"], 600, (150, 400)),
                                                        ("subs", ["-n", "3", "-f", "parquet"], 5000, (1500, 3500))],
                         ids=["gz", "parquet"])
def test_a_resumed_run_stopped_again_resumes_again(tiny_index: Path, tmp_path: Path, out_name: str, args: list[str],
                                                   count: int, bad: tuple[int, int]) -> None:
    """Stopped by a bad record, resumed, stopped by a later one, resumed again: each resume
    keeps everything recorded before it (the record of a resumed run covers the lines of
    the runs before it too) and searches only the rest, and the last ends with the output
    of an uninterrupted run."""
    if "parquet" in args:
        pytest.importorskip("pyarrow")
    out, source = stopped(tiny_index, tmp_path, out_name, count, bad[0], args)
    first = state_of(out)["resume"]["lines"]
    source.write_bytes(records(count, bad[1]))
    again = run_cli(QUERY, tiny_index, "-t", *args, "-i", source, "-o", out, "--resume", check=False)
    assert again.returncode == 1 and f"{source}:{bad[1]}:" in one_line(again.stderr)
    second = state_of(out)["resume"]["lines"]
    assert first < bad[0] <= second < bad[1]
    source.write_bytes(records(count))
    last = run_cli(QUERY, tiny_index, "-t", *args, "-i", source, "-o", out, "--resume", "--stats")
    assert last.stderr.decode().splitlines()[-1].startswith(f"positions {count - second} ")
    expected = tmp_path / f"expected-{out_name}"
    run_cli(QUERY, tiny_index, "-t", *args, "-i", source, "-o", expected)
    assert same_output(out, expected)


def test_targets_without_a_final_newline_end_at_their_sentence(tiny_index: Path, tmp_path: Path) -> None:
    """A -t input whose last record has no newline gives the output of the same input with it."""
    data = records(40)
    ended, unended = tmp_path / "ended.tsv", tmp_path / "unended.tsv"
    ended.write_bytes(data)
    unended.write_bytes(data.rstrip(b"\n"))
    for args in (["-n", "3"], ["-n", "3", "-f", "jsonl"]):
        with_newline = run_cli(QUERY, tiny_index, "-t", *args, "-i", ended).stdout
        assert run_cli(QUERY, tiny_index, "-t", *args, "-i", unended).stdout == with_newline


def test_a_datasets_record_follows_each_published_part(tiny_index: Path, tmp_path: Path) -> None:
    """The record is written as each whole part is published, not a second later with the
    next: a run killed (SIGKILL, no chance to record) while it waits for more input keeps
    the part it published, and --resume ends with the uninterrupted run's parts."""
    pytest.importorskip("pyarrow")
    data = b"the cat sat on the mat\na dog\n" * 1537  # a whole part and more than a tail's lines after it
    out = tmp_path / "subs"
    process = subprocess.Popen([str(BIN / QUERY), str(tiny_index), "-n", "3", "-f", "parquet", "-o", str(out)],
                               stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdin is not None
        process.stdin.write(data)
        process.stdin.flush()  # and left open: the run waits for the rest
        deadline = time.monotonic() + 60
        while not (Path(f"{out}{STATE_SUFFIX}").exists() and state_of(out)["resume"]["lines"] == 1024):
            assert process.poll() is None and time.monotonic() < deadline, "the part was never recorded"
            time.sleep(0.05)
    finally:
        process.kill()
        process.communicate()
    source = tmp_path / "in.txt"
    source.write_bytes(data)
    expected = tmp_path / "expected"
    run_cli(QUERY, tiny_index, "-n", "3", "-f", "parquet", "-i", source, "-o", expected)
    run_cli(QUERY, tiny_index, "-n", "3", "-f", "parquet", "-i", source, "-o", out, "--resume")
    assert sorted(os.listdir(out)) == sorted(os.listdir(expected))
    assert all((out / name).read_bytes() == (expected / name).read_bytes() for name in os.listdir(expected))


@pytest.mark.parametrize("bad_at", [1000, 1500])
def test_a_dataset_resumes_after_the_parts_of_its_tail(tiny_index: Path, tmp_path: Path, bad_at: int,
                                                       uninterrupted) -> None:
    """An input within a tail's lines is cut into parts of 128 lines: stopped in it, the
    record keeps every whole part before the bad line (not only whole blocks of 1,024), and
    --resume goes on from there to the uninterrupted run's parts."""
    pytest.importorskip("pyarrow")
    args = ["-n", "3", "-f", "parquet"]
    out, source = stopped(tiny_index, tmp_path, "subs", 1800, bad_at, args)
    assert state_of(out)["resume"]["lines"] == (bad_at - 1) // 128 * 128
    expected = uninterrupted(1800, args, "expected")
    assert resumed_or_refused(tiny_index, source, out, args, expected) == "correct"


def test_a_dataset_resumed_in_its_tail_on_a_grown_input_keeps_the_blocks_aligned(tiny_index: Path,
                                                                                  tmp_path: Path) -> None:
    """Resumed after a part of the tail, on an input grown since: the rest of that block is
    one part, and the blocks after it start where an uninterrupted run's do, so the rows are
    the uninterrupted run's and so are the parts from the next block on."""
    pq = pytest.importorskip("pyarrow.parquet")
    args = ["-n", "3", "-f", "parquet"]
    out, source = stopped(tiny_index, tmp_path, "subs", 1800, 1000, args)
    assert state_of(out)["resume"]["lines"] == 896
    source.write_bytes(records(5000))  # grown since
    expected = tmp_path / "expected"
    run_cli(QUERY, tiny_index, "-t", *args, "-i", source, "-o", expected)
    run_cli(QUERY, tiny_index, "-t", *args, "-i", source, "-o", out, "--resume")
    later = sorted(name for name in os.listdir(expected) if name >= "part-0000001025.parquet")
    assert later and later == sorted(name for name in os.listdir(out) if name >= "part-0000001025.parquet")
    assert all((out / name).read_bytes() == (expected / name).read_bytes() for name in later)
    assert pq.read_table(out).to_pylist() == pq.read_table(expected).to_pylist()
