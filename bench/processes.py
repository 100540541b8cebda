"""Measuring whole processes: time to first output line, memory of a process tree.

Everything here runs the installed command-line tools as a user would, so the
figures include interpreter start-up, imports and opening the index.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def first_line_seconds(command: list[str], stdin_text: bytes) -> float:
    """Wall time from starting ``command`` to the first line on its stdout."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(stdin_text)
    process.stdin.close()
    process.stdout.readline()
    elapsed = time.perf_counter() - start
    process.stdout.read()
    process.wait()
    return elapsed


def median_seconds(command: list[str], stdin_text: bytes, repeats: int) -> float:
    return statistics.median(first_line_seconds(command, stdin_text) for _ in range(repeats))


def startup_figures(index: Path, line: bytes, repeats: int) -> tuple[float, float]:
    """Median seconds to the first output line of fastsubs-query, and of a bare Python (what
    the interpreter takes before any of fastsubs)."""
    query = [str(BIN / "fastsubs-query"), str(index), "-n", "100"]
    bare = [sys.executable, "-c", "print('ready', flush=True)"]
    return median_seconds(query, line, repeats), median_seconds(bare, b"", repeats)


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (Linux /proc)."""
    pids = [pid]
    for p in pids:
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as children:
                    pids += [int(c) for c in children.read().split()]
        except OSError:
            pass
    return pids


def _field_kib(path: str, field: str) -> int:
    """The ``field:`` line (in kB) of a /proc file such as smaps_rollup or status; 0 once the process is gone."""
    try:
        with open(path) as lines:
            for line in lines:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def pss_kib(pid: int) -> int:
    """Proportional set size of one process: its private pages plus its share of shared ones."""
    return _field_kib(f"/proc/{pid}/smaps_rollup", "Pss:")


def private_anon_kib(pid: int) -> int:
    """Anonymous memory of one process (heap, Python objects): what it keeps for itself, unlike
    the index's mapped pages, which every process shares."""
    return _field_kib(f"/proc/{pid}/status", "RssAnon:")


def run_sampling(command: list[str], measure=pss_kib, interval: float = 0.05) -> tuple[float, int, list[int]]:
    """Run ``command`` to completion: (wall seconds, peak of ``measure`` summed over its process
    tree in KiB, the peak of each process on its own)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    peak = 0
    each: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            values = {p: measure(p) for p in process_tree(process.pid)}
            peak = max(peak, sum(values.values()))
            for p, value in values.items():
                each[p] = max(each.get(p, 0), value)
            time.sleep(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = process.wait()
    elapsed = time.perf_counter() - start
    done.set()
    sampler.join()
    if code:
        raise RuntimeError(f"{command[0]} exited with status {code}")
    return elapsed, peak, sorted(each.values(), reverse=True)


def run_with_pss(command: list[str], interval: float = 0.05) -> tuple[float, int]:
    """Run ``command`` to completion: (wall seconds, peak total PSS of its process tree in KiB)."""
    elapsed, peak, _ = run_sampling(command, pss_kib, interval)
    return elapsed, peak
