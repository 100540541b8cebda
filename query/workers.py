"""The forked processes of a ``--workers N`` run: each searches the chunks it is sent and
sends their results back, over pipes of its own.

Each worker has its own pair of pipes, and no other process keeps their ends open, so a
worker that dies (killed, out of memory) while it holds chunks, even in the middle of
sending a result, is an end of file its parent sees at once: the run fails with one line
instead of waiting forever.  (``concurrent.futures.ProcessPoolExecutor``, used before,
has all workers share one result queue: a worker killed while sending leaves half a
message there and the pool's reader blocks on the rest.)  Once the input is all handed
out the parent closes the task pipes, so each worker ends as soon as it has answered what
it holds, while the parent finishes its own chunks, instead of at the end of the run; a
worker that dies between its last answer and its normal end fails the run too, when the
workers are joined.

Workers are forked before the parent opens any index, and each opens the index itself,
so no LMDB environment crosses a fork and all of them share one copy of the index in the
page cache.  They ignore Ctrl-C (the parent handles it) and die with the parent.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import select
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from fastsubs.cli_support import become_worker, signals_held
from fastsubs.errors import FastsubsError
from fastsubs.index import SubstituteIndex

#: What a worker does with each chunk it is sent (the runner's process_chunk, its options bound).
Work = Callable[[SubstituteIndex, object], object]
#: What a worker sends back: the result of one chunk, or what stopped it.
Message = object
#: A result pipe holds this many bytes, so a worker hands over a chunk's output (~20 KB
#: a line at -n 100) in one write instead of waiting for its parent to empty a 64 KiB pipe.
RESULT_PIPE_BYTES = 1 << 20

DIED = "a worker process died (killed, or out of memory?); the output is incomplete"


@dataclass
class Worker:
    """One forked worker as its parent sees it: the chunks it holds are answered in order."""

    process: BaseProcess
    tasks: Connection
    results: Connection
    held: deque[int] = field(default_factory=deque)  # numbers of the chunks sent, not yet answered


def _serve(index_path: str, parent: int, work: Work, tasks: Connection, results: Connection,
           inherited: list[Connection]) -> None:
    """A worker's life: answer every chunk its parent sends until the parent closes the pipe.

    Whatever goes wrong (the index cannot be opened, a damaged record) is sent back as the
    answer, for the parent to raise: a worker prints nothing.
    """
    for connection in inherited:  # the other workers' pipes: theirs alone, so a death is seen
        connection.close()
    become_worker(parent)
    try:
        index = SubstituteIndex(index_path)
    except Exception as error:
        _send(results, error)
        return
    while True:
        try:
            chunk = tasks.recv()
        except (EOFError, OSError):
            return  # the run is over
        try:
            message: Message = work(index, chunk)
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
    """``count`` forked workers, the chunks each holds, and the results they have sent."""

    def __init__(self, workers: list[Worker]) -> None:
        self.workers = workers
        self.answered: dict[int, object] = {}
        # One poll set for the whole run: the parent looks for results between every two
        # lines it searches, and multiprocessing's wait() builds a selector each time
        # (~60 us a line of the parent's own time at --workers 2).
        self._by_fd = {worker.results.fileno(): worker for worker in workers}
        self._results = select.poll()
        for fd in self._by_fd:
            self._results.register(fd, select.POLLIN)

    def least_busy(self) -> Worker:
        return min(self.workers, key=lambda worker: len(worker.held))

    def send(self, worker: Worker, number: int, chunk: object) -> None:
        worker.held.append(number)
        try:
            worker.tasks.send(chunk)
        except OSError:
            raise FastsubsError(DIED) from None

    def finish_sending(self) -> None:
        """No more chunks: each worker ends once it has answered the chunks it holds."""
        for worker in self.workers:
            worker.tasks.close()

    def collect(self, block: bool) -> None:
        """Moves every result sent so far into ``answered`` (waiting for one with ``block``);
        raises what a worker sent instead of a result, or the death of a worker.

        A worker's result pipe ends when the worker does: an error while it still holds
        chunks, its normal end once it holds none."""
        busy = any(worker.held for worker in self.workers)
        for fd, _ in self._results.poll(None if block and busy else 0):
            worker = self._by_fd[fd]
            try:
                message = worker.results.recv()
            except (EOFError, OSError):
                if worker.held:
                    raise FastsubsError(DIED) from None
                self._results.unregister(fd)
                continue
            if isinstance(message, BaseException):
                raise message
            self.answered[worker.held.popleft()] = message


@contextmanager
def worker_processes(count: int, index_path: str, work: Work, parent: int) -> Iterator[WorkerProcesses]:
    """Forks ``count`` workers for a run; on leaving, lets them go (they finish once their
    task pipe closes) or, when the run ends early, stops them at once and waits for them.
    A run that ends well still fails if a worker did not end well (killed after its last
    answer)."""
    context = multiprocessing.get_context("fork")
    pipes = [(multiprocessing.Pipe(duplex=False), multiprocessing.Pipe(duplex=False)) for _ in range(count)]
    every = [end for pair in pipes for pipe in pair for end in pipe]
    workers: list[Worker] = []
    finished = False
    try:
        with signals_held():  # a worker must not see Ctrl-C before it ignores it
            for (task_reader, task_writer), (result_reader, result_writer) in pipes:
                _widen(result_writer)
                mine = (task_reader, result_writer)
                process = context.Process(target=_serve, daemon=True, args=(
                    index_path, parent, work, task_reader, result_writer,
                    [end for end in every if end not in mine]))
                process.start()
                workers.append(Worker(process, task_writer, result_reader))
        for (task_reader, _), (_, result_writer) in pipes:  # the workers' ends are theirs alone
            task_reader.close()
            result_writer.close()
        yield WorkerProcesses(workers)
        finished = True
    finally:
        for worker in workers:
            worker.tasks.close()  # end of file: a worker holding no chunk ends
            if not finished:
                worker.process.terminate()
        for worker in workers:
            worker.process.join()
            worker.results.close()
    if any(worker.process.exitcode for worker in workers):
        raise FastsubsError(DIED)


def _widen(pipe: Connection) -> None:
    """Makes the pipe behind ``pipe`` hold RESULT_PIPE_BYTES, where the system allows."""
    try:
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, RESULT_PIPE_BYTES)
    except (OSError, AttributeError):
        pass  # a smaller pipe only means more, shorter writes
