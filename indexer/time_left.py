"""An estimate of a build's time left, for the progress lines a person watches.

A build reads the model's lines in its own process while its jobs (``--jobs`` processes)
sort and encode each order's slots, an order's as soon as it is read; it ends when the
last slot's job does. Once a slot's job has ended, the estimate knows how much CPU one
job needs (words of n-grams a CPU second, an m-gram being m words: over the ended slots
of its order, or of every order while none of its own has ended) and plays out what is
left: the jobs running, then those waiting and those of the
orders still to read, in the order the build hands them out, each to the first process
free and not before its order is read (at the pace the reading has kept so far). Its
end, or the reading's if later, is the time left. So the last slots, which fewer jobs
than processes are left to run, count as the time they take: a billion-n-gram build's
estimate, which scaled the time so far by the work left, said 5 min when its last slot,
run alone, had 12 to go.

A job's CPU seconds become wall seconds by how crowded the cores are (wall over CPU time):
while the model is read, as the jobs ended so far found them (they share the cores with
the reading, and with whatever feeds it: a generator writing into a FIFO); once it is
read, as the jobs begun since found them, or not crowded before one has ended when there
are no more processes than cores. A billion-n-gram build fed by a generator, whose
estimate took the jobs' pace while reading for the whole build, said about twice the
time it had left once the reading was done.

Before any job has ended, the work is counted in words: reading an m-gram's line is m,
writing it in one slot WRITE_WEIGHT, and the estimate is the time so far scaled by the
work left against the work done, once the model's counts (its ``\\data\\`` header) say
what the whole is.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass

from fastsubs.indexer.jobs import Job
from fastsubs.pipeline.processes import usable_cores

#: What writing one n-gram's record in one slot costs against reading one word of the
#: model, until a job has ended. kn4-64k (11M n-grams, 37M words) with 2 jobs read in
#: 12.6 s and wrote its 37M slot entries in the 9.2 s after (12.0 s with the machine
#: busy): 0.7-1.0; the upper end, as more work left is the better surprise.
WRITE_WEIGHT = 1.0

#: No estimate before this share of the work is done: the first lines read say little.
FIRST_SHARE = 0.01


@dataclass
class _Slot:
    """One slot's job: the order and the words of the n-grams it encodes (an m-gram's rows
    are m words)."""

    order: int
    words: int
    job: Job


class TimeLeft:
    """The build's work done so far, its slots' jobs, and the time they took."""

    def __init__(self, processes: int, clock: Callable[[], float] = time.monotonic, cores: int | None = None) -> None:
        """``processes`` run the jobs (1: the building process runs each as it is submitted)
        on ``cores`` (default: those this process may run on)."""
        self.processes = processes
        self.cores = cores or usable_cores()
        self.clock = clock
        self.started = clock()
        self.counts: list[int] = []  # n-grams by order, once the model's header is read
        self.total = 0.0  # work in words, unknown until the counts are
        self.done = 0.0
        self.words = 0  # words of the model's lines, once the counts are known
        self.words_read = 0  # words of the lines read
        self.slots: list[_Slot] = []  # in the order they were submitted
        self.orders_submitted = 1  # the highest order whose slots are submitted (1: none)
        self.read_ended: float | None = None  # when the model's last line was read

    def read(self, lines: int, order: int, counts: list[int]) -> None:
        """``lines`` more ``order``-grams read, of a model of ``counts`` n-grams by order."""
        self.counts = counts
        self.words = sum(order * count for order, count in enumerate(counts, start=1))
        self.total = self.words + WRITE_WEIGHT * sum(order * count for order, count in enumerate(counts[1:], start=2))
        self.done += order * lines
        self.words_read += order * lines
        if self.read_ended is None and self.words_read >= self.words:
            self.read_ended = self.clock()

    def submitted(self, order: int, jobs: list[Job]) -> None:
        """The jobs of ``order``'s slots, just submitted."""
        self.slots.extend(_Slot(order, order * self.counts[order - 1], job) for job in jobs)
        self.orders_submitted = order

    def wrote(self, ngrams: int) -> None:
        """One slot's records of ``ngrams`` n-grams written."""
        self.done += WRITE_WEIGHT * ngrams

    def said(self) -> str:
        """"; about 40 s left" for a progress line, or "" where there is no estimate yet (or none left)."""
        seconds = self.seconds()
        return "" if seconds is None else f"; about {spelled_duration(seconds)} left"

    def seconds(self) -> float | None:
        """The time left, or None where there is no estimate yet (or none left)."""
        now = self.clock()
        ended = [slot for slot in self.slots if slot.job.ended is not None and slot.job.started is not None]
        if not ended:
            if not FIRST_SHARE * self.total <= self.done < self.total:
                return None
            return (now - self.started) * (self.total - self.done) / self.done
        busy = sum(_wall(slot) for slot in ended)
        words_left = self.words - self.words_read
        in_jobs = busy if self.processes == 1 else 0.0  # (the building process ran them itself)
        reading_speed = self.words_read / max(now - self.started - in_jobs, 1e-9)
        left = self._jobs_left(now, reading_speed, ended)
        if left is None and words_left <= 0:
            return None
        return max(left or 0.0, words_left / reading_speed)

    def _crowding(self, ended: list[_Slot]) -> tuple[float, float]:
        """Wall seconds per CPU second of a job while the model is read, and after."""
        if self.processes == 1:  # jobs and reading take turns: only other programs crowd them
            crowding = _per_cpu_second(ended, _wall) or 1.0
            return crowding, crowding
        read = self.read_ended
        while_reading = _per_cpu_second([slot for slot in ended if read is None or _ended(slot.job) <= read],
                                        _wall) or 1.0
        after = _per_cpu_second([slot for slot in ended if read is not None and _started(slot.job) >= read], _wall)
        return while_reading, after or max(1.0, self.processes / self.cores)

    def _jobs_left(self, now: float, reading_speed: float, ended: list[_Slot]) -> float | None:
        """When the last job ends, the jobs played out as the build hands them out (see the
        module's docstring), from ``now``; None when every job has ended and none is to come."""
        pending: list[tuple[int, int, float]] = []  # (order, words, the time its order is read)
        running: list[tuple[float, int, int]] = []  # (started, order, words)
        for slot in self.slots:
            if slot.job.ended is not None:
                continue
            if slot.job.started is not None:
                running.append((slot.job.started, slot.order, slot.words))
            else:
                pending.append((slot.order, slot.words, now))
        read_until = float(self.words_read)
        for order in range(self.orders_submitted + 1, len(self.counts) + 1):
            count = self.counts[order - 1]
            read_until += order * count
            read_at = now + (read_until - self.words_read) / reading_speed
            pending.extend((order, order * count, read_at) for _ in range(order))
        if not running and not pending:
            return None
        while_reading, after = self._crowding(ended)
        # each order's pace in its ended slots (a 4-gram slot took 1.7 times the CPU per word of
        # a 3-gram slot, building the generated 40M-n-gram model), else that of all so far
        paces = {order: _per_cpu_second([slot for slot in ended if slot.order == order], _words)
                 for order in range(2, len(self.counts) + 1)}
        pace = _per_cpu_second(ended, _words)

        def cpu(order: int, words: int) -> float:
            return words / (paces[order] or pace or 1.0)

        if self.processes == 1:  # the reading stops while a job runs: one after the other
            reading = max((read_at for _, _, read_at in pending), default=now) - now
            return reading + sum(cpu(order, words) for order, words, _ in pending) * after
        reading_ends = self.read_ended if self.read_ended is not None else now + (
            (self.words - self.words_read) / reading_speed)

        def end(start: float, order: int, words: int) -> float:
            """When a job of ``words`` of ``order`` that starts at ``start`` ends: crowded as
            the reading crowds it until the reading ends, as jobs alone are after."""
            needs = cpu(order, words)
            if start < reading_ends:
                before = (reading_ends - start) / while_reading  # CPU seconds it gets before
                if needs <= before:
                    return start + needs * while_reading
                return reading_ends + (needs - before) * after
            return start + needs * after

        free = [max(now, end(started, order, words)) for started, order, words in running]
        free += [now] * max(self.processes - len(free), 0)
        heapq.heapify(free)
        for order, words, read_at in pending:
            heapq.heappush(free, end(max(heapq.heappop(free), read_at), order, words))
        return max(free) - now


def _started(job: Job) -> float:
    assert job.started is not None
    return job.started


def _ended(job: Job) -> float:
    assert job.ended is not None
    return job.ended


def _wall(slot: _Slot) -> float:
    return _ended(slot.job) - _started(slot.job)


def _words(slot: _Slot) -> float:
    return slot.words


def _cpu(slot: _Slot) -> float:
    """The job's CPU seconds (its wall time where they are not known)."""
    return slot.job.cpu if slot.job.cpu is not None else _wall(slot)


def _per_cpu_second(slots: list[_Slot], amount: Callable[[_Slot], float]) -> float | None:
    """``amount`` of the jobs of ``slots`` (their words: the pace; their wall seconds: the
    crowding) per CPU second they took, None for none."""
    cpu = sum(_cpu(slot) for slot in slots)
    return sum(amount(slot) for slot in slots) / cpu if slots and cpu > 0 else None


def spelled_duration(seconds: float) -> str:
    """A duration as a person reads it: "40 s", "12 min", "3.5 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
