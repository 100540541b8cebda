"""The README and docs/ as a new user reads them: what they say to run works as written,
every option is there, and every link leads somewhere."""

from __future__ import annotations

import gzip
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fastsubs
from conftest import BIN, REPO, TEST_DATA, python_block, run_cli

README = REPO / "README.md"
DOCUMENTS = [README, *sorted((REPO / "docs").glob("*.md"))]


def section(document: Path, heading: str) -> str:
    """The text under ``heading`` up to the next heading of its level or above."""
    text = document.read_text()
    start = text.index(heading + "\n")
    level = heading.split(" ", 1)[0]
    following = re.search(rf"^#{{1,{len(level)}}} ", text[start + len(heading):], re.M)
    return text[start:start + len(heading) + (following.start() if following else len(text))]


def test_the_api_example_runs_as_written_and_again(tmp_path: Path) -> None:
    """Pasted into a file and run where model.arpa.gz and corpus.txt are: the first run
    builds the index, the second finds it there and answers the same."""
    (tmp_path / "model.arpa.gz").write_bytes(gzip.compress((TEST_DATA / "tiny.arpa").read_bytes()))
    (tmp_path / "corpus.txt").write_text("the cat sat\nthe dog\n")
    script = tmp_path / "example.py"
    script.write_text(python_block(README, "## Python API"))
    answers = []
    for _ in range(2):
        result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, timeout=120)
        assert result.returncode == 0, result.stderr.decode()
        answers.append(result.stdout)
    assert answers[0] == answers[1] and answers[0].count(b"\n") == 7  # six words and </s>
    assert (tmp_path / "model.fsidx").is_dir()


def test_every_option_of_fastsubs_query_is_in_the_readmes_table() -> None:
    shown = run_cli("fastsubs-query", "--help").stdout.decode()
    options = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", shown[shown.index("Options:"):]))
    table = section(README, "## Options of `fastsubs-query INDEX`")
    missing = {option for option in options if not re.search(rf"`{re.escape(option)}[` ]", table)}
    assert len(options) > 20 and not missing, sorted(missing)


