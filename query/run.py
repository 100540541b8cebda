"""Running a whole input through one open index or through N processes, in input order.

With ``--workers N`` this process and N - 1 forked ones search
(:mod:`fastsubs.pipeline.workers`), this one only while writing the answers leaves it
time; a worker that dies makes the run fail with an error, never a shorter output, and a
run that stops early (a signal, a bad record, damaged input) stops the workers.

Whatever stops a run, everything before the line that stopped it is written: a bad
``-t`` record or unreadable input ends output exactly before that line, and ``-o``
keeps its partial file for ``--resume`` (:mod:`fastsubs.query.output_files`).
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable
from contextlib import AbstractContextManager, ExitStack, closing
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from fastsubs.core import Core
from fastsubs.errors import ArgumentError, ResumeError
from fastsubs.options import QueryOptions, missing_word_warning
from fastsubs.pipeline.chunks import ChunkResult, process_chunk
from fastsubs.pipeline.formats import input_blocks
from fastsubs.pipeline.lines import Chunk, InputLines
from fastsubs.pipeline.long_lines import PIECE_BYTES, LongLine, SpillDirectory, remove_abandoned
from fastsubs.pipeline.processes import signals_held, usable_cores
from fastsubs.pipeline.textio import Compressor, compressor
from fastsubs.query.output_files import (
    PARTIAL_SUFFIX,
    PartialOutput,
    StreamOutput,
    destination,
    published_whole,
    refuse_the_input_as_output,
)
from fastsubs.query.output_lock import output_locked
from fastsubs.query.progress import Progress
from fastsubs.query.provenance import run_record
from fastsubs.query.reading import END, ReadingThread, open_input
from fastsubs.stats import SearchStats

if TYPE_CHECKING:
    from fastsubs.pipeline.parquet import PartFiles
    from fastsubs.pipeline.workers import WorkerProcesses

#: Chunks a forked worker holds: the one it searches and the next.  The run's own process
#: tops its workers up between the chunks it searches itself (one call into C each), while
#: the worker still has the next, so one more would only lengthen the end of a run, where
#: this process waits for what the workers still hold; one would leave a worker idle
#: (docs/performance.md, "Tuning").
CHUNKS_AHEAD = 2
WORKER_DIED = "a worker process died (killed, or out of memory?); the output is incomplete"


Results = Generator[tuple[Chunk, ChunkResult], None, None]


def serial_results(index: Core, chunks: Iterable[Chunk], options: QueryOptions, source: str,
                   compress: Compressor | None, parts: PartFiles | None) -> Results:
    """Every chunk with its result, computed in this process."""
    for chunk in chunks:
        yield chunk, process_chunk(index, chunk, options, source, compress, parts)


def search_workers(count: int, index_path: str, options: QueryOptions, source: str,
                   compress: Compressor | None, parts: PartFiles | None) -> AbstractContextManager[WorkerProcesses]:
    """``count`` forked workers, each of which opens the index once and then processes the
    chunks it is sent."""
    # Imported here: a one-process run (the common case) should not pay for multiprocessing.
    from fastsubs.pipeline.workers import worker_processes

    def work(index: Core, chunk: Chunk) -> ChunkResult:
        return process_chunk(index, chunk, options, source, compress, parts)

    return worker_processes(count, partial(Core, index_path), work, os.getpid(), WORKER_DIED)


def parallel_results(index: Core, pool: WorkerProcesses, chunks: Iterable[Chunk], stop_input: Callable[[], None],
                     options: QueryOptions, source: str, compress: Compressor | None,
                     parts: PartFiles | None) -> Results:
    """Every chunk with its result from this process and the ``pool``'s workers, in input
    order, memory bounded.

    This process keeps each worker holding CHUNKS_AHEAD chunks, and searches a chunk
    itself whenever the next result to write is not ready (topping the workers up between
    its chunks), so ``--workers 2`` is two processes busy on two cores, not two and a
    parent that mostly waits; with many workers it only writes, once writing their answers
    leaves it no time to search (:class:`SearchShare`).  A thread reads the
    input (:mod:`fastsubs.query.reading`), so answers are written while a pipe that stays
    open has nothing more to give; ``stop_input`` stops it as the run ends.
    """
    most = CHUNKS_AHEAD * (len(pool.workers) + 1) * 2
    share = SearchShare(pool)
    with ReadingThread(iter(chunks), most, stop_input) as reading:
        run = InOrder(pool, reading, most)
        pool.watch(reading.wake)
        try:
            while True:
                pool.collect(block=False)
                reading.drain()
                for chunk, result in run.ready():
                    started = time.perf_counter()
                    yield chunk, result  # written meanwhile
                    share.wrote(time.perf_counter() - started, len(chunk))
                run.top_up()  # with the chunks read so far: never waits for input
                if run.finished:
                    return
                taken = run.take() if share.searches_here() else None
                if taken is not None:  # the next result is not ready: search meanwhile
                    number, chunk = taken
                    started = time.perf_counter()
                    pool.answered[number] = process_chunk(index, chunk, options, source, compress, parts)
                    share.searched(time.perf_counter() - started, len(chunk))
                else:
                    pool.collect(block=True)  # a result, or input
        finally:
            pool.watch(None)


class SearchShare:
    """Whether the run's own process searches a chunk while it waits for the next result
    (parallel_results), from what searching and writing have cost it so far in this run.

    It must receive and write its workers' answers as they come; only the time that leaves
    can go to chunks of its own (whose answers it need not receive).  With w the seconds it
    takes to receive and write an input line's answers, s to search one and W workers (it
    forked ``--workers`` - 1), their answers take W w / s of its time: while that is below 1
    it searches whenever it has nothing to write (``--workers 2``: two busy cores), and once
    it is not (many workers, or bulky output), a chunk of its own only holds their answers
    back while the workers wait for it, and it only writes (docs/performance.md, "Many
    cores").  w and s are measured per input line as the run goes, so that it holds for
    every output format, -n and consumer."""

    def __init__(self, pool: WorkerProcesses) -> None:
        self.pool = pool  # (it counts the seconds spent receiving)
        self.search_seconds = self.write_seconds = 0.0
        self.lines_searched = self.lines_written = 0

    def searches_here(self) -> bool:
        if not self.lines_searched or not self.lines_written:
            return True  # nothing measured yet
        written = (self.write_seconds + self.pool.receiving) / self.lines_written
        return len(self.pool.workers) * written < self.search_seconds / self.lines_searched

    def searched(self, seconds: float, lines: int) -> None:
        self.search_seconds += seconds
        self.lines_searched += lines

    def wrote(self, seconds: float, lines: int) -> None:
        """Time spent writing the answers of ``lines`` input lines."""
        self.write_seconds += seconds
        self.lines_written += lines


class InOrder:
    """The chunks of a parallel run in flight, from reading to writing: handed to the
    workers or searched here, and given back in input order once answered."""

    def __init__(self, pool: WorkerProcesses, reading: ReadingThread, most: int) -> None:
        self.pool = pool
        self.reading = reading
        self.read = 0  # chunks taken so far: the next one's number
        self.most = most  # chunks in flight at most: what bounds the memory of a run
        self.pending: deque[tuple[int, Chunk]] = deque()
        self.exhausted = False

    @property
    def finished(self) -> bool:
        return self.exhausted and not self.pending

    def take(self) -> tuple[int, Chunk] | None:
        """The next chunk of the input, now in flight; None at the end, when enough are, or
        when the next one has not been read yet."""
        if self.exhausted or len(self.pending) >= self.most:
            return None
        chunk = self.reading.next_ready()
        if chunk is END:
            self.exhausted = True
            self.pool.finish_sending()
            self.pool.watch(None)
            return None
        if chunk is None:
            return None
        taken = (self.read, chunk)
        self.read += 1
        self.pending.append(taken)  # type: ignore[arg-type]
        return taken  # type: ignore[return-value]

    def top_up(self) -> None:
        """Tops every worker up to CHUNKS_AHEAD chunks."""
        while len((worker := self.pool.least_busy()).held) < CHUNKS_AHEAD:
            taken = self.take()
            if taken is None:
                return
            self.pool.send(worker, *taken)

    def ready(self) -> Results:
        """The answered chunks at the head of the input, removed from what is in flight."""
        answered = self.pool.answered
        while self.pending and self.pending[0][0] in answered:
            number, chunk = self.pending.popleft()
            yield chunk, answered.pop(number)  # type: ignore[misc]


def run_notes(index: Core, options: QueryOptions, count_given: bool) -> list[str]:
    """What a run says before it starts about options the index cannot honour as given: a
    word of ``--exclude`` the vocabulary lacks (a warning), and a ``-n`` (``count_given``:
    the user's, not the default 100) above the substitutes a position can have, the
    vocabulary but ``<s>`` and the excluded words (a note: the search lists that many)."""
    notes = [f"fastsubs-query: warning: {missing_word_warning(word)}" for word in index.unknown(options.excluded_words)]
    excluded = len(index.excluded(options.excluded_words)) // 4
    most = index.vocab_size - 1 - excluded
    if count_given and options.n is not None and options.n > most:
        but = "<s>" + (f" and {excluded:,} excluded word{'s' if excluded > 1 else ''}" if excluded else "")
        notes.append(f"fastsubs-query: note: -n {options.n:,} is more than the {most:,} substitutes a position "
                     f"can have (the model's {index.vocab_size:,} words but {but}); listing {most:,}")
    return notes


def execute(index: Path, *, options: QueryOptions, input_path: Path | None, output_path: Path | None,
            workers: int, stats: bool, resume: bool = False, compress_level: int | None = None,
            count_given: bool = False, warn: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> None:
    """The whole ``fastsubs-query`` run: open input and output, process, report.

    With ``resume``, an interrupted ``-o`` run is continued after the input lines its
    partial output already holds; only the rest is searched (and counted by ``stats``).
    ``compress_level``: of a compressed ``-o`` (None: its format's default).
    ``count_given``: ``options.n`` is the user's ``-n`` (a note says when the model has fewer).
    """
    refuse_the_input_as_output(output_path, input_path, sys.stdin.buffer)
    dataset = options.format == "parquet"
    compress = None if dataset else output_compressor(output_path, compress_level)
    parts = dataset_parts(output_path, options, compress_level) if dataset else None
    blocks = input_blocks(options)
    cores = usable_cores()
    if workers > cores:
        warn(f"fastsubs-query: note: --workers {workers} is more than the {cores} "
             f"{'core' if cores == 1 else 'cores'} here; using {cores}")
        workers = cores
    index_path = str(index)
    source = str(input_path) if input_path is not None else "<stdin>"
    totals = SearchStats()
    with ExitStack() as stack:
        # One run writes OUT at a time, from before anything is read or forked to after it is
        # published (or left for --resume), workers stopped first.
        if output_path is not None and published_whole(output_path, dataset):
            stack.enter_context(output_locked(output_path, warn))
        # This process opens the index once and keeps it for the whole run (the check, the
        # run's record, the search), after forking its workers, which open their own: an
        # LMDB environment must not cross a fork.  The workers run until they are waited
        # for below, or the run stops them.
        pool = stack.enter_context(search_workers(workers - 1, index_path, options, source, compress, parts)) \
            if workers > 1 else None
        opened = stack.enter_context(Core(index_path))  # fails early on a bad index
        record = run_record(index_path, opened.meta, options, compress)
        for note in run_notes(opened, options, count_given):
            warn(note)
        stream, raw = open_input(input_path)
        stack.enter_context(raw)
        stack.enter_context(stream)
        # where long lines are kept while they are searched (and what runs killed left there goes)
        remove_abandoned()
        spill = SpillDirectory(stack)
        lines = InputLines(stream, source, blocks, spill=spill)
        out = destination(output_path, record, source, warn, sys.stdout.buffer, compress, workers,
                          blocks if dataset else None)
        if resume and isinstance(out, StreamOutput):
            raise ResumeError(f"--resume needs -o to name a regular file, not {out.name}")
        try:
            if isinstance(out, PartialOutput):
                out.start(resume, lines.first)
            progress = Progress(stream) if Progress.wanted() else None
            if pool is not None:
                results = parallel_results(opened, pool, lines.chunks(), raw.stop, options, source, compress, parts)
            else:
                results = serial_results(opened, lines.chunks(), options, source, compress, parts)
            for chunk, result in stack.enter_context(closing(results)):
                for warning in result.warnings:
                    warn(warning)
                write_result(out, chunk, result)
                totals.add(result.stats)
                if progress is not None:
                    progress.advance(sum(len(line) for _, line in chunk), result.stats.positions)
                if result.error is not None:
                    raise result.error
            if lines.failure is not None:
                raise lines.failure
            if pool is not None:
                pool.wait()  # a worker that died after its last answer fails the run before its output is out
            out.finish()
        except BaseException as error:
            out.abandon(error)
            raise
        if progress is not None:
            progress.finish()
    if stats:
        warn(format_stats(totals))


def write_result(out: PartialOutput | StreamOutput, chunk: Chunk, result: ChunkResult) -> None:
    """Writes a chunk's output and records it.  A chunk's output in memory is written whole;
    a spilled one (a long line's) is copied a piece at a time, signals allowed between the
    pieces (a run stopped among them keeps the record of the chunks before, and --resume
    cuts the pieces back), then recorded; its files are removed."""
    lines = [line for _, line in chunk[:result.done]]
    try:
        if result.spilled is not None:
            with open(result.spilled, "rb") as spilled:
                while piece := spilled.read(PIECE_BYTES):
                    out.write([], piece, False)
        with signals_held():  # a chunk's output and its record are written whole
            out.write(lines, result.data, result.error is None, result.part)
    finally:
        for path in [result.spilled] + [line.path for _, line in chunk if isinstance(line, LongLine)]:
            if path is not None:
                os.unlink(path)


def dataset_parts(output_path: Path | None, options: QueryOptions, level: int | None) -> PartFiles:
    """Where the processes of a parquet run write their parts (OUT.partial); ArgumentError
    for what a dataset cannot be (no -o, a compressed name, a compression level), and the
    install line when pyarrow is missing."""
    if output_path is None:
        raise ArgumentError("--format parquet writes a dataset directory: name it with -o")
    if compressor(output_path) is not None or level is not None:
        raise ArgumentError("--format parquet compresses its columns itself (zstd): name -o without "
                            ".gz/.bz2/.xz and leave out --compress-level")
    from fastsubs.pipeline.parquet import PartFiles

    return PartFiles(f"{output_path}{PARTIAL_SUFFIX}", options)


def output_compressor(output_path: Path | None, level: int | None) -> Compressor | None:
    """What compresses the chunks of an output named ``output_path`` (None: a plain one);
    ArgumentError for a level the format lacks, or a level for a plain output."""
    if output_path is None or compressor(output_path) is None:
        if level is not None:
            raise ArgumentError("--compress-level is for a compressed -o (.gz, .bz2, .xz)")
        return None
    try:
        return compressor(output_path, level)
    except ValueError as error:
        raise ArgumentError(f"--compress-level: {error}") from None


def format_stats(stats: SearchStats) -> str:
    """One line of search statistics for ``--stats``."""
    per = max(stats.positions, 1)
    return (f"positions {stats.positions}  candidates evaluated {stats.evaluated} "
            f"({stats.evaluated / per:.1f} per position)  "
            f"sorted-list entries read {stats.list_reads / per:.1f} per position  substitutes listed {stats.listed}")
