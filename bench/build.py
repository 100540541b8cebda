"""What a build costs: time, memory and temporary disk, as ``fastsubs-index build`` runs.

    python -m fastsubs.bench.build MODEL [MODEL ...] [--jobs N] [--memory SIZE] [--repeats R] [--dir DIR]
                                   [--keep DIR]

Runs the installed ``fastsubs-index build`` (its own processes and the jobs it forks,
as a user runs it) ``--repeats`` times per model into ``--dir`` and samples, every
0.1 s: the memory of the whole process tree (PSS: private pages plus each process's
share of shared ones, so a page two processes map counts once; and anonymous memory,
counted whole in each process, the pages a forked job shares with the build until
either writes them included), and the disk
the build uses under ``--dir`` (the index being written and the spilled, sorted runs
beside it).  Prints medians, with the index's size per n-gram.  ``--keep DIR`` keeps
each model's last index there (``NAME.fsidx``), for search figures on the same index.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import fastsubs
from fastsubs.bench.processes import BIN, private_anon_kib, process_tree, pss_kib
from fastsubs.core import Core
from fastsubs.indexer.build import RUNS_DIR


@dataclass(frozen=True)
class BuildRun:
    """One build: wall seconds, peaks of the process tree's PSS and anonymous memory
    (bytes), peak disk under the build's directory and in its temporary files (bytes),
    and the index's size."""

    seconds: float
    pss: int
    anonymous: int
    disk: int
    temporary: int
    index_bytes: int


def _disk_bytes(directory: Path) -> tuple[int, int]:
    """Bytes allocated to the files under ``directory`` (files vanish while it is walked):
    all of them, and those of a build's temporary ``runs`` folder (spilled n-grams, sorted
    runs, records not yet in the index)."""
    total = temporary = 0
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                size = os.stat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                continue
            total += size
            temporary += size if RUNS_DIR in Path(root).parts else 0
    return total, temporary


def build_run(model: Path, directory: Path, jobs: int | None, memory: str | None,
              interval: float = 0.1) -> BuildRun:
    """Build ``model`` into ``directory``/model.fsidx (replacing it) and measure the build."""
    target = directory / "model.fsidx"
    command = [str(BIN / "fastsubs-index"), "build", str(model), "-o", str(target), "--force", "--quiet"]
    command += ["--jobs", str(jobs)] if jobs else []
    command += ["--memory", memory] if memory else []
    before, _ = _disk_bytes(directory)
    peaks = {"pss": 0, "anonymous": 0, "disk": 0, "temporary": 0}
    done = threading.Event()
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)

    def sample() -> None:
        while not done.is_set():
            pids = process_tree(process.pid)
            peaks["pss"] = max(peaks["pss"], sum(map(pss_kib, pids)) * 1024)
            peaks["anonymous"] = max(peaks["anonymous"], sum(map(private_anon_kib, pids)) * 1024)
            disk, temporary = _disk_bytes(directory)
            peaks["disk"] = max(peaks["disk"], disk - before)
            peaks["temporary"] = max(peaks["temporary"], temporary)
            time.sleep(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = process.wait()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if code:
        raise RuntimeError(f"fastsubs-index build exited with status {code}")
    size = sum(f.stat().st_blocks * 512 for f in target.iterdir() if f.is_file())
    return BuildRun(seconds, peaks["pss"], peaks["anonymous"], peaks["disk"], peaks["temporary"], size)


def report(model: Path, runs: list[BuildRun], ngrams: int) -> str:
    """Medians of ``runs`` (and the range of their times) as one line."""
    def median(field: str) -> float:
        return statistics.median(getattr(r, field) for r in runs)

    seconds = [r.seconds for r in runs]
    mib = 2 ** 20
    return (f"{model.name}: {ngrams:,} n-grams; build {median('seconds'):.1f} s "
            f"({min(seconds):.1f}-{max(seconds):.1f}, {len(runs)} runs), {ngrams / median('seconds'):,.0f} n-grams/s; "
            f"peak PSS {median('pss') / mib:,.0f} MiB, anonymous {median('anonymous') / mib:,.0f} MiB; "
            f"peak disk {median('disk') / mib:,.0f} MiB, of it temporary files {median('temporary') / mib:,.0f} MiB; "
            f"index {median('index_bytes') / mib:,.1f} MiB = "
            f"{median('index_bytes') / ngrams:.1f} bytes per n-gram")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", type=Path, metavar="MODEL")
    parser.add_argument("--jobs", type=int, help="fastsubs-index build --jobs (default: its own)")
    parser.add_argument("--memory", help="fastsubs-index build --memory (default: its own)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="where to build (default: a temporary directory)")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep each model's last index in DIR")
    args = parser.parse_args()
    print(f"fastsubs {fastsubs.__version__}; {os.cpu_count()} cores; load average "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        for model in args.models:
            runs = [build_run(model, Path(directory), args.jobs, args.memory) for _ in range(args.repeats)]
            with Core(Path(directory) / "model.fsidx") as index:
                ngrams = sum(index.meta["counts"])
            print(report(model, runs, ngrams), flush=True)
            if args.keep:
                kept = args.keep / (model.name.split(".arpa")[0] + ".fsidx")
                shutil.rmtree(kept, ignore_errors=True)
                shutil.move(Path(directory) / "model.fsidx", kept)
                print(f"kept {kept}", flush=True)


if __name__ == "__main__":
    main()
