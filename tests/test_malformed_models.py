"""Malformed ARPA models end in one clear line; odd but valid ones build the same index.

Every case starts from the small valid model ``CLEAN`` below and changes it (a table
row: name, mutation, the fragment the error must contain, the line it must name).  Each
malformed file must give exactly one line (on stderr with ``-q`` for the real
``fastsubs-index build``) naming the file and the line and saying what was expected,
exit status 1, no traceback, and nothing at the target path or beside it.

The accepted variants (line endings, spacing, free text, number notation, compression,
...) must build and answer every query exactly as the clean model does; a model with
n-grams whose prefix context is missing is checked against the exhaustive scorer.

The default suite builds every case with ``fastsubs.build_index`` in this process (the
message is the library's ModelFormatError) and a sample of each kind through the real
command line (a process start each); ``-m slow`` runs every case through the command line.
"""

from __future__ import annotations

import bz2
import ctypes
import gzip
import lzma
import math
import re
import struct
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import fastsubs
from conftest import run_cli, run_on_a_terminal
from exhaustive import ArpaModel
from fastsubs.errors import ModelFormatError
from fastsubs.indexer import arpa
from fastsubs.indexer._native import read_number

# Line numbers of CLEAN, used by the mutations and the expected errors:
#  1 \data\   2-4 ngram N=   6 \1-grams:   7-12 unigrams   14 \2-grams:   15-19 bigrams
#  21 \3-grams:   22-24 trigrams   26 \end\
CLEAN = """\
\\data\\
ngram 1=6
ngram 2=5
ngram 3=3

\\1-grams:
-1.0\t<unk>\t0
-99\t<s>\t-0.5
-0.8\t</s>
-0.6\tthe\t-0.25
-0.9\tcat\t0.25
-1.2\tsat\t-0.125

\\2-grams:
-0.3\t<s> the\t-0.0625
-0.5\tthe cat\t0.5
-0.7\tcat sat\t-0.2
-0.4\tsat </s>
-1.1\t<s> cat\t0.125

\\3-grams:
-0.2\t<s> the cat
-0.1\tthe cat sat
-0.35\tcat sat </s>

\\end\\
"""
CLEAN_LINES = CLEAN.encode().split(b"\n")[:-1]
LAST_LINE = len(CLEAN_LINES)  # 26

Mutation = Callable[[bytes], bytes]


def lines_edit(edit: Callable[[list[bytes]], None]) -> Mutation:
    def mutate(text: bytes) -> bytes:
        lines = text.split(b"\n")
        edit(lines)
        return b"\n".join(lines)
    return mutate


def replace(number: int, new: str | bytes) -> Mutation:
    """Line ``number`` (1-based) becomes ``new``."""
    def edit(lines: list[bytes]) -> None:
        lines[number - 1] = new.encode() if isinstance(new, str) else new
    return lines_edit(edit)


def delete(first: int, last: int | None = None) -> Mutation:
    """Lines ``first``..``last`` (inclusive) are gone."""
    def edit(lines: list[bytes]) -> None:
        del lines[first - 1:(last or first)]
    return lines_edit(edit)


def cut_after(number: int) -> Mutation:
    """The file ends after line ``number``."""
    return lambda text: b"\n".join(text.split(b"\n")[:number]) + b"\n"


def swap_bigrams_and_trigrams(text: bytes) -> bytes:
    lines = text.split(b"\n")
    return b"\n".join(lines[:13] + lines[20:25] + lines[13:20] + lines[25:])


def chop(compress: Callable[[bytes], bytes], tail: int) -> Mutation:
    """Compressed, then the last ``tail`` bytes are lost (as in an interrupted download)."""
    return lambda text: compress(text)[:-tail]


def cut_stored_gzip(line: int) -> Mutation:
    """Gzip without compression (so the cut is exact), ending three bytes into ``line``."""
    def mutate(text: bytes) -> bytes:
        offset = sum(len(x) + 1 for x in text.split(b"\n")[:line - 1])
        header = 10 + 5  # gzip header, then one stored deflate block's header
        return gzip.compress(text, compresslevel=0, mtime=0)[:header + offset + 3]
    return mutate


