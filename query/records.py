"""Input records and their output: what one input line becomes.

A plain record is a sentence; it yields output for every token plus the closing
``</s>`` (unless ``no_eos``).  A target record (``-t``) is
``name<TAB>id<TAB>index<TAB>text``; it yields the record itself, then the substitutes of
token ``index`` (0-based; the token count means ``</s>``).  Every record yields its
output, in order, or raises naming its line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastsubs.errors import QueryInputError
from fastsubs.query.engine import Engine, Fields
from fastsubs.query.options import QueryOptions
from fastsubs.query.output import Place, jsonl_record, sample_jsonl, sample_lines
from fastsubs.query.sentences import tokenize

EOS = b"</s>"


@dataclass(frozen=True)
class TargetRecord:
    """A ``-t`` record: its name and id (as written), its tokens and the target position."""

    name: bytes
    id: bytes
    tokens: list[bytes]
    position: int


def parse_target_record(line: bytes, source: str, number: int) -> TargetRecord:
    """The fields of a ``-t`` record, or QueryInputError naming the line."""
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
    return TargetRecord(fields[0], fields[1], tokens, position)


def _text_fields(options: QueryOptions) -> Fields | None:
    """What the kernel writes for these options: the fields of the plain text format, or
    None for the formats made here from arrays (JSON lines, samples)."""
    if options.format != "text" or options.sample is not None:
        return None
    return Fields.PROBABILITIES if options.normalize else Fields.SCORES


def _position_output(engine: Engine, options: QueryOptions, place: Place, answer: Any) -> bytes:
    """The output of one position in a format made from its arrays."""
    ids, scores = answer
    if options.sample is not None:
        write_samples = sample_jsonl if options.format == "jsonl" else sample_lines
        return write_samples(engine, place, ids, scores, options.sample, options.seed)
    return jsonl_record(engine, place, ids, scores)


def render_record(engine: Engine, line: bytes, options: QueryOptions, source: str, number: int) -> bytes:
    """The complete output of one input line."""
    excluded = engine.excluded(options.excluded_words)
    fields = _text_fields(options)
    if options.targets:
        record = parse_target_record(line, source, number)
        answer = engine.position(record.tokens, record.position, options.limits, excluded, fields=fields)
        if fields is not None:  # the record itself, then its substitutes
            return (line if line.endswith(b"\n") else line + b"\n") + answer + b"\n"
        word = record.tokens[record.position] if record.position < len(record.tokens) else EOS
        return _position_output(engine, options, Place(number, record.position, word, record.name, record.id), answer)
    tokens = tokenize(line)
    answers = engine.sentence(tokens, options.limits, eos=not options.no_eos, excluded=excluded, fields=fields)
    words = tokens + [EOS]
    if fields is not None:
        return b"".join(word + b"\t" + text + b"\n" for word, text in zip(words, answers))
    return b"".join(_position_output(engine, options, Place(number, position, words[position]), answer)
                    for position, answer in enumerate(answers))
