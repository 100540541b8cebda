"""Fuzzing the two places where outside bytes come in: the ARPA reader and query input.

Hypothesis mutates a valid model (flipped, inserted, deleted, repeated and swapped
bytes and lines, truncation) and draws arbitrary input lines.  The reader must accept
a model or reject it with one ModelFormatError line naming file and line — no other
exception, ever — and a model it accepts must answer as the exhaustive scorer reads it
(where that plain reader accepts it too); the query path must turn every input line
into exactly its output.
The default suite runs a short budget; ``-m slow`` runs the long one.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastsubs
from conftest import TEST_DATA
from exhaustive import ArpaFormatError, ArpaModel
from fastsubs.core import Core
from fastsubs.errors import ModelFormatError
from fastsubs.options import QueryOptions
from fastsubs.pipeline.chunks import process_chunk
from fastsubs.tokens import tokenize

MODEL = (TEST_DATA / "tiny.arpa").read_bytes()
ERROR_LINE = re.compile(r"^\S+:\d+: \S.*$")


@st.composite
def mutated_models(draw) -> bytes:
    """The tiny model with a few random edits at the byte or line level."""
    text = MODEL
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "drop line", "repeat line",
                                     "swap lines", "replace token"]))
        lines = text.split(b"\n")
        if kind == "flip" and text:
            at = draw(st.integers(0, len(text) - 1))
            text = text[:at] + bytes([text[at] ^ draw(st.integers(1, 255))]) + text[at + 1:]
        elif kind == "insert":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.binary(min_size=1, max_size=8)) + text[at:]
        elif kind == "delete" and text:
            at = draw(st.integers(0, len(text) - 1))
            text = text[:at] + text[at + draw(st.integers(1, 8)):]
        elif kind == "truncate":
            text = text[:draw(st.integers(0, len(text)))]
        elif kind in ("drop line", "repeat line", "swap lines", "replace token") and len(lines) > 1:
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(0, len(lines) - 1))
            if kind == "drop line":
                del lines[i]
            elif kind == "repeat line":
                lines.insert(j, lines[i])
            elif kind == "swap lines":
                lines[i], lines[j] = lines[j], lines[i]
            else:
                fields = lines[i].split(b"\t")
                fields[draw(st.integers(0, len(fields) - 1))] = draw(st.sampled_from(
                    [b"", b"x", b"1e400", b"-nan", b"0x10", b"\\data\\", b"\\end\\", b"-1.5", b"\xff\xfe", b"a b"]))
                lines[i] = b"\t".join(fields)
            text = b"\n".join(lines)
    return text


def check_model_bytes(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "fuzzed.arpa"
        model.write_bytes(content)
        try:
            fastsubs.build_index(model, Path(tmp) / "fuzzed.fsidx")
        except ModelFormatError as error:
            message = str(error)
            assert "\n" not in message and ERROR_LINE.match(message), message
            assert message.startswith(str(model) + ":")
            assert not (Path(tmp) / "fuzzed.fsidx").exists()
            return
        try:
            oracle = ArpaModel.from_text(content.decode("utf-8")).stored_as_float32()
        except (UnicodeDecodeError, ArpaFormatError):
            oracle = None  # accepted, but not plain enough for the oracle's reader: compared by shape only
        tokens = "the cat sat zzz".split()
        with fastsubs.open_index(Path(tmp) / "fuzzed.fsidx") as index:
            for position, subs in enumerate(index.sentence(tokens, n=3)):
                assert len(subs) == min(3, index.vocab_size - 1)
                assert all(math.isfinite(s.logprob) for s in subs)
                if oracle is not None:
                    expected = oracle.cut(oracle.ranked(oracle.substitute_scores(tokens, position)), n=3)
                    assert [(s.word, s.logprob) for s in subs] == expected, position


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_models())
def test_reader_accepts_or_names_the_line(content: bytes) -> None:
    check_model_bytes(content)


@pytest.mark.slow
@pytest.mark.timeout(900)
@settings(max_examples=6000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_models())
def test_reader_accepts_or_names_the_line_long_run(content: bytes) -> None:
    check_model_bytes(content)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    target = tmp_path_factory.mktemp("fuzz") / "tiny.fsidx"
    fastsubs.build_index(TEST_DATA / "tiny.arpa", target)
    opened = Core(target)
    yield opened
    opened.close()


LINES = st.lists(st.one_of(
    st.binary(max_size=60),
    st.lists(st.sampled_from([b"the", b"cat", b"sat", b"<s>", b"</s>", b"\xff", b"\x00", b"\t", b" ", b"\r",
                              b"x" * 300, b"<unk>"]), max_size=12).map(b" ".join),
), min_size=1, max_size=5)


def check_plain_lines(engine: Core, lines: list[bytes]) -> None:
    """The lines, as one chunk, give a row per token and one for </s>, in order."""
    chunk = [(number, raw.replace(b"\n", b" ") + b"\n") for number, raw in enumerate(lines, start=1)]
    result = process_chunk(engine, chunk, QueryOptions(n=3), "<fuzz>")
    rows = result.data.split(b"\n")
    assert result.error is None and result.done == len(chunk) and rows[-1] == b""
    assert [row.split(b"\t")[0] for row in rows[:-1]] == [word for _, line in chunk
                                                          for word in [*tokenize(line), b"</s>"]]


def check_target_lines(engine: Core, lines: list[bytes]) -> None:
    """Each record gives itself and one row of fields, or is skipped with a one-line
    warning naming it; without --skip-bad-records the first bad one ends the chunk."""
    chunk = [(number, raw.replace(b"\n", b" ") + b"\n") for number, raw in enumerate(lines, start=1)]
    result = process_chunk(engine, chunk, QueryOptions(n=2, targets=True, skip_bad_records=True), "<fuzz>")
    skipped = [int(warning.split(":")[3]) for warning in result.warnings]
    for warning in result.warnings:
        assert re.fullmatch(r"fastsubs-query: warning: skipped <fuzz>:\d+: \S.*", warning)
    out = result.data
    for number, line in chunk:
        if number not in skipped:
            assert out.startswith(line)
            out = out[len(line):]
            out = out[out.index(b"\n") + 1:]
    assert out == b"" and result.done == len(chunk)
    stopped = process_chunk(engine, chunk, QueryOptions(n=2, targets=True), "<fuzz>")
    first_bad = skipped[0] if skipped else None
    assert (stopped.error and stopped.error.line) == first_bad and stopped.warnings == []
    assert stopped.done == (first_bad - 1 if first_bad else len(chunk)) and result.data.startswith(stopped.data)


@settings(max_examples=300, deadline=None)
@given(LINES)
def test_every_input_line_yields_exactly_its_output(engine: Core, lines: list[bytes]) -> None:
    check_plain_lines(engine, lines)
    check_target_lines(engine, lines)


@pytest.mark.slow
@pytest.mark.timeout(600)
@settings(max_examples=10000, deadline=None)
@given(LINES)
def test_every_input_line_yields_exactly_its_output_long_run(engine: Core, lines: list[bytes]) -> None:
    check_plain_lines(engine, lines)
    check_target_lines(engine, lines)
