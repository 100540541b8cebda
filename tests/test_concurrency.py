"""Many processes on one index; a worker that dies fails the run loudly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import BIN, shared

READER = """
import sys, fastsubs
with fastsubs.open_index(sys.argv[1]) as index:
    print(" ".join(s.word for s in index.position(["the", "cat", "sat"], 1, n=3)))
"""


def test_128_processes_read_one_index_at_once(small_index: Path) -> None:
    processes = [subprocess.Popen([sys.executable, "-c", READER, str(small_index)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) for _ in range(128)]
    results = [process.communicate(timeout=300) for process in processes]
    assert all(process.returncode == 0 for process in processes), [err for _, err in results if err][:1]
    answers = {out for out, _ in results}
    assert len(answers) == 1 and len(answers.pop().split()) == 3


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as stream:
        return [int(child) for child in stream.read().split()]


def test_a_dead_worker_fails_the_run_loudly(small_index: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(shared("heldout-dev.txt").read_bytes() * 2)
    run = subprocess.Popen([str(BIN / "fastsubs-query"), str(small_index), "--workers", "2", "-i", str(corpus),
                            "-o", str(tmp_path / "out.txt")], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while len(workers) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        workers = children(run.pid)
    assert workers, "no worker process started"
    time.sleep(1.0)
    os.kill(workers[-1], signal.SIGKILL)
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 1
    assert b"worker process died" in stderr and stderr.count(b"\n") == 1
