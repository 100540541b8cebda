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
from fastsubs.index import Answer, SubstituteIndex
from fastsubs.query.options import QueryOptions
from fastsubs.query.output import Place, jsonl_record, sample_jsonl, sample_lines
from fastsubs.tokens import tokenize

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


def _answer(options: QueryOptions) -> Answer:
    """What the search gives for these options: the fields of the plain text format, written
    by the C core, or arrays for the formats made here (JSON lines, samples)."""
    if options.format != "text" or options.sample is not None:
        return Answer.ARRAYS
    return Answer.PROBABILITY_FIELDS if options.normalize else Answer.FIELDS


def _position_output(index: SubstituteIndex, options: QueryOptions, place: Place, answer: Any) -> bytes:
    """The output of one position in a format made from its arrays."""
    ids, scores = answer
    if options.sample is not None:
        write_samples = sample_jsonl if options.format == "jsonl" else sample_lines
        return write_samples(index, place, ids, scores, options.sample, options.seed)
    return jsonl_record(index, place, ids, scores)


def render_record(index: SubstituteIndex, line: bytes, options: QueryOptions, source: str, number: int) -> bytes:
    """The complete output of one input line."""
    excluded = index.excluded(options.excluded_words)
    kind = _answer(options)
    if options.targets:
        record = parse_target_record(line, source, number)
        target = record.position + 1
        answer = index.search(index.sentence_ids(record.tokens), target, target + 1, options.limits, excluded,
                              kind)[0]
        if kind != Answer.ARRAYS:  # the record itself, then its substitutes
            return (line if line.endswith(b"\n") else line + b"\n") + answer + b"\n"
        word = record.tokens[record.position] if record.position < len(record.tokens) else EOS
        return _position_output(index, options, Place(number, record.position, word, record.name, record.id), answer)
    tokens = tokenize(line)
    last = len(tokens) + 1 if options.no_eos else len(tokens) + 2
    answers = index.search(index.sentence_ids(tokens), 1, last, options.limits, excluded, kind)
    words = tokens + [EOS]
    if kind != Answer.ARRAYS:
        return b"".join(word + b"\t" + text + b"\n" for word, text in zip(words, answers))
    return b"".join(_position_output(index, options, Place(number, position, words[position]), answer)
                    for position, answer in enumerate(answers))
