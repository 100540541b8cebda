"""What ``fastsubs-query`` refuses or caps to keep a user's files and machine safe, or
caps to what the model has: an output that names its input, more searching processes
than there are cores, more substitutes than the vocabulary holds."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fastsubs
from conftest import BIN, run_cli

TEXT = b"the cat sat\ncat the dog\n\nthe dog sat on the cat\n" * 20


def files_in(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.iterdir() if not path.is_symlink()}


@pytest.mark.parametrize("output_is", ["the input", "a hard link to it", "a symbolic link to it",
                                       "the input, compressed", "the file stdin reads"])
def test_an_output_that_is_the_input_is_refused_before_anything_is_written(tiny_index: Path, tmp_path: Path,
                                                                           output_is: str) -> None:
    compressed = output_is == "the input, compressed"
    source = tmp_path / ("corpus.txt.gz" if compressed else "corpus.txt")
    source.write_bytes(gzip.compress(TEXT) if compressed else TEXT)
    target = source
    if output_is == "a hard link to it":
        target = tmp_path / "linked.txt"
        os.link(source, target)
    elif output_is == "a symbolic link to it":
        target = tmp_path / "pointing.txt"
        target.symlink_to(source.name)
    before = files_in(tmp_path)
    if output_is == "the file stdin reads":
        with open(source, "rb") as stdin:
            result = subprocess.run([str(BIN / "fastsubs-query"), str(tiny_index), "-n", "3",
                                     "-o", str(target)], stdin=stdin, capture_output=True, timeout=120)
    else:
        result = run_cli("fastsubs-query", tiny_index, "-n", "3", "-i", source, "-o", target, check=False)
    assert result.returncode == 1 and result.stdout == b""
    [line] = result.stderr.decode().splitlines()
    assert line.startswith(f"fastsubs-query: error: {target}: ") and "name another file" in line
    assert files_in(tmp_path) == before  # the input intact, nothing beside it


# Runs fastsubs-query as installed (its console-script entry point), counting the processes
# it forks: os.register_at_fork sees every fork of the process, multiprocessing's included.
COUNTING_FORKS = """
import atexit, os, sys
from importlib.metadata import entry_points
forks = []
os.register_at_fork(after_in_parent=lambda: forks.append(1))
me = os.getpid()
atexit.register(lambda: os.getpid() == me and print(f"forked {len(forks)}", file=sys.stderr))
[script] = entry_points(group="console_scripts", name="fastsubs-query")
sys.argv = ["fastsubs-query", *sys.argv[1:]]
script.load()()
"""


def counting_forks(*args: str | Path, cores: set[int] | None = None) -> tuple[bytes, list[str], int]:
    """stdout, the stderr lines before the count, and the processes forked."""
    result = subprocess.run([sys.executable, "-c", COUNTING_FORKS, *map(str, args)], capture_output=True,
                            timeout=120, preexec_fn=None if cores is None else lambda: os.sched_setaffinity(0, cores))
    assert result.returncode == 0, result.stderr.decode()
    *said, count = result.stderr.decode().splitlines()
    return result.stdout, said, int(count.removeprefix("forked "))


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs CPU affinity (Linux)")
def test_more_workers_than_cores_are_capped_with_a_note(tiny_index: Path, tmp_path: Path) -> None:
    source = tmp_path / "corpus.txt"
    source.write_bytes(TEXT * 10)
    one, said, forked = counting_forks(tiny_index, "-n", "5", "-i", source)
    assert said == [] and forked == 0
    cores = os.sched_getaffinity(0)
    capped, said, forked = counting_forks(tiny_index, "-n", "5", "-i", source, "--workers", "1000")
    assert capped == one and forked == len(cores) - 1
    assert said == [f"fastsubs-query: note: --workers 1000 is more than the {len(cores)} "
                    f"core{'s' if len(cores) > 1 else ''} here; using {len(cores)}"]
    # the cores this process may use, not the machine's (taskset, a SLURM job)
    alone, said, forked = counting_forks(tiny_index, "-n", "5", "-i", source, "-w", "3", cores={min(cores)})
    assert alone == one and forked == 0
    assert said == ["fastsubs-query: note: --workers 3 is more than the 1 core here; using 1"]


def test_workers_within_the_cores_say_nothing(tiny_index: Path, tmp_path: Path) -> None:
    source = tmp_path / "corpus.txt"
    source.write_bytes(TEXT)
    workers = min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    result = run_cli("fastsubs-query", tiny_index, "-n", "5", "-i", source, "--workers", str(workers))
    assert result.stderr == b"" and result.stdout == run_cli("fastsubs-query", tiny_index, "-n", "5",
                                                              "-i", source).stdout


def test_a_count_above_the_vocabulary_is_capped_with_a_note(tiny_index: Path) -> None:
    """-n above the substitutes a position can have (every word but <s>, and but the excluded
    ones) lists them all, as the original did, with a note saying so, as --workers above the
    cores does; the default count (100, not asked for) and -p alone say nothing."""
    with fastsubs.open_index(tiny_index) as index:
        words = index.vocab_size
    most = words - 1
    exact = run_cli("fastsubs-query", tiny_index, "-n", str(most), input=TEXT)
    assert exact.stderr == b""
    assert {len(line.split(b"\t")) - 1 for line in exact.stdout.splitlines()} == {most}
    above = run_cli("fastsubs-query", tiny_index, "-n", str(most + 1), input=TEXT)
    assert above.stdout == exact.stdout
    assert above.stderr.decode().splitlines() == [
        f"fastsubs-query: note: -n {most + 1} is more than the {most} substitutes a position can have "
        f"(the model's {words} words but <s>); listing {most}"]
    excluding = run_cli("fastsubs-query", tiny_index, "-n", "1000", "--exclude", "cat", input=TEXT)
    assert excluding.stderr.decode().splitlines() == [
        f"fastsubs-query: note: -n 1,000 is more than the {most - 1} substitutes a position can have "
        f"(the model's {words} words but <s> and 1 excluded word); listing {most - 1}"]
    assert excluding.stdout == run_cli("fastsubs-query", tiny_index, "-n", str(most - 1), "--exclude", "cat",
                                       input=TEXT).stdout
    for unasked in ([], ["-p", "0.9"]):
        assert run_cli("fastsubs-query", tiny_index, *unasked, input=TEXT).stderr == b""
