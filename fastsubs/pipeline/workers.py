"""Forked worker processes, each with pipes of its own: a query's ``--workers N`` and a
build's ``--jobs N``.  Each worker prepares once (a query's opens the index), then does
the work it is sent, item by item, and sends each result back.

Each worker has its own pair of pipes, and no other process keeps their ends open, so a
worker that dies (killed, out of memory) while it holds work, even in the middle of
sending a result, is an end of file its parent sees at once: the run fails with one line
instead of waiting forever.  No lock is shared between processes either: a
``multiprocessing.Pool`` (or ``concurrent.futures.ProcessPoolExecutor``) has its workers
share one task queue and one result queue, so a worker killed while it holds their lock
(an idle one always does, as it waits for a task; a signal to the whole process group
kills them all) or half-way through a message leaves the parent waiting forever as it
stops them.  Once all the work is handed out the parent closes the task pipes, so each
worker ends as soon as it has answered what it holds; a worker that dies between its
last answer and its normal end fails the run too, when the workers are joined.

Workers are forked before the parent opens any index or reads anything big, so no LMDB
environment crosses a fork.  They ignore Ctrl-C (the parent handles it) and die with the
parent.
"""

from __future__ import annotations

import fcntl
import gc
import multiprocessing
import select
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from fastsubs.errors import FastsubsError
from fastsubs.pipeline.processes import become_worker, signals_held

#: What a worker makes once, as it starts (a query's: its open index; None for a build).
Prepare = Callable[[], Any]
#: What a worker does with each item it is sent, given what it prepared.
Work = Callable[[Any, Any], object]
#: What a worker sends back: the result of one item, or what stopped it.
Message = object
#: A result pipe holds this many bytes, so a worker hands over a chunk's output in one
#: write instead of waiting for its parent to empty a pipe of Linux's default 64 KiB.
RESULT_PIPE_BYTES = 1 << 20


@dataclass
class Worker:
    """One forked worker as its parent sees it: the items it holds are answered in order."""

    process: BaseProcess
    tasks: Connection
    results: Connection
    held: deque[int] = field(default_factory=deque)  # numbers of the items sent, not yet answered


def _serve(prepare: Prepare, parent: int, work: Work, tasks: Connection, results: Connection,
           inherited: list[Connection]) -> None:
    """A worker's life: answer every item its parent sends until the parent closes the pipe.

    Whatever goes wrong (the index cannot be opened, a damaged record) is sent back as the
    answer, for the parent to raise: a worker prints nothing.
    """
    for connection in inherited:  # the other workers' pipes: theirs alone, so a death is seen
        connection.close()
    become_worker(parent)
    try:
        prepared = prepare()
    except Exception as error:
        _send(results, error)
        return
    while True:
        try:
            item = tasks.recv()
        except (EOFError, OSError):
            return  # the run is over
        try:
            message: Message = work(prepared, item)
        except Exception as error:
            message = error
        if not _send(results, message):
            return


def _send(results: Connection, message: Message) -> bool:
    """Sends ``message``; False when the parent is gone.  An error that cannot be pickled
    goes as its message."""
    try:
        try:
            results.send(message)
        except (TypeError, AttributeError, ValueError) as unpicklable:  # pickling failed: nothing was sent
            if not isinstance(message, BaseException):
                raise unpicklable
            results.send(FastsubsError(str(message)))
    except OSError:
        return False
    return True