@pytest.mark.parametrize("command", ["build", "info", "verify"])
def test_every_option_of_fastsubs_index_is_in_the_readmes_synopsis(command: str) -> None:
    """The README's one-line synopsis of each command of fastsubs-index lists its options."""
    shown = run_cli("fastsubs-index", command, "--help").stdout.decode()
    options = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", shown[shown.index("Options:"):])) - {"--help"}
    synopsis = re.search(rf"`fastsubs-index {command} [^`]*`", " ".join(README.read_text().split()))
    assert synopsis, f"no synopsis of fastsubs-index {command}"
    said = set(re.findall(r"\[(--?[a-z][\w-]*)", synopsis.group(0)))
    # an option is named by any of its spellings (-j or --jobs)
    spelled = [set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", line)) for line in shown.splitlines()]
    missing = {option for option in options if not any(option in names and names & said for names in spelled)}
    assert not missing, sorted(missing)


def test_the_demo_output_the_readme_shows_is_the_demos(demo_index: Path) -> None:
    """What "Try it" says ``make demo`` prints first is what the demo's index answers for
    examples/sentences.txt with the Makefile's options."""
    makefile = (REPO / "Makefile").read_text()
    [options] = re.findall(r"fastsubs-query \$\(DEMO_INDEX\) (.*) -i examples/sentences\.txt", makefile)
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", section(README, "## Try it"), re.M | re.S)
    shown = next(text for language, text in blocks if not language).splitlines()
    assert shown[-1] == "..." and len(shown) > 5
    printed = run_cli("fastsubs-query", demo_index, *options.split(), "-i", REPO / "examples" / "sentences.txt")
    assert printed.stdout.decode().splitlines()[:len(shown) - 1] == shown[:-1]


def test_the_tools_the_readme_runs_from_the_venv_are_installed_there() -> None:
    """After make demo / make test, the README sends a user to .venv/bin: each command it
    names there is one the install made (this suite runs in such an environment)."""
    named = set(re.findall(r"\.venv/bin/([\w-]+)", section(README, "## Try it")))
    assert {"fastsubs-query", "fastsubs-index", "python", "activate"} <= named
    assert all((BIN / name).exists() for name in named), sorted(n for n in named if not (BIN / n).exists())


#: ``pip install`` and what follows: its flags, then what to install.
INSTALL = re.compile(r"pip install ((?:-[-\w]+ )*)('[^']*'|[^\s`]+)")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_install_line_works_from_a_clone(document: Path) -> None:
    """There is no fastsubs on a package index: what is installed is the clone (``.``),
    with extras that pyproject.toml defines."""
    extras = set(importlib.metadata.metadata("fastsubs").get_all("Provides-Extra") or [])
    for flags, target in INSTALL.findall(document.read_text()):
        named = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", target.strip("'"))
        assert named is not None, f"{document.name}: pip install {flags}{target}"
        assert set(filter(None, (named.group(1) or "").split(","))) <= extras, target


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_link_leads_to_a_file_and_heading_that_exist(document: Path) -> None:
    for target in re.findall(r"\]\(([^)\s]+)\)", document.read_text()):
        if re.match(r"\w+://", target):
            continue
        path, _, fragment = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        assert linked.exists(), f"{document.name}: {target}"
        if fragment:
            headings = re.findall(r"^#+ (.*)$", linked.read_text(), re.M)
            assert fragment in {anchor(h) for h in headings}, f"{document.name}: {target}"


def test_the_readme_says_how_to_cite_and_the_licence() -> None:
    cite = section(README, "## How to cite")
    assert "10.1109/LSP.2012.2215587" in cite and "@article{" in cite and "@software{" in cite
    assert "Apache License 2.0" in section(README, "## Licence and data")
    assert (REPO / "LICENSE").read_text().split()[:3] == ["Apache", "License", "Version"]


def test_the_readmes_figures_of_p_are_the_demo_models(demo_index: Path) -> None:
    """What "Choosing the options" says -p lists over the positions of examples/sentences.txt
    on the demo model: how many it listed, how few would have held share P (from every
    candidate's score, listed with -n V), and the share the listed ones held."""
    import numpy as np

    said = " ".join(section(README, "## Choosing the options").split())
    number = r"([\d,]+)"
    found = re.search(rf"`-p 0\.5` listed {number}–{number} substitutes where {number}–{number} already held half "
                      rf"the mass \(the listed ones held {number}–{number}% of it\), and `-p 0\.9` {number}–{number} "
                      rf"where {number}–{number} held 90%", said)
    assert found, "the figures of -p are not where this test looks for them"
    figures = [int(value.replace(",", "")) for value in found.groups()]
    lines = (REPO / "examples" / "sentences.txt").read_text().splitlines()
    measured: dict[float, list[tuple[int, int, float]]] = {0.5: [], 0.9: []}
    with fastsubs.open_index(demo_index) as index:
        for tokens in (line.split() for line in lines):
            for position in range(len(tokens) + 1):
                scores = np.array([s.logprob for s in index.position(tokens, position, n=index.vocab_size)])
                held = np.cumsum(10.0 ** (scores - scores[0]))
                held /= held[-1]
                for share, rows in measured.items():
                    listed = len(index.position(tokens, position, p=share))
                    fewest = int(np.searchsorted(held, share)) + 1
                    assert listed >= fewest
                    rows.append((listed, fewest, held[listed - 1]))
    half, most = measured[0.5], measured[0.9]
    assert figures == [min(r[0] for r in half), max(r[0] for r in half), min(r[1] for r in half),
                       max(r[1] for r in half), round(100 * min(r[2] for r in half)),
                       round(100 * max(r[2] for r in half)), min(r[0] for r in most), max(r[0] for r in most),
                       min(r[1] for r in most), max(r[1] for r in most)]
