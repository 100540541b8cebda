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

import fastsubs
from conftest import DEMO_MODEL, TEST_DATA, run_cli, run_on_a_terminal

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
    sections = [re.search(r"reading the (\d)-grams: [\d,]+ of ([\d,]+)(; about \d+ s left)?$", line)
                for line in lines]
    announced = [(m.group(1), m.group(2)) for m in sections if m]
    assert announced == COUNTS
    assert SUMMARY.fullmatch(lines[-1]), lines[-1]


def test_on_a_terminal_the_lines_say_about_how_long_is_left(tmp_path: Path) -> None:
    """Once a share of the work is done (the header says how much is to come), each line
    has an estimate of the time left, until the last slot is written: then none is left.
    (The unigrams' line has one too where they are as much of the work as tiny.arpa's.)"""
    lines = build_on_a_terminal(MODEL, tmp_path / "tiny.fsidx")
    steps = [line.split("] ", 1)[1] for line in lines if re.match(r"\[ *[\d.]+s\] (reading the|wrote)", line)]
    estimated = [bool(re.search(r"; about \d+ s left$", step)) for step in steps]
    assert steps[0].startswith("reading the 1-grams") and steps[-1] == "wrote the 3-grams with the slot at 3", steps
    assert estimated[1:] == [True] * (len(steps) - 2) + [False], steps


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


def test_an_orders_records_go_into_the_index_while_the_next_orders_are_read(tmp_path: Path) -> None:
    """The 2-grams' slots are appended as soon as their jobs are done (here at once: one
    job, run in the building process), while the 3-grams are read, not after the whole
    model: a records file waiting for the end would hold them on disk all that time, the
    temporary disk of a big build more than its index.  Appended in key order, slot after slot."""
    said: list[str] = []
    fastsubs.build_index(DEMO_MODEL, tmp_path / "demo.fsidx", jobs=1, progress=said.append)
    steps = [line for line in said if line.startswith(("reading the", "wrote the", "read "))]
    wrote = [step for step in steps if step.startswith("wrote the")]
    assert [re.sub(r";.*", "", step) for step in wrote] == [
        f"wrote the {order}-grams with the slot at {slot}" for order in (2, 3, 4) for slot in range(1, order + 1)]
    first_four = next(at for at, step in enumerate(steps) if step.startswith("reading the 4-grams"))
    assert steps.index(wrote[1]) < first_four, steps
