"""The processes of a run, whoever drives it (a command line, ``build_index``): the cores it
may use, stop signals held back while a step must not be cut in two, and forked workers
that leave stopping to their parent (:mod:`fastsubs.pipeline.workers`).

SIGINT and SIGTERM are what ask a run to stop; the command-line tools turn them into
exceptions in the main thread (:mod:`fastsubs.cli.support`), so every ``finally`` runs.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

#: The signals that ask a run to stop; a process stopped by one exits with 128 + its number.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Linux prctl option: the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system keeps one (a
    SLURM job, ``taskset``), else the machine's.  More working processes than that only
    take turns on the same cores, each with its own caches and pipes, at a cost that grows
    with their number (docs/performance.md, "Tuning")."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this system (macOS)
        return os.cpu_count() or 1


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back (pending, not lost) for the duration of the block.

    For the few steps a stop signal must not cut in two: forking workers (a child starts
    with them held, until :func:`become_worker` ignores them) and writing one chunk of
    output with its bookkeeping.  A signal that arrived meanwhile is raised as the block ends.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def become_worker(parent: int) -> None:
    """Make this forked process a worker that leaves stopping to its parent ``parent``.

    It ignores SIGINT and SIGTERM (Ctrl-C, or a batch system's SIGTERM, may reach the
    whole process group; the parent handles them and kills its workers, :mod:`fastsubs.pipeline.workers`),
    and the kernel kills it when the parent dies, even by SIGKILL, so no worker outlives a run.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: the parent still stops its workers whenever it gets the chance
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