@dataclass(frozen=True)
class Bad:
    name: str
    mutate: Mutation
    fragment: str  # must appear in the message
    line: int  # the line the message must name
    suffix: str = ".arpa"


BAD = [
    # the file as a whole
    Bad("empty file", lambda text: b"", "expected an ARPA model, found an empty file", 1),
    Bad("no \\data\\ line", delete(1), "expected a \\data\\ line", LAST_LINE - 1),
    Bad("free text only", lambda text: b"just some text\n", "expected a \\data\\ line", 1),
    Bad("missing \\end\\", delete(26), "expected \\end\\ after the 3-grams, found the end of the file", 25),
    Bad("ends inside a section", cut_after(16),
        "expected 5 2-grams ('ngram 2=5' on line 3), found only 2 before the end of the file", 16),
    Bad("section after the last order", replace(26, "\\4-grams:"),
        "expected \\end\\ after the 3-grams (the \\data\\ header declares 3 orders), found '\\4-grams:'", 26),
    # the \data\ header
    Bad("header without counts", delete(2, 4), "expected 'ngram 1=count' after \\data\\, found '\\1-grams:'", 3),
    Bad("header line garbled", replace(3, "ngram two=5"), "expected 'ngram N=count' in the \\data\\ header", 3),
    Bad("header skips an order", replace(3, "ngram 3=5"), "expected 'ngram 2=count', found 'ngram 3=5'", 3),
    Bad("header count not a number", replace(3, "ngram 2=five"), "expected a whole number of n-grams", 3),
    Bad("header count negative", replace(3, "ngram 2=-1"), "expected a non-negative n-gram count", 3),
    Bad("header says no unigrams", replace(2, "ngram 1=0"), "expected at least one unigram", 2),
    # counts against sections
    Bad("header says more unigrams", replace(2, "ngram 1=7"),
        "expected 7 1-grams ('ngram 1=7' on line 2), found only 6 before a blank line", 13),
    Bad("header says more bigrams", replace(3, "ngram 2=6"),
        "expected 6 2-grams ('ngram 2=6' on line 3), found only 5 before a blank line", 20),
    Bad("header says fewer bigrams", replace(3, "ngram 2=4"),
        "expected only 4 2-grams ('ngram 2=4' on line 3), found more", 19),
    Bad("header says fewer trigrams", replace(4, "ngram 3=2"),
        "expected only 2 3-grams ('ngram 3=2' on line 4), found more", 24),
    Bad("section short, next heading follows", delete(19, 20),
        "expected 5 2-grams ('ngram 2=5' on line 3), found only 4 before '\\3-grams:'", 19),
    # sections
    Bad("sections out of order", swap_bigrams_and_trigrams,
        "expected the \\2-grams: section, found '\\3-grams:'", 14),
    Bad("section missing", delete(21, 25), "expected the \\3-grams: section, found '\\end\\'", 21),
    Bad("section heading misspelt", replace(14, "\\2-gram:"),
        "expected the \\2-grams: section, found '\\2-gram:'", 14),
    Bad("header declares fewer orders", delete(4), "expected no back-off weight on a 2-gram", 14),
    # n-grams of the wrong order
    Bad("3-gram among the 2-grams", replace(17, "-0.7\tcat sat </s>"),
        "expected a number for the back-off weight, found '</s>' (is this a 3-gram", 17),
    Bad("1-gram among the 2-grams", replace(18, "-0.4\tsat\t-0.1"),
        "found '-0.1' that has none (is this a 1-gram with a back-off weight", 18),
    Bad("2-gram among the 3-grams", replace(23, "-0.1\tthe cat"),
        "expected a 3-gram (log-prob, 3 words), found 3 fields", 23),
    Bad("4-gram among the 3-grams", replace(23, "-0.1\t<s> the cat sat"),
        "expected a 3-gram (log-prob, 3 words), found 5 fields", 23),
    # numbers
    Bad("log-prob not a number", replace(10, "abc\tthe\t-0.25"),
        "expected a number for the log-probability, found 'abc'", 10),
    Bad("log-prob NaN", replace(10, "nan\tthe\t-0.25"), "expected a finite log-probability or -inf, found 'nan'",
        10),
    Bad("log-prob +inf", replace(22, "inf\t<s> the cat"), "expected a finite log-probability or -inf, found 'inf'", 22),
    Bad("2-gram log-prob overflowing to -inf", replace(16, "-1e400\tthe cat\t0.5"),
        "expected a finite log-probability or -inf, found '-1e400'", 16),
    Bad("back-off -inf", replace(10, "-0.6\tthe\t-inf"), "expected a finite back-off weight, found '-inf'", 10),
    Bad("log-prob beyond float32", replace(10, "-1e39\tthe\t-0.25"),
        "expected a log-probability within ±3.4e38 (the index stores 32-bit floats), found '-1e39'", 10),
    Bad("2-gram log-prob beyond float32", replace(16, "-1e39\tthe cat\t0.5"),
        "expected a log-probability within ±3.4e38", 16),
    Bad("log-prob positive", replace(11, "0.5\tcat\t0.25"), "expected a log-probability <= 0, found '0.5'", 11),
    Bad("back-off NaN", replace(10, "-0.6\tthe\tNaN"), "expected a finite back-off weight, found 'NaN'", 10),
    Bad("back-off not a number", replace(15, "-0.3\t<s> the\t-0.o6"),
        "expected a number for the back-off weight, found '-0.o6'", 15),
    # Python's float() reads "-1_0" as -10; C's strtod, KenLM and SRILM refuse it
    Bad("log-prob with an underscore", replace(10, "-1_0\tthe\t-0.25"),
        "expected a number for the log-probability, found '-1_0'", 10),
    Bad("2-gram log-prob with an underscore", replace(16, "-0_5\tthe cat\t0.5"),
        "expected a number for the log-probability, found '-0_5'", 16),
    Bad("back-off with an underscore", replace(15, "-0.3\t<s> the\t-0.06_25"),
        "expected a number for the back-off weight, found '-0.06_25'", 15),
    Bad("3-gram log-prob with an underscore", replace(22, "-0.2_0\t<s> the cat"),
        "expected a number for the log-probability, found '-0.2_0'", 22),
    Bad("header count with an underscore", replace(3, "ngram 2=0_5"),
        "expected a whole number of n-grams, found '0_5'", 3),
    Bad("back-off on the highest order", replace(23, "-0.1\tthe cat sat\t-0.3"),
        "expected no back-off weight on a 3-gram, found '-0.3' (3 is the model's highest order)", 23),
    Bad("a small back-off weight on the highest order", replace(23, "-0.1\tthe cat sat\t1e-30"),
        "expected no back-off weight on a 3-gram, found '1e-30' (3 is the model's highest order)", 23),
    # fields
    Bad("log-prob only", replace(11, "-0.9"),
        "expected a 1-gram (log-prob, 1 word, optional back-off weight), found 1 field", 11),
    Bad("word missing", replace(18, "-0.4\tsat"),
        "expected a 2-gram (log-prob, 2 words, optional back-off weight), found 2 fields", 18),
    Bad("extra fields", replace(16, "-0.5\tthe cat\t0.5 0.1"),
        "expected a 2-gram (log-prob, 2 words, optional back-off weight), found 5 fields", 16),
    # words
    Bad("duplicate unigram", replace(12, "-1.2\tthe"),
        "expected each word to have one unigram, found 'the' again (first on line 10)", 12),
    Bad("duplicate 2-gram", replace(19, "-1.1\tthe cat"),
        "expected each 2-gram once, found 'the cat' again (first on line 16)", 19),
    Bad("duplicate 3-gram", replace(24, "-0.35\t<s> the cat"),
        "expected each 3-gram once, found '<s> the cat' again (first on line 22)", 24),
    Bad("word without a unigram", replace(17, "-0.7\tcat dog\t-0.2"),
        "expected every word of a 2-gram to have a unigram, found 'dog' that has none", 17),
    Bad("unigram not UTF-8", replace(11, b"-0.9\tca\xfft\t0.25"),
        "expected UTF-8 text, found a word that is not: 'ca\\xfft'", 11),
    Bad("3-gram word not UTF-8", replace(23, b"-0.1\tthe cat s\xe4t"),
        "found 's\\xe4t' that has none", 23),
    Bad("word too long for LMDB", replace(11, "-0.9\t" + "c" * 600 + "\t0.25"),
        "expected a word of at most 511 bytes, found one of 600 bytes", 11),
    # compression
    Bad(".gz cut inside line 16", cut_stored_gzip(16), "expected more compressed data: the file is truncated",
        16, ".arpa.gz"),
    Bad(".gz without its trailer", chop(gzip.compress, 8), "expected more compressed data", LAST_LINE + 1,
        ".arpa.gz"),
    Bad(".bz2 cut in half", lambda text: bz2.compress(text)[:len(bz2.compress(text)) // 2],
        "expected more compressed data: the file is truncated", 1, ".arpa.bz2"),
    Bad(".bz2 without its end marker", chop(bz2.compress, 4), "expected more compressed data", LAST_LINE + 1,
        ".arpa.bz2"),
    Bad(".xz without its footer", chop(lzma.compress, 12), "expected more compressed data", LAST_LINE + 1,
        ".arpa.xz"),
    Bad(".gz that is not gzip", lambda text: text,
        "expected .gz compressed data, found data that is damaged or in another format", 1, ".arpa.gz"),
]


def _crlf(text: bytes) -> bytes:
    return text.replace(b"\n", b"\r\n")


def _spaces(text: bytes) -> bytes:
    return text.replace(b"\t", b"   ")


def _free_text(text: bytes) -> bytes:
    return b"Made by hand; caf\xe9 (Latin-1).\nngram 1=99\n\\1-grams:\n\n" + text


def _respelled(text: bytes, spellings: list[tuple[bytes, bytes]]) -> bytes:
    """``text`` with each number of ``spellings`` (each there) written the other way."""
    for plain, other in spellings:
        assert plain in text
        text = text.replace(plain, other)
    return text


def _scientific(text: bytes) -> bytes:
    return _respelled(text, [(b"-0.6\t", b"-6e-1\t"), (b"-0.0625", b"-6.25E-2"), (b"\t0.25", b"\t2.5e-1"),
                             (b"-99\t", b"-9.9e+01\t"), (b"-0.35\t", b"-3.5E-1\t")])


def _strtod_syntax(text: bytes) -> bytes:
    """Numbers as C's strtod also reads them: hexadecimal, a sign, no digit before the point."""
    return _respelled(text, [(b"-0.5\tthe cat", b"-0x1p-1\tthe cat"), (b"-0.0625", b"-0X1P-4"),
                             (b"\t0.25", b"\t+.25"), (b"-0.4\t", b"-.4\t"),
                             (b"-0.1\t", b"-0x1.999999999999ap-4\t")])


def _no_blank_lines(text: bytes) -> bytes:
    return b"\n".join(line for line in text.split(b"\n") if line) + b"\n"


GOOD: dict[str, tuple[Mutation, str]] = {
    "CRLF line endings": (_crlf, ".arpa"),
    "space-separated fields": (_spaces, ".arpa"),
    "free text before \\data\\": (_free_text, ".arpa"),
    "scientific notation": (_scientific, ".arpa"),
    "C's strtod syntax": (_strtod_syntax, ".arpa"),
    "UTF-8 byte-order mark": (lambda text: b"\xef\xbb\xbf" + text, ".arpa"),
    "no blank lines between sections": (_no_blank_lines, ".arpa"),
    "text after \\end\\": (lambda text: text + b"\nthis is ignored\n\\1-grams:\n", ".arpa"),
    "no newline after \\end\\": (lambda text: text.rstrip(b"\n"), ".arpa"),
    "gzip": (gzip.compress, ".arpa.gz"),
    "bzip2": (bz2.compress, ".arpa.bz2"),
    "xz": (lzma.compress, ".arpa.xz"),
    "all at once": (lambda text: gzip.compress(_crlf(_spaces(_scientific(_free_text(text))))), ".arpa.gz"),
}

# 'the cat' (line 16) is gone although the 3-grams '<s> the cat' and 'the cat sat' remain.
MISSING_PREFIX = CLEAN.replace("-0.5\tthe cat\t0.5\n", "").replace("ngram 2=5", "ngram 2=4")

SENTENCES = [["the", "cat", "sat"], ["cat", "the", "sat", "sat"], ["dog", "the", "cat"], []]


@dataclass
class Built:
    """One case built: by the library in this process (``error`` the exception raised, if
    any) or by the real command line (``returncode`` and ``stderr``)."""

    model: Path
    target: Path
    error: Exception | None = None
    returncode: int = 0
    stderr: str = ""


def _case_folder(directory: Path, name: str, content: bytes, suffix: str) -> Path:
    folder = directory / re.sub(r"\W+", "-", name).strip("-")
    folder.mkdir()
    model = folder / f"model{suffix}"
    model.write_bytes(content)
    return model


def _build_in_process(directory: Path, name: str, content: bytes, suffix: str) -> Built:
    model = _case_folder(directory, name, content, suffix)
    target = model.parent / "model.fsidx"
    try:
        fastsubs.build_index(model, target)
    except Exception as error:  # noqa: BLE001  (which exception it is, is asserted by the tests)
        return Built(model, target, error=error)
    return Built(model, target)


def _build_by_cli(directory: Path, name: str, content: bytes, suffix: str) -> Built:
    model = _case_folder(directory, name, content, suffix)
    target = model.parent / "model.fsidx"
    result = run_cli("fastsubs-index", "build", model, "-o", target, "-q", check=False, timeout=120)
    return Built(model, target, returncode=result.returncode, stderr=result.stderr.decode("utf-8", "replace"))


def _jobs() -> dict[str, tuple[bytes, str]]:
    jobs = {"clean": (CLEAN.encode(), ".arpa"), "missing prefix": (MISSING_PREFIX.encode(), ".arpa")}
    jobs |= {bad.name: (bad.mutate(CLEAN.encode()), bad.suffix) for bad in BAD}
    jobs |= {name: (mutate(CLEAN.encode()), suffix) for name, (mutate, suffix) in GOOD.items()}
    assert len(jobs) == 2 + len(BAD) + len(GOOD), "case names must be unique"
    return jobs


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    """Every case built once by ``fastsubs.build_index`` in this process (milliseconds each)."""
    directory = tmp_path_factory.mktemp("malformed")
    return {name: _build_in_process(directory, name, content, suffix) for name, (content, suffix) in _jobs().items()}


@pytest.fixture(scope="module")
def cli_builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    """Every case built once by the real CLI, a few at a time (each run starts Python: slow tests only)."""
    directory = tmp_path_factory.mktemp("malformed-cli")
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(_build_by_cli, directory, name, content, suffix)
                   for name, (content, suffix) in _jobs().items()}
        return {name: future.result() for name, future in futures.items()}


