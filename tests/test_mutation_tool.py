"""tests/mutations.py counts a planted bug as caught only when a test of the code fails: the
test of its own table (test_mutation_table.py) fails in every planted copy, since the copy's
file no longer holds the line the bug replaced, so the suite run on a copy leaves it out."""

from __future__ import annotations

from pathlib import Path

import mutations


def test_the_suite_run_on_a_planted_copy_leaves_out_the_table_test(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    tests = copy / "tests"
    tests.mkdir(parents=True)
    (tests / "conftest.py").write_text('from hypothesis import settings\n\nsettings.register_profile("no-shrink")\n')
    (copy / mutations.MUTATION_TABLE_TEST).write_text("def test_the_table_names_lines_this_copy_lacks():\n"
                                                       "    assert False\n")
    (tests / "test_code.py").write_text("def test_the_code_under_test():\n    pass\n")
    (tmp_path / "site").mkdir()
    summary, failed, _ = mutations.run_suite(copy, tmp_path / "site", ["tests"], timeout=120)
    assert failed == [], summary
    assert summary.startswith("1 passed"), summary
