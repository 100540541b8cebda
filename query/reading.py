"""The input of a parallel run, read in a thread of its own.

With ``--workers``, the process that writes the output also hands out the chunks of the
input and searches some itself.  Were it to read the input itself, a pipe that stays open
(a slow producer, a person typing) would hold it in ``read`` while answers that the
workers have sent wait to be written.  So a thread reads the chunks ahead into a bounded
queue and says so through a pipe that the process waits on beside the workers' results
(:meth:`fastsubs.pipeline.workers.WorkerProcesses.collect`): answers are written as soon as they
are ready, whatever the input does.  A chunk is still only handed out once it is whole
(the input's chunks do not depend on timing: :mod:`fastsubs.pipeline.lines`).

The thread is not a daemon, and the run waits for it as it ends: a daemon still reading
stdin as the interpreter shuts down holds the stream's lock there, and Python aborts
(``Fatal Python error: _enter_buffered_busy``, exit 134 instead of 143 or 130).  So the input
is read through :class:`InputFile`, which waits for data a moment at a time and gives up
once the run has stopped: the thread ends within STOP_CHECK_SECONDS, however long the pipe
stays open.  The run has stopped when it says so (:meth:`ReadingThread.__exit__`), and also
once the main thread has ended, however it ended: a stop signal can land where no ``with``
or ``finally`` will see it (as the thread starts, Python 3.10 waits for it in code a signal
interrupts), and the interpreter then waited at exit for a thread that waited for more input.

The thread starts with SIGINT and SIGTERM blocked, so they reach the main thread alone: there
:func:`fastsubs.pipeline.processes.signals_held` holds them back while a chunk's output is
written, which a signal delivered to another thread would have cut in two.
"""

from __future__ import annotations

import io
import os
import queue
import select
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from fastsubs.pipeline.lines import Chunk
from fastsubs.pipeline.processes import signals_held
from fastsubs.pipeline.textio import open_binary

#: What :meth:`ReadingThread.next_ready` gives once the input has ended.
END = object()
#: How often a thread waiting for input, or held by a full queue, looks whether the run
#: has stopped (seconds).
STOP_CHECK_SECONDS = 0.1
#: Bytes read from the input at once.
READ_BYTES = 1 << 16


class InputStopped(Exception):
    """The run stopped while its input was being read (the reading thread ends with it)."""


def run_over(stopped: threading.Event) -> bool:
    """Whether a thread that serves the main thread should end: ``stopped`` is set, or the
    main thread has ended (then nothing would set it: the interpreter, at exit, waits for
    the thread instead)."""
    return stopped.is_set() or not threading.main_thread().is_alive()


class InputFile(io.RawIOBase):
    """The input's file descriptor (``-i FILE``'s, or stdin's, whose Python stream is left
    alone), read so that whoever reads it can be stopped: a read waits for data with
    ``poll`` STOP_CHECK_SECONDS at a time, and raises InputStopped once :meth:`stop` was
    called or the main thread has ended (:func:`run_over`; in the main thread, a stop
    signal interrupts the wait as it would a read)."""

    def __init__(self, descriptor: int, owned: bool) -> None:
        super().__init__()
        self._descriptor = descriptor
        self._owned = owned  # opened here (-i FILE), so closed here
        self._stopped = threading.Event()
        self._waiting = select.poll()
        self._waiting.register(descriptor, select.POLLIN)

    def stop(self) -> None:
        self._stopped.set()

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not run_over(self._stopped):
            if self._waiting.poll(STOP_CHECK_SECONDS * 1000):
                data = os.read(self._descriptor, len(buffer))
                buffer[:len(data)] = data
                return len(data)
        raise InputStopped

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._descriptor

    def seekable(self) -> bool:
        return stat.S_ISREG(os.fstat(self._descriptor).st_mode)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """(A regular file's: the progress line reads where its input is.)"""
        return os.lseek(self._descriptor, offset, whence)

    def close(self) -> None:
        if not self.closed and self._owned:
            os.close(self._descriptor)
        super().close()


def open_input(path: Path | None) -> tuple[BinaryIO, InputFile]:
    """The run's input, ``path`` (decompressed by its extension) or stdin, and the
    :class:`InputFile` under it, which the caller closes (after the stream)."""
    if path is None:
        raw = InputFile(sys.stdin.fileno(), owned=False)
    else:
        raw = InputFile(os.open(path, os.O_RDONLY | os.O_CLOEXEC), owned=True)
    buffered = io.BufferedReader(raw, READ_BYTES)
    return (buffered if path is None else open_binary(path, buffered)), raw


class ReadingThread:
    """Reads ``chunks`` in a thread, at most ``ahead`` chunks ahead of the caller; ``wake``
    is a file descriptor that becomes readable whenever a chunk (or the end) is ready.
    ``stop_input`` stops the reading of the input under ``chunks`` as the run ends
    (:meth:`InputFile.stop`).  The thread starts as the ``with`` is entered."""

    def __init__(self, chunks: Iterator[Chunk], ahead: int, stop_input: Callable[[], None]) -> None:
        self._chunks = chunks
        self._queue: queue.Queue[object] = queue.Queue(maxsize=ahead)
        self._stopped = threading.Event()
        self._stop_input = stop_input
        self.wake, self._signal = os.pipe()
        os.set_blocking(self.wake, False)
        self._thread = threading.Thread(target=self._read, name="fastsubs-reading")

    def _read(self) -> None:
        try:
            try:
                for chunk in self._chunks:
                    if not self._put(chunk):
                        return
                self._put(END)
            except BaseException as error:  # noqa: BLE001  (handed to the caller, which raises it)
                self._put(error)
        finally:
            os.close(self._signal)  # the thread's own end: closed once it writes no more

    def _put(self, item: object) -> bool:
        """Queues ``item`` and wakes the caller; False once the run has stopped."""
        while not run_over(self._stopped):
            try:
                self._queue.put(item, timeout=STOP_CHECK_SECONDS)
            except queue.Full:
                continue
            try:
                os.write(self._signal, b"x")
            except OSError:
                return False  # the caller has closed its end
            return True
        return False

    def next_ready(self) -> object:
        """The next chunk if one has been read, None if not yet, or :data:`END`; raises what
        stopped the reading (an error of the stream).

        Taken from the queue with the stop signals held: the queue's lock is taken in Python
        code (``Condition.__enter__``), and a signal's exception raised there, after the lock
        and before the ``with`` that releases it, left the lock held for ever.  The reading
        thread then waited for it, and the stopped run for the thread (a run stopped under
        load hung once in ~150 stops; a storm of signals, every time)."""
        with signals_held():  # (around the queue's lock)
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return None
        if isinstance(item, BaseException):
            raise item
        return item

    def drain(self) -> None:
        """Empties the wake pipe (its bytes only say that something is ready)."""
        try:
            while os.read(self.wake, 4096):
                pass
        except BlockingIOError:
            pass

    def __enter__(self) -> ReadingThread:
        """Starts the thread, its stop signals blocked (it inherits the mask).  A signal
        raised as it starts (one held meanwhile, raised as the mask is restored) stops it
        before it reaches the caller, which then has no ``with`` to stop it."""
        try:
            with signals_held():
                self._thread.start()
        except BaseException:
            self._stop()
            raise
        return self

    def _stop(self) -> None:
        """Tells the thread to end, wherever it is (waiting for input, for room in the
        queue, or to wake the caller, whose end of the pipe closes)."""
        self._stopped.set()
        self._stop_input()
        os.close(self.wake)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        """Stops the thread and waits for it to end."""
        self._stop()
        self._thread.join()
