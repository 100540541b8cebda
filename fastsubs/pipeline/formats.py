"""What input lines become, in each output format.

A plain line is a sentence; it yields output for every token plus the closing ``</s>``
(unless ``no_eos``).  A target record (``-t``: ``name<TAB>id<TAB>index<TAB>text``) yields
the record itself, then the substitutes of its token (0-based; the token count means
``</s>``).  The lines of a chunk are tokenized, read as records, searched and written by the
C core in one call (``kernel/chunk.h``, which also holds the rule of a record and the
message that says what is wrong with a bad one), so no format costs a Python call per
line or per substitute:

* ``text`` (the original tool's, ai-ku/fastsubs, byte for byte):
  ``word<TAB>sub1 lp1<TAB>sub2 lp2 …`` with ``%.8f`` scores, best first; with ``-z`` each
  score is replaced by p/Σp over the listed substitutes and the list stops at the first
  below 1e-8.
* ``jsonl``: one JSON object per position, for tools that would rather not parse tabs:
  ``sentence`` (the input line, from 1), with ``-t`` the record's ``name`` and ``id``,
  ``position`` (the token, from 0; the token count is ``</s>``), ``word``, and
  ``substitutes`` (``word``, ``lp``, ``p``), best first: what Python's ``json.dumps``
  writes, to the byte.  Valid UTF-8 JSON for any input bytes: text that is not UTF-8
  follows the rule of :mod:`fastsubs.jsonl`.
* ``sample``: the original's separate ``wordsub-n`` step built in: N independent draws
  per position, with replacement, in proportion to 10^lp over the listed substitutes,
  printed as ``word<TAB>sub`` lines (``name<TAB>id<TAB>word<TAB>sub`` with ``-t``), or
  with ``jsonl`` as one object per position whose ``samples`` lists the draws.  The
  random stream of a position depends only on the seed, the input line number and the
  position (numpy's ``default_rng([seed, line, position]).choice``, written out in
  ``kernel/sample.c``), so the output is the same for any number of workers.
* ``parquet``: the rows of JSON lines as a dataset of Parquet files, the numbers made in C
  and handed to Arrow (:mod:`fastsubs.pipeline.parquet`), in parts of their own size.
"""

from __future__ import annotations

from fastsubs.core import Core, Render, Rendered
from fastsubs.options import QueryOptions
from fastsubs.pipeline.lines import TEXT_BLOCKS, Blocks
from fastsubs.pipeline.long_lines import RecordWindow, Window


def _rendering(options: QueryOptions) -> Render:
    """How the positions of a line are written for these options."""
    if options.format == "parquet":
        return Render.COLUMNS
    if options.sample is not None:
        return Render.SAMPLE_JSON if options.format == "jsonl" else Render.SAMPLE_LINES
    if options.format == "jsonl":
        return Render.JSON
    return Render.FIELDS if options.targets else Render.LINE


def writes_records(options: QueryOptions) -> bool:
    """Whether the output shows each -t record's line before the substitutes of its target
    (the original's format)."""
    return _rendering(options) is Render.FIELDS


def render_lines(index: Core, lines: list[bytes], first_line: int, options: QueryOptions,
                 window: Window | RecordWindow | None = None) -> Rendered:
    """The output of consecutive input ``lines``, the first numbered ``first_line`` (from 1),
    up to a -t record that cannot be read (:class:`fastsubs.core.Rendered`); with
    ``window``, the one line is a window of a long line, or a long -t record's window of its
    text (:mod:`fastsubs.pipeline.long_lines`), whose line the caller writes."""
    return index.render_chunk(lines, first_line, options.limits, index.excluded(options.excluded_words),
                              _rendering(options), targets=options.targets, eos=not options.no_eos,
                              normalize=options.normalize, draws=options.sample or 0, seed=options.seed,
                              window=window)


def input_blocks(options: QueryOptions) -> Blocks:
    """How the input is cut into chunks for this format: a dataset's chunk is a part file."""
    if options.format == "parquet":
        from fastsubs.pipeline.parquet import PART_BLOCKS  # imports pyarrow: a parquet run's alone

        return PART_BLOCKS
    return TEXT_BLOCKS
