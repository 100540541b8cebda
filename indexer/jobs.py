"""The processes a build runs its slot jobs in (``--jobs``), or none.

A build's jobs (:func:`fastsubs.indexer.slots.encode_slot`) run in worker processes
forked when the build starts, before it reads anything big, so that they sort and encode
the records of one order while the building process reads the next and appends what is
done.  With one job they run in the building process itself, when they are submitted.

The workers are :mod:`fastsubs.pipeline.workers`' (a query's ``--workers`` too): each has pipes of
its own and holds one job at a time, handed to it whenever the building process tends
them (:meth:`Jobs.tend`, between the chunks it reads, and while it waits for a result).
They leave stopping to the build (they ignore Ctrl-C and die with it), and a build that
fails kills them at once.  A ``multiprocessing.Pool``, used before, could not be stopped
once a signal to the whole process group had killed its workers: an idle worker dies
holding the pool's queue lock, and stopping the pool waits for that lock forever.
Forking keeps start-up free (nothing to import again); a program that runs threads of
its own and asks ``build_index`` for several jobs takes fork's usual risk of a lock held
by another thread at that moment (Python 3.12+ warns of it), which is why the API's
default is one job, in the calling process.
"""

from __future__ import annotations

import itertools
import os
import time
from collections import deque
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any, cast

from fastsubs.pipeline.workers import WorkerProcesses, worker_processes

JOB_DIED = "a build job's process died (killed, or out of memory?)"


class _Failed:
    """What a job raised, sent back as its result so that it is raised by that job's
    ``get()``, in the order the build asks for results (not as it happens to arrive)."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def _nothing() -> None:
    """A job process prepares nothing: each job brings what it needs."""


def _run(_: None, job: Any) -> tuple[object, float]:
    """Run one job, ``(function, argument)``: its result (or :class:`_Failed`) and the CPU
    seconds it took (the build's estimate of its time left tells the work from the
    processes it shared the cores with)."""
    function, argument = job
    cpu = time.process_time()
    try:
        result: object = function(argument)
    except Exception as error:
        result = _Failed(error)
    return result, time.process_time() - cpu


class Job:
    """A submitted job: ``ready()`` says whether it has ended, ``get()`` gives its result
    or raises its error (waiting for it)."""

    def __init__(self, jobs: Jobs | None, number: int) -> None:
        self._jobs, self.number = jobs, number
        self._result: object = None
        self._done = False
        #: when a process took it and when its result came back (time.monotonic()), and the
        #: CPU seconds it took, for the build's estimate of its time left; None until then
        self.started: float | None = None
        self.ended: float | None = None
        self.cpu: float | None = None

    def ready(self) -> bool:
        if not self._done and self._jobs is not None:
            self._jobs.tend()
            self._take()
        return self._done

    def get(self) -> Any:
        while not self.ready():
            assert self._jobs is not None
            self._jobs.tend(block=True)
        if isinstance(self._result, _Failed):
            raise self._result.error
        return self._result

    def _take(self) -> None:
        answered = self._jobs.pool.answered if self._jobs and self._jobs.pool else {}
        if self.number in answered:
            self._result, self.cpu = cast("tuple[object, float]", answered.pop(self.number))
            self._done, self.ended = True, time.monotonic()

    def run_here(self, function: Callable[[Any], Any], argument: Any) -> None:
        """Run it in this process, now."""
        self.started = time.monotonic()
        (self._result, self.cpu), self._done = _run(None, (function, argument)), True
        self.ended = time.monotonic()


class Jobs:
    """Runs ``submit``-ted jobs in ``count`` forked processes (none when ``count`` is 1)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.pool: WorkerProcesses | None = None
        self._stack = ExitStack()
        self._numbers = itertools.count()
        self._waiting: deque[tuple[Job, tuple[Callable[[Any], Any], Any]]] = deque()
        if count > 1:
            self.pool = self._stack.enter_context(worker_processes(count, _nothing, _run, os.getpid(), JOB_DIED))

    def submit(self, function: Callable[[Any], Any], argument: Any) -> Job:
        """Start ``function(argument)`` (at once in this process, with one job)."""
        job = Job(self if self.pool else None, next(self._numbers))
        if self.pool is None:
            job.run_here(function, argument)
            return job
        self._waiting.append((job, (function, argument)))
        self.tend()
        return job

    def tend(self, block: bool = False) -> None:
        """Take in the results sent so far (with ``block``, wait for one while a job runs)
        and hand the next waiting jobs to the processes that hold none."""
        if self.pool is None:
            return
        self._hand_out()
        self.pool.collect(block=block)
        self._hand_out()

    def _hand_out(self) -> None:
        assert self.pool is not None
        for worker in self.pool.workers:
            if not worker.held and self._waiting:
                job, payload = self._waiting.popleft()
                self.pool.send(worker, job.number, payload)
                job.started = time.monotonic()

    def __enter__(self) -> Jobs:
        return self

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        """Lets the processes go once every job is done, or kills them at once if the build failed."""
        self._stack.__exit__(kind, error, traceback)
