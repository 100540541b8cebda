"""An estimate of a build's time left, for the progress lines a person watches.

A build reads the model's lines in its own process while its jobs (``--jobs`` processes)
sort and encode each order's slots, an order's as soon as it is read; it ends when the
last slot's job does. Once a slot's job has ended, the estimate knows how fast one job
encodes (words of n-grams a second, over the slots ended so far: an m-gram is m words)
and plays out what is left: the jobs running, then those waiting and those of the
orders still to read, in the order the build hands them out, each to the first process
free and not before its order is read (at the pace the reading has kept so far). Its
end, or the reading's if later, is the time left. So the last slots, which fewer jobs
than processes are left to run, count as the time they take: a billion-n-gram build's
estimate, which scaled the time so far by the work left, said 5 min when its last slot,
run alone, had 12 to go.

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

#: What writing one n-gram's record in one slot costs against reading one word of the
#: model, until a job has ended. kn4-64k (11M n-grams, 37M words) with 2 jobs read in
#: 12.6 s and wrote its 37M slot entries in the 9.2 s after (12.0 s with the machine
#: busy): 0.7-1.0; the upper end, as more work left is the better surprise.
WRITE_WEIGHT = 1.0

#: No estimate before this share of the work is done: the first lines read say little.
FIRST_SHARE = 0.01


@dataclass
class _Slot:
    """One slot's job: the words of the n-grams it encodes (an m-gram's rows are m words)."""

    words: int
    job: Job


class TimeLeft:
    """The build's work done so far, its slots' jobs, and the time they took."""

    def __init__(self, processes: int, clock: Callable[[], float] = time.monotonic) -> None:
        """``processes`` run the jobs (1: the building process runs each as it is submitted)."""
        self.processes = processes
        self.clock = clock
        self.started = clock()
        self.counts: list[int] = []  # n-grams by order, once the model's header is read
        self.total = 0.0  # work in words, unknown until the counts are
        self.done = 0.0
        self.words = 0  # words of the model's lines, once the counts are known
        self.words_read = 0  # words of the lines read
        self.slots: list[_Slot] = []  # in the order they were submitted
        self.orders_submitted = 1  # the highest order whose slots are submitted (1: none)

    def read(self, lines: int, order: int, counts: list[int]) -> None:
        """``lines`` more ``order``-grams read, of a model of ``counts`` n-grams by order."""
        self.counts = counts
        self.words = sum(order * count for order, count in enumerate(counts, start=1))
        self.total = self.words + WRITE_WEIGHT * sum(order * count for order, count in enumerate(counts[1:], start=2))
        self.done += order * lines
        self.words_read += order * lines

    def submitted(self, order: int, jobs: list[Job]) -> None:
        """The jobs of ``order``'s slots, just submitted."""
        self.slots.extend(_Slot(order * self.counts[order - 1], job) for job in jobs)
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
        ended = [(slot.words, slot.job.ended - slot.job.started) for slot in self.slots
                 if slot.job.ended is not None and slot.job.started is not None]
        if not ended:
            if not FIRST_SHARE * self.total <= self.done < self.total:
                return None
            return (now - self.started) * (self.total - self.done) / self.done
        busy = sum(seconds for _, seconds in ended)
        speed = sum(words for words, _ in ended) / max(busy, 1e-9)  # words a second, one job
        words_left = self.words - self.words_read
        in_jobs = busy if self.processes == 1 else 0.0  # (the building process ran them itself)
        reading_speed = self.words_read / max(now - self.started - in_jobs, 1e-9)
        left = self._jobs_left(now, speed, reading_speed)
        if left is None and words_left <= 0:
            return None
        return max(left or 0.0, words_left / reading_speed)

    def _jobs_left(self, now: float, speed: float, reading_speed: float) -> float | None:
        """When the last job ends, the jobs played out as the build hands them out (see the
        module's docstring), from ``now``; None when every job has ended and none is to come."""
        pending: list[tuple[int, float]] = []  # (words, the time its order is read)
        free: list[float] = []  # when each process is free of the jobs running
        for slot in self.slots:
            if slot.job.ended is not None:
                continue
            if slot.job.started is not None:
                free.append(max(now, slot.job.started + slot.words / speed))
            else:
                pending.append((slot.words, now))
        read_until = float(self.words_read)
        for order in range(self.orders_submitted + 1, len(self.counts) + 1):
            count = self.counts[order - 1]
            read_until += order * count
            read_at = now + (read_until - self.words_read) / reading_speed
            pending.extend((order * count, read_at) for _ in range(order))
        if not free and not pending:
            return None
        if self.processes == 1:  # the reading stops while a job runs: one after the other
            reading = max((read_at for _, read_at in pending), default=now) - now
            return reading + sum(words for words, _ in pending) / speed
        free += [now] * max(self.processes - len(free), 0)
        heapq.heapify(free)
        for words, read_at in pending:
            heapq.heappush(free, max(heapq.heappop(free), read_at) + words / speed)
        return max(free) - now


def spelled_duration(seconds: float) -> str:
    """A duration as a person reads it: "40 s", "12 min", "3.5 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
