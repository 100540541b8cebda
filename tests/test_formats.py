"""The output formats the C core writes (kernel/render.c, kernel/sample.c) against what Python
writes for the same substitutes: ``json.dumps(..., ensure_ascii=False)`` for JSON lines,
numpy's ``default_rng([seed, line, position]).choice`` for the --sample draws, for any bytes
in the input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsubs import _kernel
from fastsubs.core import Core
from fastsubs.jsonl import text_fields
from fastsubs.limits import Limits
from fastsubs.options import QueryOptions
from fastsubs.pipeline.formats import render_lines
from fastsubs.tokens import tokenize

EOS = b"</s>"


@pytest.fixture(scope="module")
def index(demo_index: Path):
    with Core(demo_index) as opened:
        yield opened


def substitutes(index: Core, tokens: list[bytes], limits: Limits) -> list[tuple[np.ndarray, np.ndarray]]:
    ids = index.sentence_ids(tokens)
    return index.search(ids, 1, len(tokens) + 2, limits)


def place_fields(line: int, position: int, word: bytes, name: bytes | None = None,
                 record_id: bytes | None = None) -> dict:
    fields: dict = {"sentence": line}
    if name is not None and record_id is not None:
        fields.update(text_fields("name", name))
        fields.update(text_fields("id", record_id))
    fields["position"] = position
    fields.update(text_fields("word", word))
    return fields


def python_json(index: Core, tokens: list[bytes], line: int, limits: Limits) -> bytes:
    """The JSON lines of a sentence as Python writes them, from the search's arrays."""
    out = []
    for position, (ids, scores) in enumerate(substitutes(index, tokens, limits)):
        record = place_fields(line, position, (tokens + [EOS])[position])
        p = np.frombuffer(_kernel.normalized(scores))
        record["substitutes"] = [{"word": index.word(i).decode(), "lp": lp, "p": q}
                                 for i, lp, q in zip(ids.tolist(), scores.tolist(), p.tolist())]
        out.append(json.dumps(record, ensure_ascii=False).encode() + b"\n")
    return b"".join(out)


def numpy_draws(ids: np.ndarray, scores: np.ndarray, draws: int, seed: int, line: int, position: int) -> list[int]:
    if not len(ids):
        return []
    p = np.frombuffer(_kernel.normalized(scores))
    return np.random.default_rng([seed, line, position]).choice(ids, size=draws, replace=True, p=p).tolist()


WORDS = st.sampled_from([b"the", b"cat", b"caf\xc3\xa9", b"caf\xe9", b'"quoted"', b"back\\slash", b"\x01", b"\x7f",
                         b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\xe2\x82", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"<unk>",
                         b"\xef\xbb\xbfbom", b"\x1f\x1e"])
TOKENS = st.lists(st.one_of(WORDS, st.binary(min_size=1, max_size=6)), min_size=0, max_size=5).map(
    lambda words: tokenize(b" ".join(words)))


@settings(max_examples=3000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_numbers_are_written_as_python_writes_them(value: float) -> None:
    assert _kernel.json_number(value) == repr(value).encode()


def test_numbers_at_the_edges_of_fixed_notation() -> None:
    values = [0.0, -0.0, 1.0, -1.5, 1e-4, 1e-5, 9.999e-5, 1e15, 1e16, 1e17, 123456789012345678.0, 5e-324,
              2.2250738585072014e-308, 1.7976931348623157e308, 0.1, 1 / 3, -2.41636651, 2.0**53, 2.0**53 + 2.0]
    values += [float(f"1e{k}") for k in range(-30, 30)] + [float(f"-4.5e{k}") for k in range(-30, 30)]
    for value in values:
        assert _kernel.json_number(value) == repr(value).encode(), value


@settings(max_examples=150, deadline=None)
@given(tokens=TOKENS, line=st.integers(1, 10**12), n=st.integers(1, 40))
def test_json_lines_are_pythons_to_the_byte(index: Core, tokens: list[bytes], line: int, n: int) -> None:
    options = QueryOptions(n=n, format="jsonl")
    written = render_lines(index, [b" ".join(tokens) + b"\n"], line, options).data
    assert written == python_json(index, tokens, line, options.limits)
    for object_line in written.splitlines():
        json.loads(object_line)  # strict JSON, valid UTF-8


@settings(max_examples=100, deadline=None)
@given(tokens=TOKENS, line=st.integers(1, 10**9), draws=st.integers(1, 60), seed=st.integers(0, 2**64 - 1),
       p=st.sampled_from([None, 0.5, 0.99]))
def test_sample_draws_are_numpys(index: Core, tokens: list[bytes], line: int, draws: int, seed: int,
                                 p: float | None) -> None:
    """The same draws as numpy's Generator.choice, for any seed (up to 64 bits), line and position."""
    options = QueryOptions(n=None if p else 30, p=p, sample=draws, seed=seed)
    written = render_lines(index, [b" ".join(tokens) + b"\n"], line, options).data
    expected = b""
    for position, (ids, scores) in enumerate(substitutes(index, tokens, options.limits)):
        word = (tokens + [EOS])[position]
        expected += b"".join(word + b"\t" + index.word(i) + b"\n"
                             for i in numpy_draws(ids, scores, draws, seed, line, position))
    assert written == expected


@settings(max_examples=60, deadline=None)
@given(name=st.binary(max_size=6).filter(lambda b: b"\t" not in b and b"\n" not in b and b"\r" not in b),
       record_id=st.binary(max_size=6).filter(lambda b: b"\t" not in b and b"\n" not in b and b"\r" not in b),
       tokens=TOKENS.filter(bool), at=st.integers(0, 5), line=st.integers(1, 1000), draws=st.integers(1, 9))
def test_target_records_in_json_and_samples(index: Core, name: bytes, record_id: bytes,
                                            tokens: list[bytes], at: int, line: int, draws: int) -> None:
    position = min(at, len(tokens))
    record = b"\t".join([name, record_id, b"%d" % position, b" ".join(tokens)]) + b"\n"
    limits = Limits(12)
    ids, scores = substitutes(index, tokens, limits)[position]
    word = (tokens + [EOS])[position]
    fields = place_fields(line, position, word, name, record_id)
    p = np.frombuffer(_kernel.normalized(scores))
    expected_json = json.dumps({**fields, "substitutes": [
        {"word": index.word(i).decode(), "lp": lp, "p": q} for i, lp, q in zip(ids.tolist(), scores.tolist(),
                                                                            p.tolist())]},
        ensure_ascii=False).encode() + b"\n"

    def written(**options) -> bytes:
        return render_lines(index, [record], line, QueryOptions(n=12, targets=True, **options)).data

    assert written(format="jsonl") == expected_json
    drawn = [index.word(i) for i in numpy_draws(ids, scores, draws, 5, line, position)]
    expected_lines = b"".join(name + b"\t" + record_id + b"\t" + word + b"\t" + sub + b"\n" for sub in drawn)
    assert written(sample=draws, seed=5) == expected_lines
    expected_samples = json.dumps({**fields, "samples": [w.decode() for w in drawn]},
                                  ensure_ascii=False).encode() + b"\n"
    assert written(sample=draws, seed=5, format="jsonl") == expected_samples
