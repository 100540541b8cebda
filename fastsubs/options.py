"""What a query run is asked for: the options of ``fastsubs-query``, as one value.

The CLI builds a :class:`QueryOptions` from its flags; pipelines build the same value in
Python (``fastsubs.QueryOptions``) and hand it to the Dask bag function, so a field
here means exactly what its flag means.  Invalid values raise
:class:`fastsubs.ArgumentError` when the options are made, not halfway through a corpus.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from functools import cached_property

from fastsubs.errors import ArgumentError
from fastsubs.limits import DEFAULT_COUNT, Limits
from fastsubs.tokens import word_list

#: The values of ``--format``.
FORMATS = ("text", "jsonl", "parquet")


@dataclass(frozen=True)
class QueryOptions:
    """The options of ``fastsubs-query``, by their long names.

    ``n``/``p`` are ``-n``/``-p`` (neither: ``n`` becomes 100, the count the search uses,
    so that what is recorded of a run, its ``OUT.json``, says it), ``normalize`` is ``-z``,
    ``targets`` is ``-t``; ``exclude`` lists words that are never substitutes (``--exclude``;
    ``str`` or ``bytes``, kept as ``str``, bytes that are not UTF-8 as ``surrogateescape``).

    >>> QueryOptions(n=100, no_eos=True, format="jsonl", exclude=["</s>", "<unk>"])   # doctest: +SKIP
    """

    n: int | None = None
    p: float | None = None
    normalize: bool = False
    targets: bool = False
    skip_bad_records: bool = False
    format: str = "text"
    no_eos: bool = False
    sample: int | None = None
    seed: int = 0
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.n is None and self.p is None:
            object.__setattr__(self, "n", DEFAULT_COUNT)
        self.limits  # noqa: B018  (checks n and p)
        if self.format not in FORMATS:
            raise ArgumentError(f"format must be one of {', '.join(FORMATS)}, got {self.format!r}")
        if self.sample is not None and not _whole(self.sample, 1):
            raise ArgumentError(f"sample must be a whole number of at least 1, got {self.sample!r}")
        if not _whole(self.seed, 0) or self.seed >= 2**64:
            raise ArgumentError(f"seed must be a whole number within 0 … 2**64 - 1, got {self.seed!r}")
        words = tuple(word.decode("utf-8", "surrogateescape") for word in word_list(self.exclude))
        object.__setattr__(self, "exclude", words)

    @cached_property
    def limits(self) -> Limits:
        """When to stop listing (``-n``/``-p``)."""
        return Limits.from_options(self.n, self.p)

    @cached_property
    def excluded_words(self) -> tuple[bytes, ...]:
        """``exclude`` as the bytes the index holds (once: every input line asks for it)."""
        return tuple(w.encode("utf-8", "surrogateescape") for w in self.exclude)


def missing_word_warning(word: bytes) -> str:
    """The warning for a word of ``exclude`` that the model's vocabulary lacks: it could
    never be a substitute, so excluding it does nothing (a typo, or another model's word)."""
    return f"excluded word {word.decode('utf-8', 'backslashreplace')!r} is not in the model's vocabulary"


def _whole(value: object, least: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Integral) and int(value) >= least