class WorkerProcesses:
    """``count`` forked workers, the items each holds, and the results they have sent;
    ``died``, the error a worker's death is."""

    def __init__(self, workers: list[Worker], died: str) -> None:
        self.workers = workers
        self.died = died
        self.answered: dict[int, object] = {}
        # One poll set for the whole run: the parent looks for results between every two
        # chunks it searches, and multiprocessing's wait() would build a selector each time.
        self._by_fd = {worker.results.fileno(): worker for worker in workers}
        self._results = select.poll()
        for fd in self._by_fd:
            self._results.register(fd, select.POLLIN)
        self._watched: int | None = None
        self.receiving = 0.0  # seconds spent receiving results (not waiting for them)

    def watch(self, fd: int | None) -> None:
        """Also end a blocking :meth:`collect` when ``fd`` becomes readable (the reading
        thread's wake pipe: input is ready), until watched again with None; the caller
        empties it."""
        if self._watched is not None:
            self._results.unregister(self._watched)
        self._watched = fd
        if fd is not None:
            self._results.register(fd, select.POLLIN)

    def least_busy(self) -> Worker:
        return min(self.workers, key=lambda worker: len(worker.held))

    def send(self, worker: Worker, number: int, item: object) -> None:
        worker.held.append(number)
        try:
            worker.tasks.send(item)
        except OSError:
            raise FastsubsError(self.died) from None

    def finish_sending(self) -> None:
        """No more items: each worker ends once it has answered the items it holds."""
        for worker in self.workers:
            worker.tasks.close()

    def wait(self) -> None:
        """Waits for the workers to end, once all the work is handed out and answered; a
        worker that did not end well (killed after its last answer) is the error ``died``
        here, before the caller makes use of the answers."""
        for worker in self.workers:
            worker.process.join()
        if any(worker.process.exitcode for worker in self.workers):
            raise FastsubsError(self.died)

    def collect(self, block: bool) -> None:
        """Moves every result sent so far into ``answered`` (waiting for one with ``block``);
        raises what a worker sent instead of a result, or the death of a worker.

        A worker's result pipe ends when the worker does: an error while it still holds
        items, its normal end once it holds none."""
        busy = any(worker.held for worker in self.workers) or self._watched is not None
        for fd, event in self._results.poll(None if block and busy else 0):
            if fd == self._watched:
                if event & select.POLLHUP:  # its writer is gone: it would end every wait at once
                    self.watch(None)
                continue
            worker = self._by_fd[fd]
            started = time.perf_counter()
            try:
                message = worker.results.recv()
            except (EOFError, OSError):
                if worker.held:
                    raise FastsubsError(self.died) from None
                self._results.unregister(fd)
                continue
            self.receiving += time.perf_counter() - started
            if isinstance(message, BaseException):
                raise message
            self.answered[worker.held.popleft()] = message


@contextmanager
def worker_processes(count: int, prepare: Prepare, work: Work, parent: int, died: str) -> Iterator[WorkerProcesses]:
    """Forks ``count`` workers; on leaving, lets them go (they finish once their task pipe
    closes) or, when the run ends early, stops them at once and waits for them.  A run
    that ends well still fails if a worker did not end well (killed after its last
    answer).  ``died``: the error a worker's death is."""
    context = multiprocessing.get_context("fork")
    pipes = [(multiprocessing.Pipe(duplex=False), multiprocessing.Pipe(duplex=False)) for _ in range(count)]
    every = [end for pair in pipes for pipe in pair for end in pipe]
    workers: list[Worker] = []
    finished = False
    # Every object made so far goes into the collector's permanent generation before the
    # forks: a worker's collections then never write to the pages it shares with its
    # parent (each write copies a page), and the parent takes them back afterwards.
    gc.freeze()
    try:
        try:
            with signals_held():  # a worker must not see Ctrl-C before it ignores it
                for (task_reader, task_writer), (result_reader, result_writer) in pipes:
                    _widen(result_writer)
                    mine = (task_reader, result_writer)
                    process = context.Process(target=_serve, daemon=True, args=(
                        prepare, parent, work, task_reader, result_writer,
                        [end for end in every if end not in mine]))
                    process.start()
                    workers.append(Worker(process, task_writer, result_reader))
        finally:
            gc.unfreeze()
        for (task_reader, _), (_, result_writer) in pipes:  # the workers' ends are theirs alone
            task_reader.close()
            result_writer.close()
        pool = WorkerProcesses(workers, died)
        yield pool
        finished = True
    finally:
        for worker in workers:
            worker.tasks.close()  # end of file: a worker holding no item ends
            if not finished:
                worker.process.kill()  # nothing it holds is wanted, and it may ignore SIGTERM
        for worker in workers:
            worker.process.join()
            worker.results.close()
    pool.wait()


def _widen(pipe: Connection) -> None:
    """Makes the pipe behind ``pipe`` hold RESULT_PIPE_BYTES, where the system allows."""
    try:
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, RESULT_PIPE_BYTES)
    except (OSError, AttributeError):
        pass  # a smaller pipe only means more, shorter writes
