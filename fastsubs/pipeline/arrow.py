"""Substitutes straight into Apache Arrow: a ``pyarrow.Table`` (or a pandas frame) of the
rows ``--format parquet`` writes, for sentences or ``-t`` records given in Python.

No file and no text lie in between: the C core searches the lines and packs their
positions as numbers (``Render.COLUMNS``, as for a Parquet part), and
:func:`fastsubs.pipeline.parquet.table` makes those numbers into Arrow columns without a
Python loop per position.  So the table has the dataset's columns, the same values bit
for bit (docs/output-formats.md, "Parquet datasets"), and a frame from it equals
``pd.read_parquet(dataset, dtype_backend="pyarrow")`` of the same lines.

Used through :meth:`fastsubs.SubstituteIndex.table` and ``.frame``, and
:mod:`fastsubs.dask`; needs pyarrow, and pandas for a frame: ``pip install '.[dataframe]'``,
which docs/api.md names.  A missing one is a one-line error naming the call the user
made (``index.table()``, ``fastsubs.dask.to_parquet()``), which each caller passes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from fastsubs.errors import ArgumentError, QueryInputError, missing_extra
from fastsubs.options import QueryOptions
from fastsubs.tokens import Token, as_bytes

if TYPE_CHECKING:
    from fastsubs.core import Core

#: Input lines searched per call into the core (a row group of a part file): what is held
#: as packed numbers at once beside the table being made.
LINES_PER_CALL = 128
#: How a run given no file name calls its input in an error (``<sentences>:3: ...``).
SOURCE = "<sentences>"
#: The extra that installs what tables and frames need (pyarrow, pandas), as docs/api.md names it.
EXTRA = "dataframe"


def options_of(options: QueryOptions | None, fields: dict[str, Any]) -> QueryOptions:
    """The options of a table: ``options``, or :class:`QueryOptions` made of ``fields``
    (``n=10, normalize=True``...), not both."""
    if options is not None and fields:
        raise ArgumentError(f"give options or {', '.join(fields)}, not both")
    return options if options is not None else QueryOptions(**fields)


def as_line(sentence: Sequence[Token] | str | bytes) -> bytes:
    """A sentence as the input line the core reads: a string or bytes as it is (split on
    whitespace by the core; a line's own newline at its end, as ``dask.bag.read_text``
    keeps it, may stay), tokens joined by spaces (a token holding whitespace would be read
    as several: an ArgumentError)."""
    if isinstance(sentence, (str, bytes)):
        line = as_bytes(sentence)
    else:
        tokens = [as_bytes(token) for token in sentence]
        if any(len(token.split()) != 1 for token in tokens):
            raise ArgumentError(f"a token must be one word without whitespace, got {sentence!r}")
        line = b" ".join(tokens)
    if b"\n" in line[:-1]:
        raise ArgumentError(f"a sentence must be one line, got {sentence!r}")
    return line


def _chunks(sentences: Iterable[Sequence[Token] | str | bytes]) -> Iterator[list[bytes]]:
    chunk: list[bytes] = []
    for sentence in sentences:
        chunk.append(as_line(sentence))
        if len(chunk) == LINES_PER_CALL:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def table(index: Core, sentences: Iterable[Sequence[Token] | str | bytes], options: QueryOptions,
          call: str) -> Any:
    """The rows of ``sentences`` (numbered from 1, as input lines) as a ``pyarrow.Table`` of
    the dataset's schema (:func:`fastsubs.pipeline.parquet.schema`), for ``call``, what the
    user called (named if pyarrow is missing).  With ``options.targets`` each item is a
    ``-t`` record (``name<TAB>id<TAB>index<TAB>text``); one that cannot be read is a
    :class:`fastsubs.QueryInputError` naming it, or is left out with ``skip_bad_records``."""
    from fastsubs.pipeline import parquet
    from fastsubs.pipeline.formats import render_lines

    parquet.require_pyarrow(call, EXTRA)
    chosen = dataclasses.replace(options, format="parquet")
    vocabulary = parquet.vocabulary_of(index)
    pieces = []
    first = 1
    for lines in _chunks(sentences):
        done = 0
        while done < len(lines):
            rendered = render_lines(index, lines[done:], first + done, chosen)
            pieces.append(parquet.table(rendered.data, vocabulary, chosen))
            done += rendered.done
            if rendered.problem is not None:
                if not chosen.skip_bad_records:
                    raise QueryInputError(SOURCE, first + done, rendered.problem)
                done += 1
        first += len(lines)
    if not pieces:
        return parquet.schema(chosen).empty_table()
    return parquet.pa.concat_tables(pieces).combine_chunks()


def frame(index: Core, sentences: Iterable[Sequence[Token] | str | bytes], options: QueryOptions,
          call: str) -> Any:
    """:func:`table` as a pandas DataFrame of Arrow-backed columns (``pd.ArrowDtype``, what
    ``pd.read_parquet(..., dtype_backend="pyarrow")`` gives), without copying the lists."""
    try:
        import pandas as pd
    except ImportError as error:
        raise missing_extra(f"{call} needs pandas", EXTRA, str(error)) from None
    return table(index, sentences, options, call).to_pandas(types_mapper=pd.ArrowDtype)
