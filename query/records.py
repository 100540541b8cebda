"""Input records and their output: what one input line becomes.

A plain record is a sentence; it yields output for every token plus the closing
``</s>`` (unless ``no_eos``).  A target record (``-t``) is
``name<TAB>id<TAB>index<TAB>text``; it yields the record itself, then the substitutes of
token ``index`` (0-based; the token count means ``</s>``).  Every record yields its
output, in order, or raises naming its line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fastsubs.errors import QueryInputError
from fastsubs.query.engine import Engine
from fastsubs.query.formats import jsonl_record, sample_lines
from fastsubs.query.output import format_substitutes
from fastsubs.query.search import Limits
from fastsubs.query.sentences import tokenize

EOS = b"</s>"
FORMATS = ("text", "jsonl")


@dataclass(frozen=True)
class OutputOptions:
    """How records are read and written: the CLI's -n/-p, -z, -t, --format, --no-eos, --sample."""

    limits: Limits
    normalize: bool = False
    target_records: bool = False
    skip_bad_records: bool = False
    format: str = "text"
    no_eos: bool = False
    sample: int | None = None
    seed: int = 0


def parse_target_record(line: bytes, source: str, number: int) -> tuple[list[bytes], int]:
    """Tokens and target position of a ``-t`` record, or QueryInputError naming the line."""
    fields = line.rstrip(b"\r\n").split(b"\t", 3)
    if len(fields) != 4:
        raise QueryInputError(source, number,
                              f"expected 'name<TAB>id<TAB>index<TAB>text', found {len(fields)} field(s)")
    tokens = tokenize(fields[3])
    try:
        position = int(fields[2])
    except ValueError:
        raise QueryInputError(source, number, f"expected a whole-number token index, found {fields[2]!r}") from None
    if not 0 <= position <= len(tokens):
        raise QueryInputError(source, number, f"token index {position} is outside 0 … {len(tokens)} for this text")
    return tokens, position


def _position_output(engine: Engine, options: OutputOptions, number: int, position: int, word: bytes,
                     ids: np.ndarray, scores: np.ndarray, with_word: bool) -> bytes:
    """The output of one position in the chosen format."""
    if options.sample is not None:
        return sample_lines(engine.vocabulary, number, position, word, ids, scores, options.sample, options.seed)
    if options.format == "jsonl":
        return jsonl_record(engine.vocabulary, number, position, word, ids, scores)
    fields = format_substitutes(engine.vocabulary, ids, scores, options.normalize)
    return (word + b"\t" + fields if with_word else fields) + b"\n"


def render_record(engine: Engine, line: bytes, options: OutputOptions, source: str, number: int) -> bytes:
    """The complete output of one input line."""
    if options.target_records:
        tokens, position = parse_target_record(line, source, number)
        ids, scores = engine.position(tokens, position, options.limits)
        word = tokens[position] if position < len(tokens) else EOS
        body = _position_output(engine, options, number, position, word, ids, scores, with_word=False)
        if options.format == "text" and options.sample is None:
            body = (line if line.endswith(b"\n") else line + b"\n") + body
        return body
    tokens = tokenize(line)
    ranked = engine.sentence(tokens, options.limits, eos=not options.no_eos)
    words = tokens + [EOS]
    return b"".join(_position_output(engine, options, number, position, words[position], ids, scores, True)
                    for position, (ids, scores) in enumerate(ranked))
