"""``fastsubs-query --dask ADDRESS -i 'corpus/*.txt' -o out/``: whole input files as tasks
on a Dask cluster (``pip install '.[dask]'`` in the clone).

:func:`run_files` processes each input file as one task and writes ``out/<file name>``;
each output file is byte-identical to a single-machine run on that input file (with
``--format parquet``, ``out/<file name>`` is a dataset directory whose parts are those
of a single-machine run, published whole as there).  Each worker process opens the index
once (:func:`fastsubs.core.process_index`), from a path it can read.

A run that stops (SIGINT, SIGTERM, a task's error) stops its tasks, and no file is
published after its client has said it stopped: :class:`Publishing`.
"""

from __future__ import annotations

import functools
import glob
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastsubs.core import process_index
from fastsubs.errors import FastsubsError, add_note, missing_extra
from fastsubs.options import QueryOptions
from fastsubs.pipeline.chunks import process_chunk
from fastsubs.pipeline.formats import input_blocks
from fastsubs.pipeline.lines import numbered_chunks
from fastsubs.pipeline.parts import publish_part
from fastsubs.pipeline.textio import compressor, open_binary
from fastsubs.query.output_files import PARTIAL_SUFFIX, written_atomically
from fastsubs.query.output_lock import output_locked
from fastsubs.stats import SearchStats

#: Seconds between a task's checks, while it searches, that its run is still wanted (each
#: asks the scheduler): how long a stopped run's task may go on.
CHECK_INTERVAL = 1.0
#: How long a stopping client waits for a file being renamed into place to be done: a
#: rename takes milliseconds, but the lock of a worker that died renaming is held until
#: its lease times out (Dask's ``distributed.scheduler.locks.lease-timeout``, 30 s).
PUBLISH_WAIT = "10s"


class RunStopped(Exception):
    """Raised in a task whose run no longer wants it: its file is not published."""


@dataclass(frozen=True)
class Publishing:
    """How the tasks of one run publish their files: only while the run still wants them.

    A task renames its file into place (publishes it) holding the run's Dask ``Lock``, and
    only after asking the scheduler that its run still wants it (:meth:`wanted`): the
    run's Dask ``Event`` is not set (its client sets it as it stops), and the scheduler
    still has this task processing on this worker (it drops it when the client cancels it
    or goes away, even killed with SIGKILL, and when it has given the task to another
    worker).  A stopping client (:meth:`stop`) sets the event, then takes and gives back
    the lock: once it has, no rename is under way and none will start, so no file appears
    after the client has said it stopped; then it cancels its futures.

    Why these: ``Event`` and ``Lock`` are Dask's documented coordination primitives, kept
    by the scheduler, and setting an event returns once the scheduler has it, which is the
    ordering the stop needs; a lock's lease ends when its holder dies, so a worker killed
    while renaming holds up a stop for Dask's lease timeout at most.  A future's own
    cancellation is no such thing: ``Client.cancel`` sends a message and returns, and the
    running task is not told (Dask cannot stop a running thread), so a task that checked
    it could still rename its file after its client had exited.
    """

    #: The run's Event and Lock (unique to the run).
    name: str

    @classmethod
    def for_new_run(cls) -> Publishing:
        """The publishing of a new run, under a name no other run has."""
        return cls(f"fastsubs-query-{uuid.uuid4().hex}")

    # -- in a task, on a worker

    def wanted(self) -> bool:
        """Whether the run still wants this task's output (asked of the scheduler)."""
        from distributed import Event, get_client, get_worker

        worker, client = get_worker(), get_client()
        if Event(self.name, client).is_set():
            return False
        running = client.processing(workers=[worker.address]).get(worker.address, ())
        return worker.get_current_task() in running

    def check(self) -> None:
        """Raise :class:`RunStopped` unless the run still wants this task."""
        if not self.wanted():
            raise RunStopped(f"{self.name}: the run was stopped")

    def publish(self, rename: Callable[[], None]) -> None:
        """Call ``rename``, which puts the task's file in place, if the run still wants it;
        else raise :class:`RunStopped` (the caller removes its partial output)."""
        with _lock(self.name):
            self.check()  # under the lock: a stop waits for the rename, or the rename sees the stop
            rename()

    def checked_every(self, seconds: float = CHECK_INTERVAL) -> Callable[[], None]:
        """A function to call between chunks: :meth:`check` at most every ``seconds``."""
        due = time.monotonic() + seconds

        def maybe_check() -> None:
            nonlocal due
            if time.monotonic() >= due:
                self.check()
                due = time.monotonic() + seconds

        return maybe_check

    # -- in the client

    def stop(self, client: Any, futures: Sequence[Any], error: BaseException) -> None:
        """Stop the run's tasks (``futures``) as the client stops with ``error``: after this
        returns, no task publishes a file (see the class).  A rename that outlasts
        PUBLISH_WAIT (a worker that died holding the lock), or a scheduler that cannot be
        reached, is said in a note on ``error``, which this never hides."""
        from distributed import Event, Lock

        try:
            Event(self.name, client).set()
            lock = Lock(self.name)
            if lock.acquire(timeout=PUBLISH_WAIT):
                lock.release()
            else:
                add_note(error, f"a worker was still publishing a file after {PUBLISH_WAIT}; no other file "
                                "will be published")
            client.cancel(list(futures))
            self.close()
        except (OSError, TimeoutError) as failure:  # the scheduler is gone: no task can publish without it
            add_note(error, f"the scheduler could not be told that the run stopped ({failure})")

    def close(self) -> None:
        """Forget the run's lock on the scheduler: its tasks are over, or stopped (a task that
        comes to publish later finds no lock, or makes a new one and sees the run's event)."""
        from distributed import Lock

        Lock(self.name).close()


