"""One benchmark run of fastsubs, printing every figure the performance issue asks for.

    .venv/bin/python -m fastsubs.bench.bench --index /tmp/kn4-64k.fsidx --small-index /tmp/small.fsidx \
        --input ../shared/data/heldout-dev.txt [--reference ../shared/data/reference/kn4-64k.dev300.n100.out.gz]

Prints the machine, then: positions/s and candidates evaluated per position for each
K (with the log-log slope of candidates in K), the same workload through the
exhaustive dense-numpy baseline and the speed-up, start-up to the first output line
beside a bare Python's, and workers 1 vs 2 with PSS (builds: :mod:`fastsubs.bench.build`).
Every timing is the median of --repeats runs; the load average is printed because other
jobs on the machine move these figures.
No figure is asserted: this reports, the tests check correctness.
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

import numpy as np

from fastsubs.bench.exhaustive_baseline import ExhaustiveScorer
from fastsubs.bench.processes import BIN, run_with_pss, startup_figures
from fastsubs.core import Core, Render
from fastsubs.limits import Limits
from fastsubs.tokens import tokenize


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.processor())
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"nproc {os.cpu_count()}  CPU {model}  Python {platform.python_version()}  load average {load}"


def search_pass(index: Core, sentences: list[bytes], tokens: list[list[bytes]], count: int) -> list[bytes]:
    """Search and format every position, as the CLI does; returns the output lines."""
    limits = Limits(count)
    out = []
    for words, ids in zip(tokens, sentences):
        out += index.render(ids, 1, len(words) + 2, limits, b"", Render.LINE, [*words, b"</s>"]).splitlines()
    return out


def baseline_pass(scorer: ExhaustiveScorer, index: Core, sentences: list[bytes],
                  tokens: list[list[bytes]], count: int) -> list[bytes]:
    """The same workload (search and format) through the exhaustive scorer."""
    out = []
    for words, ids in zip(tokens, sentences):
        sentence = tuple(np.frombuffer(ids, np.uint32).tolist())
        for target, word in enumerate(words + [b"</s>"], start=1):
            found, scores = scorer.search(sentence, target, count)
            out.append(word + b"\t" + index.fields(found.astype(np.uint32), scores))
    return out


Result = TypeVar("Result")


def timed(repeats: int, run: Callable[[], Result]) -> tuple[float, Result]:
    """The median seconds of ``repeats`` calls of ``run``, and what the last one returned."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def differences(expected: list[bytes], ours: list[bytes], tolerance: float = 1e-4) -> int:
    """Lines that differ beyond ``tolerance`` (ties may come in any order, as in the reference)."""
    bad = 0
    for a, b in zip(expected, ours, strict=True):
        fa, fb = a.split(b"\t"), b.split(b"\t")
        if fa[0] != fb[0] or len(fa) != len(fb):
            bad += 1
            continue
        sa = [f.rsplit(b" ", 1) for f in fa[1:]]
        sb = [f.rsplit(b" ", 1) for f in fb[1:]]
        scores_a, scores_b = np.array([float(s) for _, s in sa]), np.array([float(s) for _, s in sb])
        if len(sa) and np.abs(scores_a - scores_b).max() > tolerance:
            bad += 1
            continue
        ours_by_word = {w: float(s) for w, s in sb}
        last = scores_a[-1] if len(sa) else 0.0
        if any(w not in ours_by_word and abs(float(s) - last) > tolerance for w, s in sa):
            bad += 1
    return bad


def throughput(args, lines: list[bytes]) -> None:
    index = Core(args.index)
    tokens = [tokenize(line) for line in lines]
    sentences = [index.sentence_ids(t) for t in tokens]
    positions = sum(len(t) + 1 for t in tokens)
    print(f"\n== search, {args.index}: {len(lines)} lines, {positions} positions, one process ==")
    search_pass(index, sentences, tokens, 100)  # warm the page cache and the pattern caches
    per_k = {}
    outputs = {}
    for count in args.ks:
        before = index.stats.evaluated
        seconds, outputs[count] = timed(args.repeats, partial(search_pass, index, sentences, tokens, count))
        candidates = (index.stats.evaluated - before) / (args.repeats * positions)
        per_k[count] = candidates
        print(f"K={count:<5d} {positions / seconds:8.0f} positions/s   {candidates:8.1f} candidates evaluated/position")
    ks = sorted(per_k)
    if len(ks) > 1:
        slope = np.polyfit(np.log(ks), np.log([per_k[k] for k in ks]), 1)[0]
        print(f"log-log slope of candidates in K: {slope:.3f} (paper: ~0.59 at V=64K)")
    if args.reference and 100 in outputs:
        expected = gzip.open(args.reference).read().splitlines()[:len(outputs[100])]  # fewer --lines: a prefix
        print(f"K=100 output vs reference: {differences(expected, outputs[100])} lines differ")

    scorer = ExhaustiveScorer(index)
    base_out = baseline_pass(scorer, index, sentences, tokens, 100)
    pairs = [interleaved(scorer, index, sentences, tokens) for _ in range(args.repeats)]
    ratios = sorted(base / search for base, search in pairs)
    print(f"exhaustive dense-numpy baseline, K=100: {positions / statistics.median(b for b, _ in pairs):.0f} "
          f"positions/s; search {positions / statistics.median(s for _, s in pairs):.0f} positions/s; "
          f"speed-up {statistics.median(ratios):.2f}x (median of {len(pairs)} interleaved passes; "
          f"range {ratios[0]:.2f}-{ratios[-1]:.2f})")
    print(f"baseline vs search output: {differences(base_out, outputs.get(100, base_out))} lines differ")
    index.close()


