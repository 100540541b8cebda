"""Running a whole input through one engine or through N worker processes, in input order.

Workers are started with ``fork`` before any index is opened in the parent, and each
opens the index itself in its initializer, so no LMDB environment crosses a fork and
all workers share one copy of the index in the page cache.  A worker that dies makes
the run fail with an error (``BrokenProcessPool``), never a shorter output.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import BinaryIO

from fastsubs.errors import FastsubsError, QueryInputError
from fastsubs.query.engine import Engine
from fastsubs.query.progress import Progress, input_size
from fastsubs.query.records import OutputOptions, render_record
from fastsubs.query.search import SearchStats
from fastsubs.textio import open_binary

#: Input lines handed to a worker at a time.
CHUNK_LINES = 32
#: Chunks in flight per worker: enough to keep workers busy, few enough to bound memory.
CHUNKS_AHEAD = 4

Chunk = list[tuple[int, bytes]]


@dataclass
class ChunkResult:
    """What processing a chunk gives back: output, warnings, and the work it took."""

    text: bytes
    warnings: list[str]
    stats: SearchStats
    input_bytes: int


def numbered_chunks(stream: BinaryIO) -> Iterator[Chunk]:
    """Lines of ``stream`` (any length) with 1-based numbers, CHUNK_LINES at a time."""
    numbered = enumerate(stream, start=1)
    while chunk := list(islice(numbered, CHUNK_LINES)):
        yield chunk


def process_chunk(engine: Engine, chunk: Chunk, options: OutputOptions, source: str) -> ChunkResult:
    """Render every record of ``chunk``; bad -t records are skipped only when asked."""
    before = engine.searcher.stats
    out = []
    warnings = []
    for number, line in chunk:
        try:
            out.append(render_record(engine, line, options, source, number))
        except QueryInputError as error:
            if not options.skip_bad_records:
                raise
            warnings.append(f"fastsubs-query: warning: skipped {error}")
    return ChunkResult(b"".join(out), warnings, _difference(engine.searcher.stats, before),
                       sum(len(line) for _, line in chunk))


def _difference(after: SearchStats, before: SearchStats) -> SearchStats:
    """The work counted between two snapshots of a searcher's statistics."""
    return SearchStats(**{f.name: getattr(after, f.name) - getattr(before, f.name)
                          for f in dataclasses.fields(SearchStats)})


def _settle() -> None:
    """Hide what the process holds so far from the cyclic garbage collector (gc.freeze).

    The engine's caches grow to hundreds of thousands of objects (patterns, terms) that
    form no reference cycles; every full collection walked them all again, ~10% of a
    corpus run.  Called between chunks in the processes the CLI owns (a serial run, its
    workers), never inside a library call: it concerns every object of the process.
    """
    gc.freeze()


_worker_engine: Engine | None = None


def _worker_init(index_path: str) -> None:
    global _worker_engine
    _worker_engine = Engine(index_path)


def _worker_chunk(chunk: Chunk, options: OutputOptions, source: str) -> ChunkResult:
    assert _worker_engine is not None, "worker initializer did not run"
    result = process_chunk(_worker_engine, chunk, options, source)
    _settle()
    return result


def serial_results(index_path: str, chunks: Iterable[Chunk], options: OutputOptions,
                   source: str) -> Iterator[ChunkResult]:
    """Results of every chunk, computed in this process."""
    engine = Engine(index_path)
    try:
        for chunk in chunks:
            yield process_chunk(engine, chunk, options, source)
            _settle()
    finally:
        engine.close()


def parallel_results(index_path: str, chunks: Iterable[Chunk], options: OutputOptions, source: str,
                     workers: int) -> Iterator[ChunkResult]:
    """Results of every chunk from ``workers`` processes, in input order, memory bounded."""
    # Imported here: a one-process run (the common case) should not pay for them at start-up.
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init,
                             initargs=(index_path,)) as pool:
        pending: deque[Future] = deque()
        try:
            for chunk in chunks:
                pending.append(pool.submit(_worker_chunk, chunk, options, source))
                if len(pending) >= CHUNKS_AHEAD * workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        except BrokenProcessPool:
            raise FastsubsError("a worker process died (killed, or out of memory?); "
                                "the output is incomplete") from None
        finally:
            for future in pending:
                future.cancel()


def execute(index: Path, *, options: OutputOptions, input_path: Path | None, output_path: Path | None,
            workers: int, stats: bool, warn: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> None:
    """The whole ``fastsubs-query`` run: open input and output, process, report."""
    index_path = str(index)
    if workers > 1:
        Engine(index_path).close()  # fail early, in this process, on a bad index
    source = str(input_path) if input_path is not None else "<stdin>"
    totals = SearchStats()
    with ExitStack() as stack:
        stream = stack.enter_context(open_binary(input_path)) if input_path else sys.stdin.buffer
        out = stack.enter_context(open_binary(output_path, "wb")) if output_path else sys.stdout.buffer
        progress = Progress(input_size(stream)) if Progress.wanted() else None
        chunks = numbered_chunks(stream)
        if workers > 1:
            results = parallel_results(index_path, chunks, options, source, workers)
        else:
            results = serial_results(index_path, chunks, options, source)
        for result in results:
            for warning in result.warnings:
                warn(warning)
            out.write(result.text)
            totals.add(result.stats)
            if progress is not None:
                progress.advance(result.input_bytes, result.stats.positions)
        out.flush()
        if progress is not None:
            progress.finish()
    if stats:
        warn(format_stats(totals))


def format_stats(stats: SearchStats) -> str:
    """One line of search statistics for ``--stats``."""
    per = max(stats.positions, 1)
    return (f"positions {stats.positions}  candidates evaluated {stats.evaluated} "
            f"({stats.evaluated / per:.1f} per position)  sorted-list entries read {stats.list_reads / per:.1f} per position  "
            f"substitutes listed {stats.listed}")
