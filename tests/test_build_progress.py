"""A build (and a verify) tells a person at a terminal how far it got; logs and pipes get the
summary line only.

Reading a big model takes a while, so on a terminal every section of the model is
announced as its reading starts (and every few seconds after, with the lines read so
far); the stderr of a batch job gets the one closing line.  Run for real, with stderr
a pseudo-terminal or a pipe.
"""

from __future__ import annotations

import re
from pathlib import Path

from conftest import TEST_DATA, run_cli, run_on_a_terminal

MODEL = TEST_DATA / "tiny.arpa"
#: The header of tiny.arpa: ngram 1=6, ngram 2=7, ngram 3=3.
COUNTS = [("1", "6"), ("2", "7"), ("3", "3")]
SUMMARY = re.compile(r"built .*: 6 1-grams, 7 2-grams, 3 3-grams; .* MiB in .* s")


def build_on_a_terminal(model: Path, target: Path) -> list[str]:
    """The lines a build writes to stderr when stderr is a terminal."""
    status, shown = run_on_a_terminal("fastsubs-index", "build", model, "-o", target)
    assert status == 0, shown.decode()
    return shown.decode().splitlines()


def test_on_a_terminal_every_section_is_announced_as_it_is_read(tmp_path: Path) -> None:
    lines = build_on_a_terminal(MODEL, tmp_path / "tiny.fsidx")
    sections = [re.search(r"reading the (\d)-grams: [\d,]+ of ([\d,]+)$", line) for line in lines]
    announced = [(m.group(1), m.group(2)) for m in sections if m]
    assert announced == COUNTS
    assert SUMMARY.fullmatch(lines[-1]), lines[-1]


def test_a_log_gets_only_the_summary(tmp_path: Path) -> None:
    result = run_cli("fastsubs-index", "build", MODEL, "-o", tmp_path / "tiny.fsidx")
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and SUMMARY.fullmatch(lines[0]), lines


def test_verify_shows_its_progress_on_a_terminal_only(tiny_index: Path) -> None:
    status, shown = run_on_a_terminal("fastsubs-index", "verify", tiny_index, MODEL)
    lines = shown.decode().splitlines()
    assert status == 0 and any(line.startswith("checked the ") for line in lines), lines
    assert any(line.startswith("compared ") for line in lines), lines
    logged = run_cli("fastsubs-index", "verify", tiny_index, MODEL)
    assert logged.stderr == b"" and logged.stdout.decode().startswith(f"{tiny_index}: OK; ")
