"""The processes a build runs its slot jobs in (``--jobs``), or none.

A build's jobs (:func:`fastsubs.indexer.slots.encode_slot`) run in worker processes
forked when the build starts, before it reads anything big, so that they sort and encode
the records of one order while the building process reads the next and appends what is
done.  With one job they run in the building process itself, when they are submitted.
Workers leave stopping to the build (they ignore Ctrl-C and die with it, as a query's
workers do), and a build that fails stops them at once.  Forking keeps start-up free
(nothing to import again, nothing to pickle but the jobs); a program that runs threads
of its own and asks ``build_index`` for several jobs takes fork's usual risk of a lock
held by another thread at that moment (Python 3.12+ warns of it), which is why the
API's default is one job, in the calling process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from typing import Any

from fastsubs.cli_support import become_worker, signals_held


class _Done:
    """A job run in the building process: its result, or what it raised."""

    def __init__(self, function: Callable[[Any], Any], argument: Any) -> None:
        try:
            self._result, self._error = function(argument), None
        except Exception as error:
            self._result, self._error = None, error

    def get(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._result


class Jobs:
    """Runs ``submit``-ted jobs in ``count`` forked processes (none when ``count`` is 1)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._pool = None
        if count > 1:
            context = multiprocessing.get_context("fork")
            with signals_held():  # a worker must not run the build's handlers before it drops them
                self._pool = context.Pool(count, initializer=become_worker, initargs=(os.getpid(),))

    def submit(self, function: Callable[[Any], Any], argument: Any) -> Any:
        """Start ``function(argument)``; the returned handle's ``get()`` gives its result or raises its error."""
        if self._pool is None:
            return _Done(function, argument)
        return self._pool.apply_async(function, (argument,))

    def __enter__(self) -> Jobs:
        return self

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        """Lets the workers go once every job is done, or stops them at once if the build failed."""
        if self._pool is None:
            return
        if error is None:
            self._pool.close()
        else:
            self._pool.terminate()
        self._pool.join()
