"""fastsubs on Dask, for corpora that outgrow one machine (``pip install '.[dask]'`` in the clone).

::

    import dask.bag as db
    import fastsubs
    from fastsubs.dask import substitutes_bag, to_parquet, to_textfiles

    lines = db.read_text("corpus/*.txt", encoding="utf-8", errors="surrogateescape")
    subs = substitutes_bag(lines, "/shared/model.fsidx", fastsubs.QueryOptions(n=100))
    to_textfiles(subs, "subs/*.txt")     # each file as fastsubs-query writes it for that input file
    to_parquet(lines, "subs.parquet", "/shared/model.fsidx", fastsubs.QueryOptions(n=100))  # a dataset

Dask supplies the scheduler, the workers and the bags of text partitions; fastsubs only
supplies the per-partition work.  Place the index where every worker can read it (a copy
on each node, or a shared read-only filesystem); each worker process opens it once and
keeps it open for all the tasks it runs.

* :func:`substitutes_bag` maps a ``dask.bag`` of input lines to a bag of the output
  lines ``fastsubs-query`` prints for them, partition by partition, order kept;
* :func:`to_textfiles` writes such a bag, one file per partition, each byte-identical
  to ``fastsubs-query``'s output for that partition's lines;
* :func:`substitutes_frame` makes a bag (or a Dask Series) of input lines into a Dask
  DataFrame of the rows ``--format parquet`` writes for them, a partition per partition,
  built as :meth:`fastsubs.SubstituteIndex.frame` builds them (no text in between);
  :func:`to_parquet` writes it as a dataset through Dask's own writer, one part per
  partition, in the schema of ``fastsubs-query``'s datasets.

``fastsubs-query --dask`` runs whole files the same way from the command line
(:mod:`fastsubs.query.cluster`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from typing import Any

from fastsubs.core import Core, process_index
from fastsubs.errors import ArgumentError, missing_extra
from fastsubs.options import QueryOptions, missing_word_warning
from fastsubs.pipeline import arrow
from fastsubs.pipeline.chunks import process_chunk
from fastsubs.pipeline.lines import Chunk

__all__ = ["substitutes_bag", "substitutes_frame", "to_parquet", "to_textfiles"]

def _render_partition(lines: Iterable[str], index_path: str, options: QueryOptions) -> list[str]:
    """The output lines (no newline) of a partition's input lines, numbered from 1."""
    encoded: Chunk = [(number, line.encode("utf-8", "surrogateescape")) for number, line in enumerate(lines, start=1)]
    result = process_chunk(process_index(index_path), encoded, options, "<bag>")
    for warning in result.warnings:
        warnings.warn(warning, stacklevel=1)
    if result.error is not None:
        raise result.error
    return result.data.decode("utf-8", "surrogateescape").split("\n")[:-1]


def substitutes_bag(bag: Any, index_path: str | os.PathLike[str], options: QueryOptions) -> Any:
    """A bag of the lines ``fastsubs-query`` prints for the input lines of ``bag`` (str, one
    sentence or ``-t`` record each, as ``dask.bag.read_text`` gives them), without their
    newlines: each a line of text, or with ``format="jsonl"`` a JSON object.

    Input lines are numbered (``sentence`` of ``jsonl``, the ``--sample`` streams) within
    each partition, which is one input file with ``read_text``'s default ``blocksize``:
    then :func:`to_textfiles` writes each file's output as the CLI writes it.  A word of
    ``options.exclude`` that the vocabulary lacks is a warning here when the index can
    be opened from this process too (as on a shared filesystem).

    >>> lines = dask.bag.read_text("corpus/*.txt", encoding="utf-8", errors="surrogateescape")  # doctest: +SKIP
    >>> to_textfiles(substitutes_bag(lines, "/shared/model.fsidx", QueryOptions(n=10)), "out/*.txt")  # doctest: +SKIP
    """
    if options.format == "parquet":
        raise ArgumentError("a bag holds lines of text or JSON; for the rows of a Parquet dataset use "
                            "fastsubs.dask.substitutes_frame or to_parquet")
    path = os.path.abspath(index_path)  # workers resolve it, maybe from another directory
    if options.exclude and os.path.isdir(path):
        with Core(path) as index:
            for word in index.unknown(options.excluded_words):
                warnings.warn(missing_word_warning(word), stacklevel=2)
    return bag.map_partitions(_render_partition, path, options)