def test_there_are_enough_malformed_cases() -> None:
    assert len(BAD) >= 30


def check_nothing_written(built: Built) -> None:
    assert not built.target.exists() and not built.target.is_symlink()
    assert sorted(p.name for p in built.model.parent.iterdir()) == [built.model.name], "leftovers beside the target"


def check_message(message: str, bad: Bad, model: Path) -> None:
    """One line: the file, the line, what was expected."""
    assert "\n" not in message, message
    prefix = f"{model}:{bad.line}: "
    assert message.startswith(prefix), f"expected {prefix!r}…, got {message!r}"
    assert bad.fragment in message, f"expected {bad.fragment!r} in {message!r}"
    assert "expected" in message


@pytest.mark.parametrize("bad", BAD, ids=[bad.name for bad in BAD])
def test_malformed_model_is_refused_naming_file_and_line(bad: Bad, builds: dict[str, Built]) -> None:
    built = builds[bad.name]
    assert isinstance(built.error, fastsubs.ModelFormatError), repr(built.error)
    check_message(str(built.error), bad, built.model)
    check_nothing_written(built)


@pytest.mark.parametrize("bad", BAD, ids=[bad.name for bad in BAD])
def test_a_malformed_model_is_refused_alike_at_every_chunk_size(bad: Bad, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader takes a section's lines in chunks, parsed in bulk from their text where
    every line is one of the section's n-grams: at every chunk size up to the whole model,
    a malformed model is refused as it is at the reader's own, naming the same line."""
    model = tmp_path / f"model{bad.suffix}"
    model.write_bytes(bad.mutate(CLEAN.encode()))

    def refusal() -> str | None:
        try:
            arpa.read_arpa(model)
        except ModelFormatError as error:
            return str(error)
        return None  # refused by the build, past the reader (a repeated n-gram)

    expected = refusal()
    for batch_lines in range(1, CLEAN.count("\n") + 2):
        monkeypatch.setattr(arpa, "BATCH_LINES", batch_lines)
        assert refusal() == expected, f"{batch_lines} lines at once"


def check_cli_error(built: Built, bad: Bad) -> None:
    assert built.returncode == 1, built.stderr
    assert "Traceback" not in built.stderr
    lines = built.stderr.splitlines()
    assert len(lines) == 1, built.stderr
    assert lines[0].startswith("fastsubs-index: error: "), lines[0]
    check_message(lines[0].removeprefix("fastsubs-index: error: "), bad, built.model)
    check_nothing_written(built)


#: One case of each kind through the real command line in the default suite.
CLI_SAMPLE = ["empty file", "header count negative", "header says fewer bigrams", "log-prob NaN",
              "duplicate 2-gram", "unigram not UTF-8", ".gz cut inside line 16", ".xz without its footer"]


SAMPLED = [bad for bad in BAD if bad.name in CLI_SAMPLE]


def test_the_sample_names_cases_of_the_table() -> None:
    assert len(SAMPLED) == len(CLI_SAMPLE)


@pytest.mark.parametrize("bad", SAMPLED, ids=[bad.name for bad in SAMPLED])
def test_the_command_line_says_it_in_one_line(bad: Bad, tmp_path: Path) -> None:
    check_cli_error(_build_by_cli(tmp_path, bad.name, bad.mutate(CLEAN.encode()), bad.suffix), bad)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("bad", BAD, ids=[bad.name for bad in BAD])
def test_every_malformed_model_through_the_command_line(bad: Bad, cli_builds: dict[str, Built]) -> None:
    check_cli_error(cli_builds[bad.name], bad)


def test_progress_lines_do_not_hide_the_error(tmp_path: Path) -> None:
    """Without -q, on a terminal (where a build prints progress), the error is still one
    line, after the progress lines, and no traceback."""
    model = tmp_path / "bad.arpa"
    model.write_bytes(replace(23, "-0.1\tthe cat sat\t-0.3")(CLEAN.encode()))
    returncode, shown = run_on_a_terminal("fastsubs-index", "build", model)
    lines = shown.decode().splitlines()
    assert returncode == 1
    assert len(lines) >= 2 and all(line.startswith("[") for line in lines[:-1]), lines
    assert lines[-1].startswith(f"fastsubs-index: error: {model}:23: expected no back-off weight")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.arpa"]


def _answers(target: Path) -> list[list[list[tuple[str, float]]]]:
    with fastsubs.open_index(target) as index:
        return [[[(s.word, s.logprob) for s in subs] for subs in index.sentence(tokens, n=10)]
                for tokens in SENTENCES]


@pytest.mark.parametrize("name", list(GOOD))
def test_accepted_variant_answers_like_the_clean_model(name: str, builds: dict[str, Built]) -> None:
    built, clean = builds[name], builds["clean"]
    assert clean.error is None and built.error is None, (clean.error, built.error)
    assert _answers(built.target) == _answers(clean.target)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(GOOD))
