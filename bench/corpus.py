"""Corpus-scale figures: what a worker keeps for itself over a long text, and text seen once.

``bench.py`` measures the search warm (the same 300 lines again and again); a corpus is
read once, by many workers, for hours.  This measures what such runs meet:

1. the peak private (anonymous) memory of each process of a ``fastsubs-query`` over the
   corpus, with one worker and with two, and its positions/s (a first pass: every line is
   new to the process);
2. a first pass over the first ``--pass-lines`` lines against a second pass over the same
   lines in the same process (the ratio is what a process loses to text it has not seen);
3. ``--workers 2`` against one worker over ``--worker-lines`` lines, with each worker's
   private memory, beside two independent processes searching the two halves of those
   lines at once (alternate chunks, about as the workers share them): what the machine
   gives any split of the work into two processes (on a shared virtual machine a process
   runs slower while another one is busy; on this project's, a loop that only spins on
   the other core slowed a search by 0-27%);
4. two threads against one on one open index (the API).

Usage::

    .venv/bin/python -m fastsubs.bench.corpus --index /tmp/kn4-64k.fsidx --corpus ../shared/data/corpus-sample.txt.gz

Figures are medians of ``--repeats`` runs; ratios are taken within one run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fastsubs.bench.processes import BIN, private_anon_kib, run_sampling
from fastsubs.pipeline.lines import CHUNK_LINES

#: Run in a fresh process: the passes and threads of one measurement, as JSON on stdout.
IN_PROCESS = r"""
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
import fastsubs

index_path, text_path, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
lines = open(text_path, encoding="utf-8", errors="surrogateescape").read().splitlines()
positions = sum(len(line.split()) + 1 for line in lines)
with fastsubs.open_index(index_path) as index:
    def run(part):
        for line in part:
            index.sentence(line, n=n)

    def timed(parts):
        start = time.perf_counter()
        if len(parts) == 1:
            run(parts[0])
        else:
            with ThreadPoolExecutor(len(parts)) as pool:
                list(pool.map(run, parts))
        return positions / (time.perf_counter() - start)

    if mode == "passes":
        print(json.dumps({"first": timed([lines]), "second": timed([lines])}))
    else:  # threads, warm: the lines passed over once first
        timed([lines])
        print(json.dumps({"one": timed([lines]), "two": timed([lines[0::2], lines[1::2]])}))
"""


def corpus_lines(corpus: Path, count: int) -> list[str]:
    opener = gzip.open if corpus.suffix == ".gz" else open
    with opener(corpus, "rt", encoding="utf-8", errors="surrogateescape") as stream:
        return [line for _, line in zip(range(count), stream)]


def write_lines(directory: Path, name: str, lines: list[str]) -> Path:
    path = directory / name
    path.write_text("".join(lines), encoding="utf-8", errors="surrogateescape")
    return path


def positions_of(lines: list[str]) -> int:
    return sum(len(line.split()) + 1 for line in lines)


def in_process(index: Path, text: Path, mode: str, n: int) -> dict[str, float]:
    result = subprocess.run([sys.executable, "-c", IN_PROCESS, str(index), str(text), mode, str(n)],
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def alternate_chunks(lines: list[str]) -> tuple[list[str], list[str]]:
    """The even and the odd CHUNK_LINES-line chunks of ``lines``."""
    chunks = [lines[i:i + CHUNK_LINES] for i in range(0, len(lines), CHUNK_LINES)]
    return [line for chunk in chunks[0::2] for line in chunk], [line for chunk in chunks[1::2] for line in chunk]


def concurrent_seconds(commands: list[list[str]]) -> float:
    """Wall seconds for ``commands`` run at once, each in its own process."""
    start = time.perf_counter()
    processes = [subprocess.Popen(command, stdout=subprocess.DEVNULL) for command in commands]
    if any(process.wait() for process in processes):
        raise RuntimeError(f"{commands[0][0]} failed")
    return time.perf_counter() - start


def query_command(index: Path, text: Path, n: int, workers: int) -> list[str]:
    return [str(BIN / "fastsubs-query"), str(index), "-n", str(n), "-i", str(text), "-o", "/dev/null",
            "--workers", str(workers)]


def median_range(values: list[float]) -> str:
    return f"{statistics.median(values):,.2f} ({min(values):,.2f}-{max(values):,.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("-n", type=int, default=100)
    parser.add_argument("--memory-lines", type=int, default=20_000)
    parser.add_argument("--pass-lines", type=int, default=1_500)
    parser.add_argument("--worker-lines", type=int, default=3_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-memory", action="store_true", help="leave out the whole-corpus run (minutes)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        if not args.skip_memory:
            lines = corpus_lines(args.corpus, args.memory_lines)
            text = write_lines(directory, "memory.txt", lines)
            for workers in (1, 2):
                seconds, _, each = run_sampling(query_command(args.index, text, args.n, workers), private_anon_kib,
                                                0.2)
                print(f"whole corpus, --workers {workers}: {len(lines):,} lines, {positions_of(lines):,} positions "
                      f"in {seconds:.1f} s = {positions_of(lines) / seconds:,.0f} positions/s (first pass); "
                      f"peak private (anonymous) memory per process {', '.join(f'{k / 1024:,.0f}' for k in each)} MiB")

        passes = write_lines(directory, "passes.txt", corpus_lines(args.corpus, args.pass_lines))
        runs = [in_process(args.index, passes, "passes", args.n) for _ in range(args.repeats)]
        print(f"first pass over {args.pass_lines:,} lines: {median_range([r['first'] for r in runs])} positions/s; "
              f"second pass: {median_range([r['second'] for r in runs])}; first/second "
              f"{median_range([r['first'] / r['second'] for r in runs])}")

        lines = corpus_lines(args.corpus, args.worker_lines)
        text = write_lines(directory, "workers.txt", lines)
        halves = [query_command(args.index, write_lines(directory, f"half{i}.txt", half), args.n, 1)
                  for i, half in enumerate(alternate_chunks(lines))]
        ratios, privates, apart = [], [], []
        for _ in range(args.repeats):
            one, _, _ = run_sampling(query_command(args.index, text, args.n, 1), private_anon_kib, 0.2)
            two, _, each = run_sampling(query_command(args.index, text, args.n, 2), private_anon_kib, 0.2)
            ratios.append(one / two)
            privates.append(sum(each[:2]) / 1024)  # the two workers (the parent holds little)
            apart.append(one / concurrent_seconds(halves))
        print(f"--workers 2 / 1 over {len(lines):,} lines ({positions_of(lines):,} positions): "
              f"{median_range(ratios)}x; the two biggest processes' peak private memory together "
              f"{median_range(privates)} MiB; two independent processes on the two halves at once / 1, "
              f"in the same rounds: {median_range(apart)}x")

        runs = [in_process(args.index, passes, "threads", args.n) for _ in range(args.repeats)]
        print(f"2 threads / 1 on one open index (warm, {args.pass_lines:,} lines): "
              f"{median_range([r['two'] / r['one'] for r in runs])}x")


if __name__ == "__main__":
    main()
