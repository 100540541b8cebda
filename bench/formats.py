"""Output formats x workers, and the API's threads: where the time of a run goes besides the search.

    .venv/bin/python -m fastsubs.bench.formats --index /tmp/kn4-64k.fsidx \\
        --input ../shared/data/corpus-sample.txt.gz --lines 3000 --repeats 5 --workers 1 2

For each number of workers, ``fastsubs-query -n 100`` over the same lines writes plain
text, ``.gz``, JSON lines and (with pyarrow installed) a Parquet dataset; every round runs
each (format, workers) once, in a shuffled order, so that all see the same machine (its
speed drifts from minute to minute).  Prints the median seconds of each, each format's
ratio to plain text, its speed-up over one process, its bytes per position and the peak
memory of its one-process run.  With pandas, it then times reading the output back into
pandas columns (word, substitutes, lp): the Parquet dataset with ``pandas.read_parquet``,
the text by parsing every line.  Then one process opens the
index once and searches the same lines with ``index.batch()`` from 1 ... T threads (each
thread its share of the lines), and prints positions/s and the speed-up over one thread.
No figure is asserted: this reports, the tests check correctness.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import os
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

from fastsubs import open_index
from fastsubs.bench.bench import machine
from fastsubs.bench.processes import BIN, private_anon_kib, run_sampling
from fastsubs.tokens import tokenize

FORMATS = {"text": ("out.txt", []), ".gz": ("out.txt.gz", []), "jsonl": ("out.jsonl", ["-f", "jsonl"])}
if importlib.util.find_spec("pyarrow") is not None:
    FORMATS["parquet"] = ("out.parquet", ["-f", "parquet"])


def read_lines(path: Path, count: int) -> list[bytes]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as stream:
        return [line for _, line in zip(range(count), stream)]


def query_run(index: str, corpus: Path, out: Path, extra: list[str], workers: int) -> tuple[float, int]:
    """Seconds of one run, and the peak private (anonymous) memory of its biggest process
    in KiB (what a worker keeps for itself: the index's pages are shared)."""
    command = [str(BIN / "fastsubs-query"), index, "-n", "100", "-i", str(corpus), "-o", str(out),
               "--workers", str(workers), *extra]
    seconds, _, each = run_sampling(command, private_anon_kib, 0.1)
    return seconds, each[0]


def size_of(path: Path) -> int:
    """Bytes of an output file, or of a dataset directory's files."""
    return sum(entry.stat().st_size for entry in os.scandir(path)) if path.is_dir() else path.stat().st_size


def formats(args, corpus: Path, positions: int, directory: Path) -> None:
    cases = [(name, workers) for name in FORMATS for workers in args.workers]
    times: dict[tuple[str, int], list[float]] = {case: [] for case in cases}
    memory: dict[str, list[int]] = {name: [] for name in FORMATS}
    rng = random.Random(1)
    for _ in range(args.repeats):
        for name, workers in rng.sample(cases, len(cases)):
            file_name, extra = FORMATS[name]
            seconds, peak = query_run(args.index, corpus, directory / file_name, extra, workers)
            times[name, workers].append(seconds)
            if workers == 1:
                memory[name].append(peak)
    median = {case: statistics.median(seconds) for case, seconds in times.items()}
    print(f"\n== fastsubs-query -n 100 -o FILE, {positions} positions (median of {args.repeats} rounds) ==")
    heads = " ".join(f"{name:>18}" for name in FORMATS)
    ratios = " ".join(f"{name + ' / text':>15}" for name in FORMATS if name != "text")
    print(f"{'workers':>8} {heads} {ratios}")
    for workers in args.workers:
        cells = " ".join(f"{median[name, workers]:8.2f} s {positions / median[name, workers]:5.0f}/s"
                         for name in FORMATS)
        shares = " ".join(f"{median[name, workers] / median['text', workers]:15.2f}" for name in FORMATS
                          if name != "text")
        print(f"{workers:>8} {cells} {shares}")
    first = args.workers[0]
    for workers in args.workers[1:]:
        print(f"speed-up of --workers {workers} over {first}: " + ", ".join(
            f"{name} {median[name, first] / median[name, workers]:.2f}" for name in FORMATS))
    print("bytes per position: " + ", ".join(
        f"{name} {size_of(directory / FORMATS[name][0]) / positions:.0f}" for name in FORMATS))
    if 1 in args.workers:
        print("peak private memory of one process (MiB, median): " + ", ".join(
            f"{name} {statistics.median(memory[name]) / 1024:.1f}" for name in FORMATS))


def parsed_text(path: Path):
    """The text output's positions as pandas columns, every number parsed again."""
    import pandas as pd

    words, substitutes, scores = [], [], []
    with open(path, "rb") as stream:
        for line in stream:
            fields = line.rstrip(b"\n").split(b"\t")
            words.append(fields[0].decode("utf-8", "backslashreplace"))
            pairs = [field.rsplit(b" ", 1) for field in fields[1:]]
            substitutes.append([word.decode() for word, _ in pairs])
            scores.append([float(score) for _, score in pairs])
    return pd.DataFrame({"word": words, "substitutes": substitutes, "lp": scores})


def read_back(args, directory: Path) -> None:
    """Seconds to get the same columns into pandas from the dataset (as
    docs/output-formats.md reads it, and with pandas' defaults) and from the text."""
    import pandas as pd

    dataset = directory / FORMATS["parquet"][0]
    columns = ["word", "substitutes", "lp"]
    readers = {
        "parquet": lambda: pd.read_parquet(dataset, columns=columns, dtype_backend="pyarrow",
                                           read_dictionary=["substitutes.list.element"]),
        "parquet, pandas defaults": lambda: pd.read_parquet(dataset, columns=columns),
        "text parsed": lambda: parsed_text(directory / FORMATS["text"][0]),
    }
    seconds: dict[str, list[float]] = {name: [] for name in readers}
    for _ in range(args.repeats):
        for name in random.sample(list(readers), len(readers)):
            start = time.perf_counter()
            frame = readers[name]()
            seconds[name].append(time.perf_counter() - start)
            assert len(frame), name
    median = {name: statistics.median(values) for name, values in seconds.items()}
    print(f"\n== reading back into pandas (word, substitutes, lp; median of {args.repeats}) ==")
    for name in readers:
        print(f"{name}: {median[name]:.3f} s ({median['text parsed'] / median[name]:.1f}x the text's speed)")


def threads(args, lines: list[bytes]) -> None:
    sentences = [tokenize(line) for line in lines]
    positions = sum(len(tokens) + 1 for tokens in sentences)
    print(f"\n== API: index.batch(n=100) from T threads on one open index, {positions} positions "
          f"(median of {args.repeats}) ==")
    with open_index(args.index) as index:
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
            if "parquet" in FORMATS and importlib.util.find_spec("pandas") is not None:
                read_back(args, Path(tmp))
    if "threads" not in args.skip:
        threads(args, lines)


if __name__ == "__main__":
    main()
