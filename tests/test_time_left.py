"""The build's estimate of its time left (fastsubs.indexer.time_left), on a clock the test
sets: jobs played out on the processes, the last ones alone, orders still to read, cores
crowded while the model is read and not after."""

from __future__ import annotations

import time

import pytest

from fastsubs.indexer.jobs import Job, Jobs
from fastsubs.indexer.time_left import TimeLeft, spelled_duration

#: 10 words, 100 2-grams and 100 3-grams: reading is 10 + 200 + 300 words, a 2-gram slot
#: 200 words, a 3-gram slot 300.
COUNTS = [10, 100, 100]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def job(started: float | None, ended: float | None, cpu: float | None = None) -> Job:
    made = Job(None, 0)
    made.started, made.ended, made.cpu = started, ended, cpu
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


def test_jobs_crowded_while_the_model_is_read_run_at_their_cpu_pace_after() -> None:
    """The 2-gram slots took 20 s for 10 s of CPU each while the model was read (its reading,
    or a generator feeding it, took half the cores' time: 20 words a CPU second); the
    reading ended at 25 s. The 3-gram slots begun then need 15 s of CPU each and get a core
    each: at 30 s, two end at 40 s and the third at 55 s, 25 s left (not the 55 s that the
    jobs' pace while the model was read gives)."""
    clock = Clock()
    estimate = TimeLeft(2, clock, cores=2)
    estimate.read(10, 1, COUNTS)
    estimate.read(100, 2, COUNTS)
    estimate.submitted(2, [job(0, 20, cpu=10), job(0, 20, cpu=10)])
    clock.now = 25.0
    estimate.read(100, 3, COUNTS)
    estimate.submitted(3, [job(25, None), job(25, None), job(None, None)])
    clock.now = 30.0
    assert estimate.seconds() == pytest.approx(25.0)


def test_a_job_begun_while_the_model_is_read_is_crowded_until_its_reading_ends() -> None:
    """Two 3-gram slots (15 s of CPU each, at the 2-gram slots' pace) began at 25 s, while
    the cores were crowded twice over (as the 2-gram slots found them); the reading ended
    at 30 s. Each got 2.5 s of CPU by then and needs 12.5 s more, uncrowded: they end at
    42.5 s, the third slot at 57.5 s, so at 32 s 25.5 s are left."""
    clock = Clock()
    estimate = TimeLeft(2, clock, cores=2)
    estimate.read(10, 1, COUNTS)
    estimate.read(100, 2, COUNTS)
    estimate.submitted(2, [job(0, 20, cpu=10), job(0, 20, cpu=10)])
    estimate.submitted(3, [job(25, None), job(25, None), job(None, None)])
    clock.now = 30.0
    estimate.read(100, 3, COUNTS)
    clock.now = 32.0
    assert estimate.seconds() == pytest.approx(25.5)


def test_the_crowding_jobs_found_after_the_reading_is_the_one_that_counts_after_it() -> None:
    """One core for two processes would crowd each job twice over, but the 2-gram slots,
    begun once the model was read, took 1.25 wall seconds a CPU second (20 s for 16): the
    3-gram slots then take 24 s of CPU and 30 s each, as in the first test."""
    clock = Clock()
    estimate = TimeLeft(2, clock, cores=1)
    read_all(estimate)
    estimate.submitted(2, [job(0, 20, cpu=16), job(0, 20, cpu=16)])
    estimate.submitted(3, [job(20, None), job(20, None), job(None, None)])
    clock.now = 30.0
    assert estimate.seconds() == pytest.approx(50.0)


def test_a_slot_goes_at_the_pace_its_order_kept() -> None:
    """The 2-gram slots took 10 s of CPU each (20 words a CPU second), a 3-gram slot 30 s
    (10 words a CPU second): the 3-gram slot begun at 40 s needs 30 s, not the 24 s that
    the pace of all the slots so far gives, so at 42 s 28 s are left."""
    clock = Clock()
    estimate = TimeLeft(2, clock, cores=2)
    read_all(estimate)
    estimate.submitted(2, [job(0, 10, cpu=10), job(0, 10, cpu=10)])
    estimate.submitted(3, [job(10, 40, cpu=30), job(10, None), job(40, None)])
    clock.now = 42.0
    assert estimate.seconds() == pytest.approx(28.0)


def test_a_job_brings_back_the_cpu_seconds_it_took() -> None:
    """In a job process (two jobs) and in the building process (one): a job that spins for
    0.2 s of CPU says it took about that, whatever else the machine runs."""
    for count in (1, 2):
        with Jobs(count) as jobs:
            done = jobs.submit(spin, 0.2)
            assert done.get() == "spun"
        assert done.cpu is not None and 0.15 <= done.cpu < 1.0


def spin(seconds: float) -> str:
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return "spun"


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
