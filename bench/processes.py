"""Measuring whole processes: time to first output line, PSS of a process tree, builds.

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
    """Median seconds to the first output line of fastsubs-query, and of ``import numpy, lmdb``."""
    query = [str(BIN / "fastsubs-query"), str(index), "-n", "100"]
    imports = [sys.executable, "-c", "import numpy, lmdb; print('ready', flush=True)"]
    return median_seconds(query, line, repeats), median_seconds(imports, b"", repeats)


def _tree(pid: int) -> list[int]:
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


def pss_kib(pid: int) -> int:
    """Proportional set size of one process, from /proc/PID/smaps_rollup (0 once it has gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_with_pss(command: list[str], interval: float = 0.05) -> tuple[float, int]:
    """Run ``command`` to completion: (wall seconds, peak total PSS of its process tree in KiB)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, sum(pss_kib(p) for p in _tree(process.pid)))
            time.sleep(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = process.wait()
    elapsed = time.perf_counter() - start
    done.set()
    sampler.join()
    if code:
        raise RuntimeError(f"{command[0]} exited with status {code}")
    return elapsed, peak


def build_figures(model: Path, output: Path) -> tuple[float, int, int]:
    """Build an index: (wall seconds, peak RSS of the build process in KiB, index bytes on disk)."""
    start = time.perf_counter()
    process = subprocess.Popen([str(BIN / "fastsubs-index"), "build", str(model), "-o", str(output),
                                "--force", "--quiet"])
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise RuntimeError(f"fastsubs-index build exited with status {process.returncode}")
    size = sum(f.stat().st_blocks * 512 for f in output.iterdir() if f.is_file())
    return elapsed, usage.ru_maxrss, size