#: Chunks the speed-up's passes are cut into (see interleaved).
CHUNKS = 10


def interleaved(scorer: ExhaustiveScorer, index: Core, sentences: list[bytes],
                tokens: list[list[bytes]]) -> tuple[float, float]:
    """Seconds of one baseline pass and one search pass over all lines (K=100), run chunk by
    chunk in turns so that both see nearly the same machine: its speed drifts from second
    to second (other tenants; whole passes back to back gave ratios 3.6-5.9 for one build).
    Turns pair chunk i of one with chunk i + CHUNKS/2 of the other (neither reads the
    patterns the other has just brought into the CPU caches) and swap who goes first.
    """
    size = -(-len(sentences) // CHUNKS)
    chunks = [(sentences[i:i + size], tokens[i:i + size]) for i in range(0, len(sentences), size)]
    base = search = 0.0
    for i in range(len(chunks)):
        turns = [("baseline", chunks[i]), ("search", chunks[(i + len(chunks) // 2) % len(chunks)])]
        for kind, (some_sentences, some_tokens) in turns if i % 2 else reversed(turns):
            start = time.perf_counter()
            if kind == "baseline":
                baseline_pass(scorer, index, some_sentences, some_tokens, 100)
                base += time.perf_counter() - start
            else:
                search_pass(index, some_sentences, some_tokens, 100)
                search += time.perf_counter() - start
    return base, search


def startup(args, line: bytes) -> None:
    print(f"\n== start-up to first output line (median of {args.startup_repeats}) ==")
    for index in [args.index] + ([args.small_index] if args.small_index else []):
        query, bare = startup_figures(Path(index), line + b"\n", args.startup_repeats)
        print(f"{index}: fastsubs-query {query * 1000:.0f} ms   bare python {bare * 1000:.0f} ms   "
              f"difference {(query - bare) * 1000:.0f} ms")


def workers(args, input_path: Path, positions: int) -> None:
    print(f"\n== fastsubs-query -n 100 on {positions} positions: workers 1 vs 2 (median of {args.repeats}) ==")
    for count in (1, 2):
        command = [str(BIN / "fastsubs-query"), args.index, "-n", "100", "-i", str(input_path), "--workers", str(count)]
        runs = [run_with_pss(command) for _ in range(args.repeats)]
        seconds = statistics.median(r[0] for r in runs)
        peak = statistics.median(r[1] for r in runs)
        print(f"workers {count}: {positions / seconds:6.0f} positions/s (wall, start-up included)   "
              f"peak PSS of the process tree {peak / 1024:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True, help="index of the benchmark model (kn4-64k)")
    parser.add_argument("--small-index", help="a second index for the start-up figure (kn4-small)")
    parser.add_argument("--input", required=True, help="held-out text, one sentence per line (heldout-dev.txt)")
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 10, 100, 1000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--startup-repeats", type=int, default=7)
    parser.add_argument("--reference", help="the original tool's -n 100 output for this input (gzip)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["search", "startup", "workers"])
    args = parser.parse_args()

    print(machine())
    lines = open(args.input, "rb").read().splitlines()[:args.lines]
    if "search" not in args.skip:
        throughput(args, lines)
    if "startup" not in args.skip:
        startup(args, lines[0])
    if "workers" not in args.skip:
        with tempfile.NamedTemporaryFile(suffix=".txt") as sample:
            sample.write(b"\n".join(lines) + b"\n")
            sample.flush()
            workers(args, Path(sample.name), sum(len(tokenize(line)) + 1 for line in lines))


if __name__ == "__main__":
    main()
