"""The input of a parallel run, read in a thread of its own.

With ``--workers``, the process that writes the output also hands out the chunks of the
input and searches some itself.  Were it to read the input itself, a pipe that stays open
(a slow producer, a person typing) would hold it in ``read`` while answers that the
workers have sent wait to be written.  So a thread reads the chunks ahead into a bounded
queue and says so through a pipe that the process waits on beside the workers' results
(:meth:`fastsubs.pipeline.workers.WorkerProcesses.collect`): answers are written as soon as they
are ready, whatever the input does.  A chunk is still only handed out once it is whole
(the input's chunks do not depend on timing: :mod:`fastsubs.pipeline.lines`).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from types import TracebackType

from fastsubs.pipeline.lines import Chunk

#: What :meth:`ReadingThread.next_ready` gives once the input has ended.
END = object()
#: How often a thread held by a full queue looks whether the run has stopped (seconds).
STOP_CHECK_SECONDS = 0.1


class ReadingThread:
    """Reads ``chunks`` in a thread, at most ``ahead`` chunks ahead of the caller; ``wake``
    is a file descriptor that becomes readable whenever a chunk (or the end) is ready."""

    def __init__(self, chunks: Iterator[Chunk], ahead: int) -> None:
        self._chunks = chunks
        self._queue: queue.Queue[object] = queue.Queue(maxsize=ahead)
        self._stopped = threading.Event()
        self.wake, self._signal = os.pipe()
        os.set_blocking(self.wake, False)
        self._thread = threading.Thread(target=self._read, name="fastsubs-reading", daemon=True)
        self._thread.start()

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
        while not self._stopped.is_set():
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
        stopped the reading (an error of the stream)."""
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
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        """The thread stops at its next chunk (a thread held in ``read`` by an open pipe is a
        daemon: it ends with the process)."""
        self._stopped.set()
        os.close(self.wake)
