"""One writer per output: a run holds an exclusive lock on ``OUT.lock`` for as long as it
writes OUT (its partial output, its record, the publish).

Two runs on one OUT, a job scheduler's retry of a job still running or a command typed again
in a second terminal, would each cut ``OUT.partial`` back to its own record and write over
the other's bytes; the run that published last would end with exit 0 and a damaged OUT.  So
the second refuses at once, in one line naming OUT and the pid of the run that writes it.

The lock is ``flock`` on ``OUT.lock`` (which holds the holder's pid and host, for that
line): the system drops it when its holder ends, however it ends (``kill -9`` included),
so a lock never outlives its run and nothing needs cleaning.  A run that ends removes the
file; one killed leaves it, unlocked, and the next run takes it as it is.  Because the file
may be removed by its holder while another run opens it, a lock counts only once the path
still names the file locked (:func:`_locked_at`).
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from fastsubs.errors import OutputError

#: Appended to OUT for the file its writer locks.
LOCK_SUFFIX = ".lock"
#: How long a refused run waits for the holder to have written its pid into the lock file
#: (it does so right after taking the lock).
HOLDER_WAIT_SECONDS = 1.0


@contextmanager
def output_locked(target: str | os.PathLike[str], warn: Callable[[str], None]) -> Iterator[None]:
    """Hold the lock of the output ``target`` for the block; OutputError naming ``target``
    and the holder when another process holds it.  Where the file system has no ``flock``
    (some network and FUSE ones), the run goes on unlocked, after a note from ``warn``:
    refusing to run there would stop every run."""
    path = f"{os.fspath(target)}{LOCK_SUFFIX}"
    descriptor: int | None
    try:
        descriptor = _take(path, os.fspath(target))
    except _Unlockable as error:
        warn(f"fastsubs-query: note: {path}: cannot lock it ({error}); a second run on {os.fspath(target)} "
             "would not be refused")
        descriptor = None
    if descriptor is None:
        yield
        return
    try:
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()} {socket.gethostname()}\n".encode())
        yield
    finally:
        with suppress(OSError):
            os.unlink(path)  # while still locked: a run that opens it next makes a new one
        os.close(descriptor)


class _Unlockable(Exception):
    """The file system of the lock file has no ``flock`` (the message says why)."""


def _take(path: str, target: str) -> int:
    """The descriptor of the lock file at ``path``, locked exclusively."""
    while True:
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise OutputError(target, f"cannot make its lock file {path}: {error.strerror or error}") from None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(descriptor)
            os.close(descriptor)
            raise OutputError(target, f"another fastsubs-query{holder} is writing it: wait for that run to end, "
                                      "or stop it") from None
        except OSError as error:
            os.close(descriptor)
            raise _Unlockable(error.strerror or str(error)) from None
        if _locked_at(descriptor, path):
            return descriptor
        os.close(descriptor)  # its holder removed it as it ended: take the one there now


def _locked_at(descriptor: int, path: str) -> bool:
    """Whether ``path`` still names the file of ``descriptor``."""
    try:
        return os.path.samestat(os.fstat(descriptor), os.stat(path))
    except FileNotFoundError:
        return False


def _holder(descriptor: int) -> str:
    """``, pid N,`` (``, pid N on HOST,`` for another machine's), from the lock file; empty
    if the holder has not written it within HOLDER_WAIT_SECONDS."""
    deadline = time.monotonic() + HOLDER_WAIT_SECONDS
    while True:
        words = os.pread(descriptor, 4096, 0).decode(errors="replace").split()
        if len(words) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    if len(words) != 2:
        return ""
    pid, host = words
    return f", pid {pid}," if host == socket.gethostname() else f", pid {pid} on {host},"
