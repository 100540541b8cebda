"""Many processes on one index; a worker that dies fails the run loudly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fastsubs
from conftest import BIN, DEMO_SENTENCES, children, demo_text
from fastsubs.errors import FastsubsError
from fastsubs.pipeline.workers import worker_processes

READER = r"""
import sys

import fastsubs

with fastsubs.open_index(sys.argv[1]) as index:
    answer = " ".join(s.word for s in index.position(["the", "cat", "sat"], 1, n=3))
    for order in range(2, index.order + 1):
        index._core.check_patterns(order)  # every record, read through the index's own memory map
    print("ready", flush=True)
    sys.stdin.read()  # held until the test has measured every reader
    print(answer)
"""


def mapped(pid: int, path: Path) -> dict[str, int]:
    """Rss and Pss (kB) of the mappings of ``path`` in process ``pid`` (/proc/PID/smaps)."""
    totals = {"Rss": 0, "Pss": 0}
    inside = False
    target = str(path.resolve())
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):  # a mapping's header line
                inside = line.rstrip().endswith(" " + target)
            elif inside and fields[0][:-1] in totals:
                totals[fields[0][:-1]] += int(fields[1])
    return totals


def check_readers(index: Path, count: int) -> None:
    """``count`` processes open the index at once, read all of it through the engine's
    memory map, and answer alike; while all of them hold it, each has the index resident
    (Rss) but together they account for about one copy of it (the Pss of a page mapped
    by k processes is a k-th of it): the page cache's pages are shared, not copied."""
    processes = [subprocess.Popen([sys.executable, "-c", READER, str(index)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(count)]
    try:
        for process in processes:
            assert process.stdout is not None and process.stdout.readline() == b"ready\n", process.stderr
        memory = [mapped(process.pid, index / "data.mdb") for process in processes]
    finally:
        results = [process.communicate(timeout=300) for process in processes]
    assert all(process.returncode == 0 for process in processes), [err for _, err in results if err][:1]
    answers = {out for out, _ in results}
    assert len(answers) == 1 and len(answers.pop().split()) == 3
    size_kb = (index / "data.mdb").stat().st_size // 1024
    assert min(m["Rss"] for m in memory) >= size_kb // 2, (size_kb, memory[:3])
    assert sum(m["Pss"] for m in memory) <= 1.5 * max(m["Rss"] for m in memory), (size_kb, memory[:3])


def wide_bigram_model(path: Path, words: int = 2000, per_word: int = 60) -> Path:
    """A generated bigram model of few, long records (a few MiB of index, quick to read whole)."""
    vocab = [f"w{i}" for i in range(words)]
    lines = ["\\data\\", f"ngram 1={words + 2}", f"ngram 2={words * per_word}", "", "\\1-grams:",
             "-99\t<s>\t-0.5", "-1.5\t</s>", *[f"-{3 + i % 7 / 8}\t{w}\t-0.25" for i, w in enumerate(vocab)],
             "", "\\2-grams:"]
    lines += [f"-{1 + k % 5 / 4}\t{vocab[i]} {vocab[(i * 7 + k * 13 + 1) % words]}"
              for i in range(words) for k in range(per_word)]
    path.write_text("\n".join([*lines, "", "\\end\\", ""]))
    return path


def test_readers_share_one_copy_of_the_index(tmp_path: Path) -> None:
    index = tmp_path / "wide.fsidx"
    fastsubs.build_index(wide_bigram_model(tmp_path / "wide.arpa"), index)
    check_readers(index, 6)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_128_processes_read_one_index_at_once(tmp_path: Path) -> None:
    """A generated index of ~12 MiB in few records, so 128 readers read it whole in seconds
    (kn4-small's 739K records would take each of them 2 s of Python)."""
    index = tmp_path / "wide.fsidx"
    fastsubs.build_index(wide_bigram_model(tmp_path / "wide.arpa", words=3000, per_word=120), index)
    check_readers(index, 128)


def killed_worker_run(index: Path, tmp_path: Path, args: list[str], delay: float) -> None:
    """Kill the one forked worker of a ``--workers 2`` run ``delay`` seconds after it started;
    the run must end at once with one line saying so (exit 1), and leave no OUT."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(demo_text(DEMO_SENTENCES) * 4)  # far more than a run does before its kill
    out = tmp_path / "out.txt"
    run = subprocess.Popen([str(BIN / "fastsubs-query"), str(index), "--workers", "2", "-i", str(corpus),
                            "-o", str(out), *args], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while not workers and time.monotonic() < deadline:  # --workers 2: this run and one forked
        time.sleep(0.01)
        workers = children(run.pid)
    assert workers, "no worker process started"
    time.sleep(delay)
    assert run.poll() is None, "the run ended before the kill: it tests nothing"
    os.kill(workers[-1], signal.SIGKILL)
    _, stderr = run.communicate(timeout=60)  # a run waiting forever on a dead worker fails here
    assert run.returncode == 1, stderr
    assert b"worker process died" in stderr and stderr.count(b"\n") == 1
    assert not out.exists()


def test_a_dead_worker_fails_the_run_loudly(demo_index: Path, tmp_path: Path) -> None:
    killed_worker_run(demo_index, tmp_path, [], 1.0)


def _answer_then_die(prepared: None, item: object) -> object:
    """A worker's work that answers, and has the worker killed (SIGALRM) a moment later,
    while it waits for more work: a death after its last answer."""
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    return item


def test_a_worker_that_died_after_its_last_answer_fails_the_wait() -> None:
    """fastsubs-query waits for its workers before it publishes an output: a worker that did
    not end well fails the run there, though every answer came."""
    with pytest.raises(FastsubsError, match="^died$"):  # leaving the workers' context says so too
        with worker_processes(1, lambda: None, _answer_then_die, os.getpid(), "died") as pool:
            pool.send(pool.least_busy(), 0, "item")
            pool.collect(block=True)
            assert pool.answered == {0: "item"}
            pool.workers[0].process.join(timeout=60)  # killed meanwhile (a sleep of 1 s waited for it)
            assert pool.workers[0].process.exitcode == -signal.SIGALRM
            pool.finish_sending()
            with pytest.raises(FastsubsError, match="^died$"):
                pool.wait()


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.05 * i for i in range(1, 21)])
def test_a_worker_killed_at_any_moment_fails_the_run_loudly(demo_index: Path, tmp_path: Path,
                                                            delay: float) -> None:
    """Killed anywhere, in the middle of sending a long result too (-n 1000: ~40 KB a line)."""
    killed_worker_run(demo_index, tmp_path, ["-n", "1000"], delay)
