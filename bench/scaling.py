"""How throughput scales with worker processes (the CLI's ``--workers``) and with threads
sharing one open index (the API), on machines with more cores than a laptop.

Usage::

    python -m fastsubs.bench.scaling --index demo.fsidx --text corpus.txt --workers 1,2,4,8,16 --threads 1,2,4,8

Each figure is the median of ``--repeats`` runs, printed as positions/s and as a ratio to
one worker (one thread) measured in the same run.  Worker runs are whole CLI runs (start-up
included, output to /dev/null); thread runs are warm (the text searched once first).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: Run in a fresh process: positions/s of ``threads`` threads over the text, warm.
THREADS = r"""
import sys, time
from concurrent.futures import ThreadPoolExecutor
import fastsubs

index_path, text_path, threads, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
lines = open(text_path, encoding="utf-8", errors="surrogateescape").read().splitlines()
positions = sum(len(line.split()) + 1 for line in lines)
with fastsubs.open_index(index_path) as index:
    def run(part):
        for line in part:
            index.sentence(line, n=100)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(run, [lines[k::threads] for k in range(threads)]))  # warm: every searcher
        for _ in range(repeats):
            start = time.perf_counter()
            list(pool.map(run, [lines[k::threads] for k in range(threads)]))
            print(positions / (time.perf_counter() - start), flush=True)
"""


def positions_of(text: Path) -> int:
    lines = text.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    return sum(len(line.split()) + 1 for line in lines)


def workers_rate(query: list[str], index: Path, text: Path, workers: int, positions: int) -> float:
    start = time.perf_counter()
    subprocess.run([*query, str(index), "-n", "100", "-i", str(text), "-o", "/dev/null", "--workers", str(workers)],
                   check=True)
    return positions / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--text", type=Path, required=True)
    parser.add_argument("--workers", default="1,2,4,8,16")
    parser.add_argument("--threads", default="1,2,4,8")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    positions = positions_of(args.text)
    query = [sys.executable, "-c", "from fastsubs.query.cli import main; main()"]
    print(f"{args.text}: {positions:,} positions, n=100, {args.index}")
    base = None
    for workers in [int(w) for w in args.workers.split(",") if w]:
        rate = statistics.median(workers_rate(query, args.index, args.text, workers, positions)
                                 for _ in range(args.repeats))
        base = base or rate
        print(f"--workers {workers:>2}: {rate:9,.0f} positions/s  {rate / base:5.2f}x one worker", flush=True)
    base = None
    for threads in [int(t) for t in args.threads.split(",") if t]:
        run = subprocess.run([sys.executable, "-c", THREADS, str(args.index), str(args.text), str(threads),
                              str(args.repeats)], capture_output=True, text=True, check=True)
        rate = statistics.median(float(x) for x in run.stdout.split())
        base = base or rate
        print(f"{threads:>2} threads, one index: {rate:9,.0f} positions/s  {rate / base:5.2f}x one thread", flush=True)


if __name__ == "__main__":
    main()
