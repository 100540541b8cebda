"""Golden files: a tiny hand-written model and its exact expected output, committed.

Any change to the output format or to the numbers shows up here as a diff (scores are
float32 values from the index summed in float64, so they differ from the decimal sums
in the 8th place).  The
expected files were produced by fastsubs-query and are checked against the plain
exhaustive scorer below (and two values by hand), so they are not merely a snapshot:

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


def test_golden_scores_agree_with_exhaustive_scorer() -> None:
    oracle = ArpaModel.from_file(str(TEST_DATA / "tiny.arpa"))
    sentences = (TEST_DATA / "tiny-input.txt").read_text().splitlines()
    lines = iter((TEST_DATA / "tiny-expected.txt").read_text().splitlines())
    checked = 0
    for sentence in sentences:
        tokens = sentence.split()
        for position in range(len(tokens) + 1):
            fields = next(lines).split("\t")
            assert fields[0] == (tokens[position] if position < len(tokens) else "</s>")
            expected = oracle.substitute_scores(tokens, position)
            listed = [field.rsplit(" ", 1) for field in fields[1:]]
            assert len(listed) == len(oracle.candidates())  # -n 100 capped at V - 1 (all but <s>)
            for word, score in listed:
                assert abs(float(score) - expected[word]) < 1e-6
                checked += 1
    assert checked == 12 * 5


def test_hand_computed_values(tiny_index: Path) -> None:
    result = run_cli("fastsubs-query", tiny_index, "-n", "2", input=b"the cat sat\n")
    first = result.stdout.split(b"\n")[0].split(b"\t")
    assert first[1].split()[0] == b"the" and abs(float(first[1].split()[1]) + 0.6) < 1e-6
    assert first[2].split()[0] == b"cat" and abs(float(first[2].split()[1]) + 2.325) < 1e-6


def test_scores_are_float64_sums_of_float32_values(tiny_index: Path) -> None:
    """The index stores float32; the search must sum in float64, as ALGORITHM.md asks.

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
