"""Output formats x workers, and the API's threads: where the time of a run goes besides the search.

    .venv/bin/python -m fastsubs.bench.formats --index /tmp/kn4-64k.fsidx \\
        --input ../shared/data/corpus-sample.txt.gz --lines 3000 --repeats 5 --workers 1 2

For each number of workers, ``fastsubs-query -n 100`` over the same lines writes plain
text, ``.gz`` and JSON lines to files; every round runs each (format, workers) once, in a
shuffled order, so that all see the same machine (its speed drifts from minute to
minute).  Prints the median seconds of each, the ratios of ``.gz`` and JSON lines to
plain text, and each format's speed-up over one process.  Then one process opens the
index once and searches the same lines with ``index.batch()`` from 1 ... T threads (each
thread its share of the lines), and prints positions/s and the speed-up over one thread.
No figure is asserted: this reports, the tests check correctness.
"""

from __future__ import annotations

import argparse
import gzip
import random
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from fastsubs.bench.bench import machine
from fastsubs.bench.processes import BIN
from fastsubs.index import SubstituteIndex
from fastsubs.tokens import tokenize

FORMATS = {"text": ("out.txt", []), ".gz": ("out.txt.gz", []), "jsonl": ("out.jsonl", ["-f", "jsonl"])}


def read_lines(path: Path, count: int) -> list[bytes]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as stream:
        return [line for _, line in zip(range(count), stream)]


def query_seconds(index: str, corpus: Path, out: Path, extra: list[str], workers: int) -> float:
    command = [str(BIN / "fastsubs-query"), index, "-n", "100", "-i", str(corpus), "-o", str(out),
               "--workers", str(workers), *extra]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def formats(args, corpus: Path, positions: int, directory: Path) -> None:
    cases = [(name, workers) for name in FORMATS for workers in args.workers]
    times: dict[tuple[str, int], list[float]] = {case: [] for case in cases}
    rng = random.Random(1)
    for _ in range(args.repeats):
        for name, workers in rng.sample(cases, len(cases)):
            file_name, extra = FORMATS[name]
            times[name, workers].append(query_seconds(args.index, corpus, directory / file_name, extra, workers))
    median = {case: statistics.median(seconds) for case, seconds in times.items()}
    print(f"\n== fastsubs-query -n 100 -o FILE, {positions} positions (median of {args.repeats} rounds) ==")
    heads = " ".join(f"{name:>18}" for name in FORMATS)
    print(f"{'workers':>8} {heads} {'.gz / text':>10} {'jsonl / text':>12}")
    for workers in args.workers:
        cells = " ".join(f"{median[name, workers]:8.2f} s {positions / median[name, workers]:5.0f}/s"
                         for name in FORMATS)
        print(f"{workers:>8} {cells} {median['.gz', workers] / median['text', workers]:10.2f} "
              f"{median['jsonl', workers] / median['text', workers]:12.2f}")
    first = args.workers[0]
    for workers in args.workers[1:]:
        print(f"speed-up of --workers {workers} over {first}: " + ", ".join(
            f"{name} {median[name, first] / median[name, workers]:.2f}" for name in FORMATS))


def threads(args, lines: list[bytes]) -> None:
    sentences = [tokenize(line) for line in lines]
    positions = sum(len(tokens) + 1 for tokens in sentences)
    print(f"\n== API: index.batch(n=100) from T threads on one open index, {positions} positions "
          f"(median of {args.repeats}) ==")
    with SubstituteIndex(args.index) as index:
        index.batch(sentences, n=100)  # the page cache and the caches warm, for every count of threads alike
        seconds = {}
        for count in args.threads:
            shares = [sentences[start::count] for start in range(count)]
            runs = []
            for _ in range(args.repeats):
                workers = [threading.Thread(target=index.batch, args=(share,), kwargs={"n": 100}) for share in shares]
                start = time.perf_counter()
                for worker in workers:
                    worker.start()
                for worker in workers:
                    worker.join()
                runs.append(time.perf_counter() - start)
            seconds[count] = statistics.median(runs)
            print(f"{count:>3} threads: {positions / seconds[count]:7.0f} positions/s   "
                  f"speed-up {seconds[args.threads[0]] / seconds[count]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True)
    parser.add_argument("--input", required=True, help="text, one sentence per line (.gz ok)")
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--skip", nargs="*", default=[], choices=["formats", "threads"])
    args = parser.parse_args()
    print(machine())
    lines = read_lines(Path(args.input), args.lines)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_bytes(b"".join(lines))
        positions = sum(len(tokenize(line)) + 1 for line in lines)
        if "formats" not in args.skip:
            formats(args, corpus, positions, Path(tmp))
    if "threads" not in args.skip:
        threads(args, lines)


if __name__ == "__main__":
    main()
