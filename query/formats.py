"""What one input line becomes, in each output format.

A plain line is a sentence; it yields output for every token plus the closing ``</s>``
(unless ``no_eos``).  A target record (``-t``, :mod:`fastsubs.query.lines`) yields the
record itself, then the substitutes of its token (0-based; the token count means
``</s>``).  Every line yields its output, in order, or raises naming its line.

The C core writes the output of a line's positions (``kernel/render.h``), so no format
costs a Python call per substitute:

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
"""

from __future__ import annotations

from fastsubs.index import Render, SubstituteIndex
from fastsubs.query.lines import parse_target_record
from fastsubs.query.options import QueryOptions
from fastsubs.tokens import tokenize

EOS = b"</s>"


def _rendering(options: QueryOptions) -> Render:
    """How the positions of a line are written for these options."""
    if options.sample is not None:
        return Render.SAMPLE_JSON if options.format == "jsonl" else Render.SAMPLE_LINES
    if options.format == "jsonl":
        return Render.JSON
    return Render.FIELDS if options.targets else Render.LINE


def render_line(index: SubstituteIndex, line: bytes, options: QueryOptions, source: str, number: int) -> bytes:
    """The complete output of one input line (``number``, from 1)."""
    kind = _rendering(options)
    excluded = index.excluded(options.excluded_words)
    place = {"line": number, "normalize": options.normalize, "draws": options.sample or 0, "seed": options.seed}
    if options.targets:
        record = parse_target_record(line, source, number)
        target = record.position + 1
        word = record.tokens[record.position] if record.position < len(record.tokens) else EOS
        text = index.render(index.sentence_ids(record.tokens), target, target + 1, options.limits, excluded, kind,
                            [word], first_position=record.position, name=record.name, id=record.id, **place)
        if kind == Render.FIELDS:  # the record itself, then its substitutes
            return (line if line.endswith(b"\n") else line + b"\n") + text
        return text
    tokens = tokenize(line)
    shown = tokens if options.no_eos else [*tokens, EOS]
    return index.render(index.sentence_ids(tokens), 1, len(shown) + 1, options.limits, excluded, kind, shown,
                        **place)
