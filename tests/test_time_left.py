"""The build's estimate of its time left (fastsubs.indexer.time_left), on a clock the test
sets: jobs played out on the processes, the last ones alone, orders still to read."""

from __future__ import annotations

import pytest

from fastsubs.indexer.jobs import Job
from fastsubs.indexer.time_left import TimeLeft, spelled_duration

#: 10 words, 100 2-grams and 100 3-grams: reading is 10 + 200 + 300 words, a 2-gram slot
#: 200 words, a 3-gram slot 300.
COUNTS = [10, 100, 100]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def job(started: float | None, ended: float | None) -> Job:
    made = Job(None, 0)
    made.started, made.ended = started, ended
    return made


def read_all(estimate: TimeLeft) -> None:
    for order, count in enumerate(COUNTS, start=1):
        estimate.read(count, order, COUNTS)


def test_the_last_slot_that_runs_alone_counts_whole() -> None:
    """Two processes, three 3-gram slots of 30 s each (a job encodes 10 words a second, as
    the two 2-gram slots took): two run from 20 s, the third waits for one of them, so at
    30 s the build has 50 s left, not the 35 that the work left shared by two would be."""
    clock = Clock()
    estimate = TimeLeft(2, clock)
    read_all(estimate)
    estimate.submitted(2, [job(0, 20), job(0, 20)])
    estimate.submitted(3, [job(20, None), job(20, None), job(None, None)])
    clock.now = 30.0
    assert estimate.seconds() == pytest.approx(50.0)
    assert estimate.said() == "; about 50 s left"


def test_an_order_still_to_read_starts_when_it_is_read() -> None:
    """The 2-grams' slots ended in 20 s each (10 words a second) while the 3-grams were read
    at 10.5 words a second (the 10 + 200 words before them took 20 s): at 20 s, reading the
    3-grams' 300 words takes another 28.6 s, then two of their slots run on the two
    processes and the third after them: 28.6 + 30 + 30 s."""
    clock = Clock()
    estimate = TimeLeft(2, clock)
    estimate.read(10, 1, COUNTS)
    estimate.read(100, 2, COUNTS)
    estimate.submitted(2, [job(0, 20), job(0, 20)])
    clock.now = 20.0
    reading = 300 / (210 / 20)
    assert estimate.seconds() == pytest.approx(reading + 60.0)


def test_one_process_runs_the_reading_and_the_jobs_one_after_the_other() -> None:
    """With one process the jobs ran in it: the reading's pace leaves their time out, and
    what is left is the reading left, then each slot in turn."""
    clock = Clock()
    estimate = TimeLeft(1, clock)
    estimate.read(10, 1, COUNTS)
    estimate.read(100, 2, COUNTS)
    estimate.submitted(2, [job(5, 25), job(25, 45)])  # 200 words in 20 s each
    clock.now = 50.0  # 40 s of the 50 were the jobs': 210 words read in 10 s
    reading = 300 / (210 / 10)
    assert estimate.seconds() == pytest.approx(reading + 3 * 30.0)


def test_before_any_job_has_ended_the_work_done_scales_the_time_so_far() -> None:
    clock = Clock()
    estimate = TimeLeft(2, clock)
    estimate.read(10, 1, COUNTS)
    estimate.read(100, 2, COUNTS)  # 210 of 510 words read; 2 x 100 + 3 x 100 slot entries to write
    estimate.submitted(2, [job(10, None), job(10, None)])
    clock.now = 21.0
    assert estimate.seconds() == pytest.approx(21.0 * (1010 - 210) / 210)


def test_nothing_is_said_before_the_first_share_nor_once_all_is_done() -> None:
    clock = Clock()
    estimate = TimeLeft(2, clock)
    clock.now = 1.0
    assert estimate.said() == ""  # no counts yet
    read_all(estimate)
    estimate.submitted(2, [job(0, 20), job(0, 20)])
    estimate.submitted(3, [job(20, 50), job(20, 50), job(50, 80)])
    clock.now = 80.0
    assert estimate.seconds() is None
    assert estimate.said() == ""


@pytest.mark.parametrize(("seconds", "said"), [(40, "40 s"), (12 * 60, "12 min"), (3.5 * 3600, "3.5 h")])
def test_durations_are_spelled_as_a_person_reads_them(seconds: float, said: str) -> None:
    assert spelled_duration(seconds) == said
