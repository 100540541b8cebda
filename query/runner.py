"""Running a whole input through one engine or through N worker processes, in input order.

Workers are started with ``fork`` before any index is opened in the parent, and each
opens the index itself in its initializer, so no LMDB environment crosses a fork and
all workers share one copy of the index in the page cache.  A worker that dies makes
the run fail with an error (``BrokenProcessPool``), never a shorter output.  Workers
ignore Ctrl-C and die with the parent; a run that stops early (a signal, a bad record,
damaged input) drops the chunks not yet started and lets the workers finish the ones
they hold (killing a worker while it sends a result can hang the pool's reader).

Whatever stops a run, everything before the line that stopped it is written: a bad
``-t`` record or unreadable input ends output exactly before that line, and ``-o``
keeps its partial file for ``--resume`` (:mod:`fastsubs.query.destinations`).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import BinaryIO

from fastsubs.cli_support import become_worker, signals_held
from fastsubs.errors import FastsubsError, QueryInputError, ResumeError
from fastsubs.query.destinations import PartialOutput, StreamOutput, destination
from fastsubs.query.engine import Engine
from fastsubs.query.options import QueryOptions, missing_word_warning
from fastsubs.query.progress import Progress, input_size
from fastsubs.query.provenance import run_record
from fastsubs.query.records import render_record
from fastsubs.query.search import SearchStats
from fastsubs.textio import DECOMPRESSION_ERRORS, open_binary, read_failure

#: Input lines handed to a worker at a time.
CHUNK_LINES = 32
#: Chunks in flight per worker: enough to keep workers busy, few enough to bound memory.
CHUNKS_AHEAD = 4

Chunk = list[tuple[int, bytes]]


@dataclass
class ChunkResult:
    """What processing a chunk gives back: the output of each line, warnings, and the work it took.

    A bad record that is not to be skipped ends the chunk: ``error`` holds it and
    ``outputs`` the output of every line before it.
    """

    outputs: list[bytes]
    warnings: list[str]
    stats: SearchStats
    error: QueryInputError | None = None

    @property
    def text(self) -> bytes:
        """The output of the whole chunk; raises the chunk's bad record, if there is one."""
        if self.error is not None:
            raise self.error
        return b"".join(self.outputs)


@dataclass
class InputLines:
    """The lines of an input, numbered from 1; reading stops at the first line that cannot be
    read (damaged compressed data), which :meth:`chunks` keeps in ``failure`` so that
    every line before it is still processed and written."""

    stream: BinaryIO
    source: str
    read: int = 0
    failure: QueryInputError | None = field(default=None, init=False)

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        lines = iter(self.stream)
        while True:
            try:
                line = next(lines)
            except StopIteration:
                return
            except DECOMPRESSION_ERRORS as error:
                raise QueryInputError(self.source, self.read + 1, read_failure(error)) from None
            self.read += 1
            yield self.read, line

    def first(self, count: int) -> Iterator[bytes]:
        """The next ``count`` lines (fewer at the end), for checking a resumed run's input."""
        return (line for _, line in islice(self, count))

    def chunks(self) -> Iterator[Chunk]:
        """The rest of the lines, CHUNK_LINES at a time."""
        numbered = iter(self)
        while True:
            chunk: Chunk = []
            try:
                chunk.extend(islice(numbered, CHUNK_LINES))
            except QueryInputError as error:
                self.failure = error
            if chunk:
                yield chunk
            if self.failure is not None or len(chunk) < CHUNK_LINES:
                return


def numbered_chunks(stream: BinaryIO, source: str = "<input>") -> Iterator[Chunk]:
    """Lines of ``stream`` (any length) with 1-based numbers, CHUNK_LINES at a time; a line
    that cannot be read raises QueryInputError after the chunks before it."""
    lines = InputLines(stream, source)
    yield from lines.chunks()
    if lines.failure is not None:
        raise lines.failure


def process_chunk(engine: Engine, chunk: Chunk, options: QueryOptions, source: str) -> ChunkResult:
    """Render every record of ``chunk``; bad -t records are skipped only when asked."""
    before = engine.stats
    outputs: list[bytes] = []
    warnings = []
    error = None
    for number, line in chunk:
        try:
            outputs.append(render_record(engine, line, options, source, number))
        except QueryInputError as bad:
            if not options.skip_bad_records:
                error = bad
                break
            outputs.append(b"")
            warnings.append(f"fastsubs-query: warning: skipped {bad}")
    return ChunkResult(outputs, warnings, _difference(engine.stats, before), error)


def _difference(after: SearchStats, before: SearchStats) -> SearchStats:
    """The work counted between two snapshots of a searcher's statistics."""
    return SearchStats(**{f.name: getattr(after, f.name) - getattr(before, f.name)
                          for f in dataclasses.fields(SearchStats)})


_worker_engine: Engine | None = None


