"""Running a whole input through one engine or through N worker processes, in input order.

Workers are started with ``fork`` before any index is opened in the parent, and each
opens the index itself in its initializer, so no LMDB environment crosses a fork and
all workers share one copy of the index in the page cache.  A worker that dies makes
the run fail with an error (``BrokenProcessPool``), never a shorter output.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack
from itertools import islice
from pathlib import Path
from typing import BinaryIO

from fastsubs.errors import FastsubsError, QueryInputError
from fastsubs.query.engine import Engine
from fastsubs.query.records import OutputOptions, render_record
from fastsubs.query.search import Limits, SearchStats
from fastsubs.textio import open_binary

#: Substitutes listed when neither -n nor -p is given (the original listed the whole vocabulary).
DEFAULT_COUNT = 100
#: Input lines handed to a worker at a time.
CHUNK_LINES = 32

Chunk = list[tuple[int, bytes]]


def _render_chunk(engine: Engine, chunk: Chunk, options: OutputOptions, source: str) -> tuple[bytes, list[str]]:
    out = []
    warnings = []
    for number, line in chunk:
        try:
            out.append(render_record(engine, line, options, source, number))
        except QueryInputError as error:
            if not options.skip_bad_records:
                raise
            warnings.append(f"skipped: {error}")
    return b"".join(out), warnings


def numbered_chunks(stream: BinaryIO) -> Iterator[Chunk]:
    """Lines of ``stream`` (any length) with 1-based numbers, CHUNK_LINES at a time."""
    numbered = enumerate(stream, start=1)
    while chunk := list(islice(numbered, CHUNK_LINES)):
        yield chunk


def run_serial(index_path: str, chunks: Iterable[Chunk], options: OutputOptions, source: str,
               out: BinaryIO, warn=None) -> SearchStats:
    """Process every chunk in this process, writing output as it is made."""
    engine = Engine(index_path)
    try:
        for chunk in chunks:
            text, warnings = _render_chunk(engine, chunk, options, source)
            for warning in warnings:
                (warn or _stderr)(warning)
            out.write(text)
        return engine.searcher.stats
    finally:
        engine.close()


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


_worker_engine: Engine | None = None


def _worker_init(index_path: str) -> None:
    global _worker_engine
    _worker_engine = Engine(index_path)


def _worker_chunk(chunk: Chunk, options: OutputOptions, source: str) -> tuple[bytes, list[str], SearchStats]:
    assert _worker_engine is not None
    before = SearchStats()
    before.add(_worker_engine.searcher.stats)
    text, warnings = _render_chunk(_worker_engine, chunk, options, source)
    after = _worker_engine.searcher.stats
    delta = SearchStats(after.positions - before.positions, after.evaluated - before.evaluated,
                        after.rounds - before.rounds, after.listed - before.listed)
    return text, warnings, delta


def run_parallel(index_path: str, chunks: Iterable[Chunk], options: OutputOptions, source: str,
                 out: BinaryIO, workers: int, warn=None) -> SearchStats:
    """Process chunks in ``workers`` processes; output in input order, memory bounded."""
    stats = SearchStats()
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init,
                             initargs=(index_path,)) as pool:
        pending: deque[Future] = deque()
        try:
            for chunk in chunks:
                pending.append(pool.submit(_worker_chunk, chunk, options, source))
                if len(pending) >= 4 * workers:
                    _drain_one(pending, out, stats, warn)
            while pending:
                _drain_one(pending, out, stats, warn)
        except BrokenProcessPool:
            raise FastsubsError("a worker process died; the output is incomplete") from None
        finally:
            for future in pending:
                future.cancel()
    return stats


def _drain_one(pending: deque, out: BinaryIO, stats: SearchStats, warn) -> None:
    text, warnings, delta = pending.popleft().result()
    for warning in warnings:
        (warn or _stderr)(warning)
    out.write(text)
    stats.add(delta)


def execute(index: Path, *, count: int | None, probability: float | None, normalize: bool, targets: bool,
            skip_bad_records: bool, input_path: Path | None, output_path: Path | None, workers: int,
            stats: bool) -> None:
    """The whole ``fastsubs-query`` run: open input and output, process, report statistics."""
    if count is None and probability is None:
        count = DEFAULT_COUNT
    limits = Limits(count if count is not None else 2**62, probability)
    options = OutputOptions(limits, normalize, targets, skip_bad_records)
    index_path = str(index)
    if workers > 1:
        Engine(index_path).close()  # fail early, in this process, on a bad index
    source = str(input_path) if input_path is not None else "<stdin>"
    with ExitStack() as stack:
        stream = stack.enter_context(open_binary(input_path)) if input_path else sys.stdin.buffer
        out = stack.enter_context(open_binary(output_path, "wb")) if output_path else sys.stdout.buffer
        chunks = numbered_chunks(stream)
        if workers > 1:
            totals = run_parallel(index_path, chunks, options, source, out, workers)
        else:
            totals = run_serial(index_path, chunks, options, source, out)
        out.flush()
    if stats:
        print(format_stats(totals), file=sys.stderr)


def format_stats(stats: SearchStats) -> str:
    """One line of search statistics for ``--stats``."""
    per = max(stats.positions, 1)
    return (f"positions {stats.positions}  candidates evaluated {stats.evaluated} "
            f"({stats.evaluated / per:.1f} per position)  rounds {stats.rounds / per:.2f} per position  "
            f"substitutes listed {stats.listed}")
