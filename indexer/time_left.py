"""An estimate of a build's time left, for the progress lines a person watches.

A build's work is reading the model's lines, then writing each n-gram of order m in m
slots (the records its jobs made while the next order was read). Both are counted in
words: reading an m-gram's line is m, writing it in one slot WRITE_WEIGHT. The estimate
is the time so far scaled by the work left against the work done, once the model's
counts (its ``\\data\\`` header) say what the whole is.
"""

from __future__ import annotations

import time

#: What writing one n-gram's record in one slot costs against reading one word of the
#: model. kn4-64k (11M n-grams, 37M words) with 2 jobs read in 12.6 s and wrote its 37M
#: slot entries in the 9.2 s after (12.0 s with the machine busy): 0.7-1.0; the upper
#: end, as more work left is the better surprise. Per word, reading costs about the same
#: whatever the order (0.30, 0.27 and 0.37 us for the 2-, 3- and 4-gram sections).
WRITE_WEIGHT = 1.0

#: No estimate before this share of the work is done: the first lines read say little.
FIRST_SHARE = 0.01


class TimeLeft:
    """The work done so far against the whole build's, and the time it took."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.total = 0.0  # unknown until the counts are
        self.done = 0.0

    def read(self, lines: int, order: int, counts: list[int]) -> None:
        """``lines`` more ``order``-grams read, of a model of ``counts`` n-grams by order."""
        self.total = sum(order * count * (1 + WRITE_WEIGHT * (order > 1))
                         for order, count in enumerate(counts, start=1))
        self.done += order * lines

    def wrote(self, ngrams: int) -> None:
        """One slot's records of ``ngrams`` n-grams written."""
        self.done += WRITE_WEIGHT * ngrams

    def said(self) -> str:
        """"; about 40 s left" for a progress line, or "" where there is no estimate yet (or none left)."""
        if not FIRST_SHARE * self.total <= self.done < self.total:
            return ""
        seconds = (time.monotonic() - self.started) * (self.total - self.done) / self.done
        return f"; about {spelled_duration(seconds)} left"


def spelled_duration(seconds: float) -> str:
    """A duration as a person reads it: "40 s", "12 min", "3.5 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