def test_accepted_variant_builds_through_the_command_line(name: str, cli_builds: dict[str, Built]) -> None:
    built, clean = cli_builds[name], cli_builds["clean"]
    assert clean.returncode == 0 and built.returncode == 0, (clean.stderr, built.stderr)
    assert built.stderr.startswith(f"built {built.target}:"), built.stderr
    assert _answers(built.target) == _answers(clean.target)


def test_missing_prefix_context_is_tolerated(builds: dict[str, Built]) -> None:
    built = builds["missing prefix"]
    assert built.error is None, built.error
    oracle = ArpaModel.from_text(MISSING_PREFIX).stored_as_float32()
    with fastsubs.open_index(built.target) as index:
        for tokens in SENTENCES:
            for position in range(len(tokens) + 1):
                ours = [(s.word, s.logprob) for s in index.position(tokens, position, n=10)]
                expected = oracle.cut(oracle.ranked(oracle.substitute_scores(tokens, position)), n=10)
                assert ours == expected, (tokens, position)
    assert _answers(built.target) != _answers(builds["clean"].target), "the model should differ from the clean one"


# ---------------------------------------------------------------- numbers as C's strtod reads them

_LIBC = ctypes.CDLL(None)
_LIBC.strtod.restype = ctypes.c_double
_LIBC.strtod.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]