def _file_text(lines: Iterable[str]) -> list[bytes]:
    """A partition's output lines as the one block of bytes its file holds."""
    return ["".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")]


def to_textfiles(bag: Any, path: str, **kwargs: Any) -> Any:
    """Write the bag of :func:`substitutes_bag` to files, one per partition, as the CLI
    writes its output: every line ends with a newline, no blank lines, bytes that are not
    UTF-8 as they were read (``surrogateescape``).  ``path`` and ``kwargs`` as for
    ``dask.bag.Bag.to_textfiles`` (``"out/*.txt"``, ``name_function``, ``compute``...)."""
    return bag.map_partitions(_file_text).to_textfiles(path, encoding=None, **kwargs)


def _frame_partition(lines: Iterable[str], index_path: str, options: QueryOptions, call: str) -> Any:
    """The rows of a partition's input lines (numbered from 1), as a pandas frame, for ``call``."""
    return arrow.frame(process_index(index_path), lines, options, call)


def _meta(options: QueryOptions) -> Any:
    """An empty frame of the rows' columns and types: what Dask needs to know of every partition."""
    import pandas as pd

    from fastsubs.pipeline.parquet import schema

    return schema(options).empty_table().to_pandas(types_mapper=pd.ArrowDtype)


def substitutes_frame(lines: Any, index_path: str | os.PathLike[str], options: QueryOptions) -> Any:
    """A Dask DataFrame of the rows ``fastsubs-query --format parquet`` writes (the
    columns of docs/output-formats.md, Arrow-backed), for ``lines``: a bag of input lines
    (as ``dask.bag.read_text`` gives them) or a Dask Series of them (a DataFrame of one
    column is taken as that column).  One partition per partition of ``lines``, whose
    lines are numbered from 1 (``sentence``), as for :func:`substitutes_bag`; ``options``'
    ``format`` is not looked at."""
    return _frame(lines, index_path, options, "fastsubs.dask.substitutes_frame()")


def _frame(lines: Any, index_path: str | os.PathLike[str], options: QueryOptions, call: str) -> Any:
    """:func:`substitutes_frame`, for ``call``: what the user called, which a missing extra's
    message names (:func:`to_parquet` makes its frame here too)."""
    try:
        import dask.dataframe as dd
        from dask import delayed
    except ImportError as error:
        raise missing_extra(f"{call} needs dask.dataframe and pandas", arrow.EXTRA, str(error)) from None
    from fastsubs.pipeline.parquet import require_pyarrow

    require_pyarrow(call, arrow.EXTRA)
    if isinstance(lines, dd.DataFrame):
        if len(lines.columns) != 1:
            raise ArgumentError(f"a DataFrame of input lines must have one column, not {list(lines.columns)}")
        lines = lines[lines.columns[0]]
    if not hasattr(lines, "to_delayed"):
        raise ArgumentError(f"lines must be a dask bag or Series of input lines, not {type(lines).__name__}")
    path = os.path.abspath(index_path)
    render = delayed(_frame_partition, pure=True)
    return dd.from_delayed([render(part, path, options, call) for part in lines.to_delayed()], meta=_meta(options),
                           verify_meta=False)


def to_parquet(lines: Any, path: str | os.PathLike[str], index_path: str | os.PathLike[str],
               options: QueryOptions, **kwargs: Any) -> Any:
    """Write the rows of :func:`substitutes_frame` as a Parquet dataset at ``path`` through
    Dask's writer (``dask.dataframe.to_parquet``): one part per partition of ``lines``
    (``part.0.parquet``, ...), in the schema of ``fastsubs-query``'s datasets, compressed
    with zstd.  ``kwargs`` go to Dask's writer (``compute=False``, ``storage_options``...)."""
    from fastsubs.pipeline.parquet import schema

    frame = _frame(lines, index_path, options, "fastsubs.dask.to_parquet()")
    settings = {"compression": "zstd", "write_index": False, "schema": schema(options), **kwargs}
    return frame.to_parquet(os.fspath(path), **settings)
