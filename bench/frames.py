"""Substitutes into a pandas frame: ``index.frame()`` (the core's packed columns into Arrow)
against reading ``fastsubs-query --format jsonl``'s lines into the same frame.

Usage::

    python -m fastsubs.bench.frames --index kn4-64k.fsidx --text dev2000.txt -n 100 --repeats 3

Prints medians of ``--repeats`` rounds (the two ways interleaved) of: the search alone
(the core's packed columns, what every way pays), the frame from ``index.frame()``, JSON
lines written by the core, and those lines parsed into the frame; and the ratios with
and without the search.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import fastsubs
from fastsubs.core import Core, Render


def jsonl_frame(data: bytes) -> Any:
    """JSON lines into the frame ``index.frame()`` gives (without -t, -z, --sample): a column
    list per field, one Arrow table, Arrow-backed pandas columns."""
    import pandas as pd
    import pyarrow as pa

    from fastsubs.pipeline.parquet import schema

    columns: dict[str, list[Any]] = {name: [] for name in ("sentence", "position", "word", "word_bytes",
                                                           "substitutes", "lp")}
    for line in data.splitlines():
        row = json.loads(line)
        columns["sentence"].append(row["sentence"])
        columns["position"].append(row["position"])
        columns["word"].append(row["word"])
        columns["word_bytes"].append(fastsubs.field_bytes(row, "word") if "word_bytes" in row else None)
        columns["substitutes"].append([item["word"] for item in row["substitutes"]])
        columns["lp"].append([item["lp"] for item in row["substitutes"]])
    table = pa.Table.from_pydict(columns, schema=schema(fastsubs.QueryOptions()))
    return table.to_pandas(types_mapper=pd.ArrowDtype)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--text", type=Path, required=True)
    parser.add_argument("-n", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    lines = args.text.read_bytes().splitlines(keepends=True)
    options = fastsubs.QueryOptions(n=args.n)
    excluded = b""
    import pandas as pd
    import pyarrow as pa

    from fastsubs.pipeline import arrow, parquet

    seconds: dict[str, list[float]] = {"search": [], "columns to frame": [], "index.frame()": [],
                                       "jsonl written": [], "jsonl parsed": []}
    with Core(args.index) as index:
        arrow.frame(index, lines[:50], options, "index.frame()")  # the vocabulary's arrays, made once per open index
        for _ in range(args.repeats):
            start = time.perf_counter()
            packed = [index.render_chunk(lines[first:first + 128], first + 1, options.limits, excluded,
                                         Render.COLUMNS, targets=False, eos=True, normalize=False, draws=0,
                                         seed=0).data for first in range(0, len(lines), 128)]
            seconds["search"].append(time.perf_counter() - start)
            start = time.perf_counter()
            pieces = [parquet.table(data, parquet.vocabulary_of(index), options) for data in packed]
            built = pa.concat_tables(pieces).combine_chunks().to_pandas(types_mapper=pd.ArrowDtype)
            seconds["columns to frame"].append(time.perf_counter() - start)
            start = time.perf_counter()
            frame = arrow.frame(index, lines, options, "index.frame()")  # what index.frame() does
            seconds["index.frame()"].append(time.perf_counter() - start)
            start = time.perf_counter()
            data = b"".join(index.render_chunk(lines[first:first + 128], first + 1, options.limits, excluded,
                                               Render.JSON, targets=False, eos=True, normalize=False, draws=0,
                                               seed=0).data for first in range(0, len(lines), 128))
            seconds["jsonl written"].append(time.perf_counter() - start)
            start = time.perf_counter()
            parsed = jsonl_frame(data)
            seconds["jsonl parsed"].append(time.perf_counter() - start)
    assert frame.equals(parsed) and built.equals(parsed), "the frames differ"
    median = {name: statistics.median(values) for name, values in seconds.items()}
    print(f"{args.text}: {len(lines):,} lines, {len(frame):,} positions, -n {args.n}, {args.index}")
    for name, value in median.items():
        print(f"{name:>17}: {value:7.3f} s")
    print(f"after the search: the frame from the core's columns {median['columns to frame']:.3f} s, "
          f"from JSON lines {median['jsonl parsed']:.3f} s "
          f"({median['jsonl parsed'] / median['columns to frame']:.1f}x)")
    print(f"with the search: index.frame() {median['index.frame()']:.3f} s, JSON lines written and parsed "
          f"{median['jsonl written'] + median['jsonl parsed']:.3f} s "
          f"({(median['jsonl written'] + median['jsonl parsed']) / median['index.frame()']:.1f}x)")


if __name__ == "__main__":
    main()