@functools.cache
def _lock(name: str) -> Any:
    """The Dask Lock ``name`` in this worker process, made once: each one made refreshes its
    leases on the worker's event loop for as long as the process lives."""
    from distributed import Lock

    return Lock(name)


def _process_file(job: tuple[str, str], index_path: str, options: QueryOptions,
                  publishing: Publishing) -> SearchStats:
    """One input file's output, written by one run at a time, as every ``-o`` is
    (:mod:`fastsubs.query.output_lock`, on the worker that writes it), and published only
    while its run wants it (``publishing``)."""
    with output_locked(job[1], warn=print):  # (a note in the worker's log)
        if options.format == "parquet":
            return _process_file_into_a_dataset(job, index_path, options, publishing)
        return _process_file_as_text(job, index_path, options, publishing)


def _process_file_as_text(job: tuple[str, str], index_path: str, options: QueryOptions,
                          publishing: Publishing) -> SearchStats:
    """One input file's output, written as fastsubs-query writes it (a compressed one in the
    same members), with a bad record an error as there; published whole, as every ``-o``
    (a task that fails leaves no file), and only while its run wants it (``publishing``:
    checked between chunks too, so that a stopped run's task stops within CHECK_INTERVAL)."""
    source, target = job
    totals = SearchStats()
    compress = compressor(target)
    still_wanted = publishing.checked_every()
    with open_binary(source) as stream, written_atomically(target, publish=publishing.publish) as out:
        index = process_index(index_path)
        for chunk in numbered_chunks(stream, source):
            still_wanted()  # a stopped run's task ends within CHECK_INTERVAL, not at its file's end
            result = process_chunk(index, chunk, options, source, compress)
            out.write(result.data)
            totals.add(result.stats)
            if result.error is not None:
                raise result.error
        if compress is not None and out.tell() == 0:  # no output at all: still a valid file
            out.write(compress(b""))
    return totals


def _process_file_into_a_dataset(job: tuple[str, str], index_path: str, options: QueryOptions,
                                 publishing: Publishing) -> SearchStats:
    """One input file's Parquet dataset: its parts written into ``<target>.partial/`` as a
    single-machine run writes them, which becomes ``<target>`` once whole (replacing an
    older one) if the run still wants it; a task that fails or is stopped removes it."""
    from fastsubs.pipeline.parquet import PartFiles

    source, target = job
    totals = SearchStats()
    building = f"{target}{PARTIAL_SUFFIX}"
    shutil.rmtree(building, ignore_errors=True)  # an earlier attempt's
    os.mkdir(building)
    still_wanted = publishing.checked_every()
    try:
        parts = PartFiles(building, options)
        with open_binary(source) as stream:
            index = process_index(index_path)
            for chunk in numbered_chunks(stream, source, input_blocks(options)):
                still_wanted()
                result = process_chunk(index, chunk, options, source, parts=parts)
                assert result.part is not None
                publish_part(result.part, building)
                totals.add(result.stats)
                if result.error is not None:
                    raise result.error
        publishing.publish(functools.partial(_replace_directory, building, target))
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return totals


def _replace_directory(building: str, target: str) -> None:
    """Put the dataset ``building`` in the place of ``target`` (an older dataset, or nothing)."""
    shutil.rmtree(target, ignore_errors=True)
    os.rename(building, target)


def run_files(scheduler: str, index_path: str, pattern: str, output_dir: Path, options: QueryOptions) -> SearchStats:
    """Process every file matching ``pattern`` on the cluster at ``scheduler``; one output file
    each.  Stopped (SIGINT, SIGTERM, a task's error), it stops its tasks before it returns:
    nothing is published after (:class:`Publishing`)."""
    try:
        from distributed import Client
    except ImportError as error:
        raise missing_extra("--dask needs Dask", "dask", str(error)) from None
    if options.format == "parquet":
        from fastsubs.pipeline.parquet import FORMAT_FLAG, require_pyarrow

        require_pyarrow(FORMAT_FLAG, "parquet")
    sources = sorted(glob.glob(pattern))
    if not sources:
        raise FastsubsError(f"{pattern}: no input file matches")
    names = [os.path.basename(s) for s in sources]
    if len(set(names)) != len(names):
        raise FastsubsError(f"{pattern}: input files must have distinct names (they name the outputs)")
    with Client(scheduler) as client:  # first: a run that cannot reach its cluster makes nothing
        made = not output_dir.exists()
        output_dir.mkdir(parents=True, exist_ok=True)
        jobs = [(os.path.abspath(s), str(output_dir.resolve() / n)) for s, n in zip(sources, names)]
        publishing = Publishing.for_new_run()
        futures: list[Any] = []
        try:
            # pure=False: the run's own tasks, which no other run's client wants too
            futures = client.map(_process_file, jobs, index_path=os.path.abspath(index_path), options=options,
                                 publishing=publishing, pure=False)
            results = client.gather(futures)
        except BaseException as error:
            publishing.stop(client, futures, error)
            # the gather's own tasks end with Dask's AllExit, which asyncio would log at exit as "Task
            # exception was never retrieved" (Python 3.10) after the run's one line: the run said it stopped
            logging.getLogger("asyncio").disabled = True
            if made and not any(output_dir.iterdir()):  # nothing written: leave nothing
                output_dir.rmdir()
            raise
        publishing.close()
    totals = SearchStats()
    for stats in results:
        totals.add(stats)
    return totals