def strtod_whole(token: bytes) -> float | None:
    """The C library's own strtod over all of ``token`` (this process's numeric locale is
    "C"), or None when it stops before the end."""
    text = ctypes.create_string_buffer(token)
    stop = ctypes.c_void_p()
    value = _LIBC.strtod(ctypes.addressof(text), ctypes.byref(stop))
    return value if token and stop.value == ctypes.addressof(text) + len(token) else None


#: Plain decimals (a sign, digits, a point, digits), the form of an ARPA model's scores,
#: which the parsers read without strtod when they have at most 15 digits.
PLAIN_DECIMALS = st.builds(lambda sign, whole, point, fraction: (sign + whole + point + fraction).encode(),
                           st.sampled_from(["", "-", "+"]), st.text("0123456789", max_size=17),
                           st.sampled_from(["", "."]), st.text("0123456789", max_size=17))


@given(token=PLAIN_DECIMALS)
@example(token=b"95142426273599.37")  # 16 digits: m rounded to a double, then divided, is off by one ulp
@example(token=b"-0.0")
@example(token=b"-0.000000000000001")
@example(token=b"999999999999999")
@example(token=b".")
@settings(max_examples=2000, deadline=None)
def test_a_plain_decimal_is_read_to_the_bit_as_strtod_reads_it(token: bytes) -> None:
    """The parsers' fast path for plain decimals (one division of exact doubles) gives
    strtod's double to the bit, its sign included, and leaves every other token to strtod."""
    value = strtod_whole(token)
    read = read_number(token)
    assert (read is None) == (value is None), (read, value)
    if value is not None:
        assert struct.pack("<d", read) == struct.pack("<d", value), (token, read, value)


