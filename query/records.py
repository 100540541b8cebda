"""Input records and their output text: what one input line becomes.

A plain record is a sentence; it yields one output line per token plus one for
``</s>``.  A target record (``-t``) is ``name<TAB>id<TAB>index<TAB>text``; it yields
the record itself, then the substitutes of token ``index`` (0-based; the token count
means ``</s>``).  Every record yields its output, in order, or raises naming its line.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastsubs.errors import QueryInputError
from fastsubs.query.engine import Engine
from fastsubs.query.output import format_substitutes
from fastsubs.query.search import Limits
from fastsubs.query.sentences import tokenize

EOS = b"</s>"


@dataclass(frozen=True)
class OutputOptions:
    """How records are read and written: the CLI's -n/-p, -z and -t."""

    limits: Limits
    normalize: bool = False
    target_records: bool = False
    skip_bad_records: bool = False


def parse_target_record(line: bytes, source: str, number: int) -> tuple[list[bytes], int]:
    """Tokens and target position of a ``-t`` record, or QueryInputError naming the line."""
    fields = line.rstrip(b"\r\n").split(b"\t", 3)
    if len(fields) != 4:
        raise QueryInputError(source, number, f"expected 'name<TAB>id<TAB>index<TAB>text', found {len(fields)} field(s)")
    tokens = tokenize(fields[3])
    try:
        position = int(fields[2])
    except ValueError:
        raise QueryInputError(source, number, f"expected a whole-number token index, found {fields[2]!r}") from None
    if not 0 <= position <= len(tokens):
        raise QueryInputError(source, number, f"token index {position} is outside 0 … {len(tokens)} for this text")
    return tokens, position


def render_record(engine: Engine, line: bytes, options: OutputOptions, source: str, number: int) -> bytes:
    """The complete output text of one input line (ends with a newline)."""
    vocabulary = engine.vocabulary
    if options.target_records:
        tokens, position = parse_target_record(line, source, number)
        ids, scores = engine.position(tokens, position, options.limits)
        record = line if line.endswith(b"\n") else line + b"\n"
        return record + format_substitutes(vocabulary, ids, scores, options.normalize) + b"\n"
    tokens = tokenize(line)
    ranked = engine.sentence(tokens, options.limits)
    parts = []
    for token, (ids, scores) in zip(tokens + [EOS], ranked):
        parts.append(token + b"\t" + format_substitutes(vocabulary, ids, scores, options.normalize) + b"\n")
    return b"".join(parts)
