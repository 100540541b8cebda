"""The joint bound's plan (kernel/joint.c, ``joint_plan``): the slack it takes, and the invariants it checks.

The joint bound on terms 0 and 1 (docs/algorithm.md, "The joint bound") rests on the shape
the search's own code gives a position's terms: term 0 predicts x and ends in its unigram
base, the last of its alternatives; term 1 has x in its contexts and ends in a constant.
No index can break that, only a change to terms.c or lists.c, and a bound built on a broken
shape could be wrong without a sign: so joint_plan checks both in every build (Python's builds
define NDEBUG) and stops the process.  ``tests/c/joint_check.c`` hands it terms made by
hand, sound or with one invariant broken.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from c_programs import build_program, no_sanitizer_report, run_program


@pytest.fixture(scope="module")
def joint_check(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_program(tmp_path_factory, "joint_check.c")


@pytest.mark.parametrize("value_bound", [99.0, 100.0, 250.5])
def test_the_plan_reads_the_joint_order_with_the_documented_slack(joint_check: Path, value_bound: float) -> None:
    """Term 1's alternative "_ d" (its second) is the one whose joint order is read, and the
    slack is (16 N^2 + 4) u M' with M' = max(M, 100): 260 * 2**-53 * 100, about 2.9e-12, for
    a 4-gram model whose values are within 100 (docs/algorithm.md)."""
    result = run_program(joint_check, "sound", repr(value_bound), timeout=60)
    no_sanitizer_report(result)
    assert result.returncode == 0, result.stderr.decode()
    alternative, slack = result.stdout.decode().split()
    assert int(alternative) == 1
    assert float.fromhex(slack) == (16 * 4**2 + 4) * 2**-53 * max(value_bound, 100.0)
    if value_bound <= 100:
        assert f"{float.fromhex(slack):.1e}" == "2.9e-12"


@pytest.mark.parametrize(("case", "message"), [
    ("term-0-constant-base", "term 0's last alternative is not its unigram base"),
    ("term-0-base-not-last", "term 0's last alternative is not its unigram base"),
    ("term-1-unigram-base", "term 1's base is not a constant"),
])
def test_a_broken_invariant_stops_the_process(joint_check: Path, case: str, message: str) -> None:
    result = run_program(joint_check, case, "99", timeout=60)
    errors = no_sanitizer_report(result)
    assert result.returncode == -signal.SIGABRT, (result.returncode, errors)
    assert f"the joint bound's invariant does not hold: {message}" in errors