def log_prob_read(path: Path, bulk: bool) -> float | str:
    """The log-probability of the 2-gram on line 16 of the model at ``path``, or the error:
    read by the bulk parser in C first (as a build does), or by the line-by-line parser alone."""
    with mock.patch.object(arpa, "_parse_bulk", arpa._parse_bulk if bulk else lambda *_: None):
        try:
            model = arpa.read_arpa(path)
        except ModelFormatError as error:
            return str(error)
    return float(model.tables[1].alpha[1])


#: Tokens of the characters a number may hold, and of Python's float() syntax ("1_0").
NUMBER_TOKENS = st.text("0123456789.eE+-_xXpPaAfFinINtTyY", min_size=1, max_size=12).map(str.encode)


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("numbers")


@given(token=NUMBER_TOKENS)
@example(token=b'-1_0')
@example(token=b'-0x1p-3')
@example(token=b'-.5')
@example(token=b'-INFINITY')
@example(token=b'-1e400')
@example(token=b'-1e-400')
@example(token=b'nan')
@example(token=b'-0')
@example(token=b'1e')
@example(token=b'-1e39')
@settings(max_examples=300, deadline=None)
def test_both_parsers_read_a_number_as_strtod_does(model_folder: Path, token: bytes) -> None:
    """A 2-gram's log-probability ``token`` is read the same by the bulk parser in C and the
    line-by-line parser (read_number, a build's every number): taken exactly when C's strtod
    reads all of it (a finite log-probability within float32, or -inf written as such), as
    that value; otherwise one line naming the file and line 16."""
    path = model_folder / "model.arpa"
    path.write_bytes(replace(16, token + b"\tthe cat\t0.5")(CLEAN.encode()))
    value = strtod_whole(token)
    assert read_number(token) == value or (value is not None and math.isnan(value) and math.isnan(read_number(token)))
    both = log_prob_read(path, bulk=True), log_prob_read(path, bulk=False)
    assert both[0] == both[1], both
    taken = value is not None and value <= 0 and (math.isfinite(value) and value >= -arpa.FLOAT32_MAX
                                                   or token.lower() in arpa.MINUS_INFINITY)
    if taken:
        assert both[0] == float(np.float32(value)), both
    else:
        assert isinstance(both[0], str) and both[0].startswith(f"{path}:16: expected "), both
