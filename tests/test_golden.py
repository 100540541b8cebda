"""Golden files: a tiny hand-written model and its exact expected output, committed.

Any change to the output format or to the numbers shows up here as a diff (scores are
float32 values from the index summed in float64, so they differ from the decimal sums
in the 8th place).  The expected files are derived independently of fastsubs: the
plain exhaustive scorer (tests/exhaustive.py) gives every line of them, ``-z`` and
``-t`` included (test_golden_files_are_what_the_exhaustive_scorer_gives), and two values
are computed by hand:

* "the cat sat", target "the", x = the: p(the|<s>) = -0.3, p(cat|<s> the) = -0.2,
  p(sat|the cat) = -0.1, total -0.6.
* x = cat: p(cat|<s>) = -1.1; p(cat|<s> cat) backs off: beta(<s> cat) = 0.125, then
  beta(cat) = 0.25 (positive) + alpha(cat) = -0.9; p(sat|cat cat) = alpha(cat sat)
  = -0.7; total -2.325.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import TEST_DATA, run_cli
from exhaustive import ArpaModel

CASES = [
    ("tiny-input.txt", [], "tiny-expected.txt"),
    ("tiny-input.txt", ["-z", "-n", "3"], "tiny-expected-z-n3.txt"),
    ("tiny-records.tsv", ["-t", "-n", "2"], "tiny-expected-t-n2.txt"),
]


@pytest.mark.parametrize("input_name, options, expected_name", CASES)
def test_output_is_byte_identical_to_golden_file(tiny_index: Path, input_name: str, options: list[str],
                                                 expected_name: str) -> None:
    result = run_cli("fastsubs-query", tiny_index, *options, input=(TEST_DATA / input_name).read_bytes())
    assert result.stdout == (TEST_DATA / expected_name).read_bytes()


def oracle_fields(oracle: ArpaModel, tokens: list[str], position: int, n: int, normalize: bool) -> str:
    """The substitutes of one position as the output format writes them, derived from
    the exhaustive scorer: ``word %.8f`` fields, ties lowest id first; with ``normalize``
    (``-z``) p / Σp over the listed ones instead of lp, cut before the first below 1e-8."""
    listed = oracle.cut(oracle.ranked(oracle.substitute_scores(tokens, position)), n=n)
    values = [lp for _, lp in listed]
    if normalize:
        p = [10.0 ** (lp - values[0]) for lp in values]
        values = [q / sum(p) for q in p]
        kept = next((i for i, v in enumerate(values) if v < 1e-8), len(values))
        listed, values = listed[:kept], values[:kept]
    return "\t".join(f"{word} {value:.8f}" for (word, _), value in zip(listed, values))


def oracle_output(input_name: str, options: list[str]) -> str:
    """What fastsubs-query prints for ``options`` (only -n, -z, -t), by the exhaustive scorer."""
    oracle = ArpaModel.from_file(str(TEST_DATA / "tiny.arpa")).stored_as_float32()
    n = int(options[options.index("-n") + 1]) if "-n" in options else 100
    normalize = "-z" in options
    lines = []
    for line in (TEST_DATA / input_name).read_text().splitlines():
        if "-t" in options:  # name, id, index, text: the record, then the substitutes of token ``index``
            _, _, index, text = line.split("\t")
            lines += [line, oracle_fields(oracle, text.split(), int(index), n, normalize)]
            continue
        tokens = line.split()
        for position, word in enumerate([*tokens, "</s>"]):
            lines.append(word + "\t" + oracle_fields(oracle, tokens, position, n, normalize))
    return "".join(f"{line}\n" for line in lines)


@pytest.mark.parametrize("input_name, options, expected_name", CASES)
def test_golden_files_are_what_the_exhaustive_scorer_gives(input_name: str, options: list[str],
                                                          expected_name: str) -> None:
    """The committed files are not snapshots: the plain oracle, reading the model's numbers
    as float32 like the index, derives every line of them, byte for byte."""
    assert oracle_output(input_name, options) == (TEST_DATA / expected_name).read_text()


def test_hand_computed_values(tiny_index: Path) -> None:
    result = run_cli("fastsubs-query", tiny_index, "-n", "2", input=b"the cat sat\n")
    first = result.stdout.split(b"\n")[0].split(b"\t")
    assert first[1].split()[0] == b"the" and abs(float(first[1].split()[1]) + 0.6) < 1e-6
    assert first[2].split()[0] == b"cat" and abs(float(first[2].split()[1]) + 2.325) < 1e-6


def test_scores_are_float64_sums_of_float32_values(tiny_index: Path) -> None:
    """The index stores float32; the search must sum in float64, as docs/algorithm.md asks.

    "cat the", substitute "the" for "cat": p(the|<s>) = -0.3; p(the|<s> the) backs off,
    beta(<s> the) = -0.0625, beta(the) = -0.25, alpha(the) = -0.6; p(</s>|the the)
    backs off, beta(the) = -0.25, alpha(</s>) = -0.8.  Summed in float32 (the original
    tool's way, and what an accidental float32 numpy sum gives) the 8th decimal differs.
    """
    import numpy as np

    parts = [-0.3, -0.0625, -0.25, -0.6, -0.25, -0.8]
    expected = sum(float(np.float32(p)) for p in parts)
    first = run_cli("fastsubs-query", tiny_index, "-n", "1", input=b"cat the\n").stdout.split(b"\n")[0]
    assert first == b"cat\tthe %.8f" % expected
    assert b"%.8f" % expected == b"-2.26250005"