def _worker_init(index_path: str, parent: int) -> None:
    global _worker_engine
    become_worker(parent)
    _worker_engine = Engine(index_path)


def _worker_chunk(chunk: Chunk, options: QueryOptions, source: str) -> ChunkResult:
    assert _worker_engine is not None, "worker initializer did not run"
    return process_chunk(_worker_engine, chunk, options, source)


def _no_work() -> None:
    """A task that does nothing: submitting the first task is what forks the workers."""


Results = Iterator[tuple[Chunk, ChunkResult]]


def serial_results(index_path: str, chunks: Iterable[Chunk], options: QueryOptions, source: str) -> Results:
    """Every chunk with its result, computed in this process."""
    engine = Engine(index_path)
    try:
        for chunk in chunks:
            yield chunk, process_chunk(engine, chunk, options, source)
    finally:
        engine.close()


def parallel_results(index_path: str, chunks: Iterable[Chunk], options: QueryOptions, source: str,
                     workers: int) -> Results:
    """Every chunk with its result from ``workers`` processes, in input order, memory bounded.

    Closing this generator early (the run stops for any reason) cancels the chunks
    not yet started; the workers finish the few they hold, then exit.
    """
    # Imported here: a one-process run (the common case) should not pay for them at start-up.
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init,
                             initargs=(index_path, os.getpid())) as pool:
        with signals_held():  # a worker must not see Ctrl-C before it ignores it
            pool.submit(_no_work)
        pending: deque[tuple[Chunk, Future]] = deque()
        done = False
        try:
            for chunk in chunks:
                pending.append((chunk, pool.submit(_worker_chunk, chunk, options, source)))
                if len(pending) >= CHUNKS_AHEAD * workers:
                    first, future = pending.popleft()
                    yield first, future.result()
            while pending:
                first, future = pending.popleft()
                yield first, future.result()
            done = True
        except BrokenProcessPool:
            raise FastsubsError("a worker process died (killed, or out of memory?); "
                                "the output is incomplete") from None
        finally:
            if not done:
                pool.shutdown(wait=True, cancel_futures=True)


def execute(index: Path, *, options: QueryOptions, input_path: Path | None, output_path: Path | None,
            workers: int, stats: bool, resume: bool = False,
            warn: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> None:
    """The whole ``fastsubs-query`` run: open input and output, process, report.

    With ``resume``, an interrupted ``-o`` run is continued after the input lines its
    partial output already holds; only the rest is searched (and counted by ``stats``).
    """
    index_path = str(index)
    engine = Engine(index_path)  # fails early, in this process, on a bad index
    record = run_record(index_path, engine.meta, options)
    for word in engine.unknown(options.excluded_words):
        warn(f"fastsubs-query: warning: {missing_word_warning(word)}")
    engine.close()  # workers fork after this: no open index crosses a fork
    source = str(input_path) if input_path is not None else "<stdin>"
    totals = SearchStats()
    with ExitStack() as stack:
        stream = stack.enter_context(open_binary(input_path)) if input_path else sys.stdin.buffer
        lines = InputLines(stream, source)
        out = destination(output_path, record, source, warn, sys.stdout.buffer)
        if resume and isinstance(out, StreamOutput):
            raise ResumeError(f"--resume needs -o to name a regular file, not {out.name}")
        try:
            if isinstance(out, PartialOutput):
                out.start(resume, lines.first)
            progress = Progress(_remaining(input_size(stream), stream)) if Progress.wanted() else None
            if workers > 1:
                results = parallel_results(index_path, lines.chunks(), options, source, workers)
            else:
                results = serial_results(index_path, lines.chunks(), options, source)
            for chunk, result in stack.enter_context(closing(results)):
                for warning in result.warnings:
                    warn(warning)
                with signals_held():  # a chunk's output and its record are written whole
                    for (_, line), text in zip(chunk, result.outputs):
                        out.write(line, text)
                    out.checkpoint()
                totals.add(result.stats)
                if progress is not None:
                    progress.advance(sum(len(line) for _, line in chunk), result.stats.positions)
                if result.error is not None:
                    raise result.error
            if lines.failure is not None:
                raise lines.failure
            out.finish()
        except BaseException as error:
            out.abandon(error)
            raise
        if progress is not None:
            progress.finish()
    if stats:
        warn(format_stats(totals))


def _remaining(size: int | None, stream: BinaryIO) -> int | None:
    """Bytes of the input still to read (a resumed run has read its first lines already)."""
    if size is None:
        return None
    try:
        return max(size - stream.tell(), 0)
    except (OSError, ValueError):
        return size


def format_stats(stats: SearchStats) -> str:
    """One line of search statistics for ``--stats``."""
    per = max(stats.positions, 1)
    return (f"positions {stats.positions}  candidates evaluated {stats.evaluated} "
            f"({stats.evaluated / per:.1f} per position)  sorted-list entries read {stats.list_reads / per:.1f} per position  "
            f"substitutes listed {stats.listed}")
