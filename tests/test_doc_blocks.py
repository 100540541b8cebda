"""Every Python block that the docs give a user to paste runs as pasted:
docs/output-formats.md, docs/dask.md, docs/api.md and the README's API section, each
block a script of its own, run in a folder that holds what the docs name (``model.fsidx``,
``model.arpa.gz``, ``corpus.txt``, ``corpus/*.txt`` and the dataset ``OUT``, written
by fastsubs-query from the demo model), so that a doc and the code cannot drift apart.

Twice: in the default suite, with the test environment (``make test``'s, every extra
installed: fast); and, marked ``packaging`` (``make check-package``, which needs the
package index), each in a fresh virtual environment holding only what the install line
of its document gives.  A document says what to install before the code that needs it:
a block's install line is the last ``pip install`` between it and the heading above it
(the README's API block: ``pip install .``), and a block that needs what that line does
not install (duckdb where no extra names it) fails there, as it would for a user.  One
environment per distinct install line, made once per session.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from conftest import DEMO_MODEL, REPO, demo_text, run_cli
from test_readme import INSTALL

#: The documents, with the heading of the section whose blocks are the user's (None: all).
DOCUMENTS = [(REPO / "docs" / "output-formats.md", None), (REPO / "docs" / "dask.md", None),
             (REPO / "docs" / "api.md", None), (REPO / "README.md", "## Python API")]


class Block(NamedTuple):
    """A ```python block of a document, and what its document says to install before it."""

    code: str
    install: str  #: the target of the last ``pip install`` before it (``.``, ``.[dask]``), unquoted
    flags: str = ""  #: that line's flags (``-e`` of the development install)


#: Extras for developing fastsubs, which no user's code needs.
DEVELOPMENT_EXTRAS = {"test", "lint"}


def python_blocks(document: Path, heading: str | None) -> list[Block]:
    """The ```python blocks of ``document`` (of its section ``heading`` alone, if given)."""
    text = document.read_text()
    start, end = 0, len(text)
    if heading is not None:
        start = text.index(heading + "\n")
        following = re.search(r"^## ", text[start + len(heading):], re.M)
        end = start + len(heading) + (following.start() if following else len(text))
    blocks = []
    for found in re.finditer(r"```python\n(.*?)```", text[start:end], re.S):
        before = text[:start + found.start()]
        headings = list(re.finditer(r"^#+ ", before, re.M))
        under_its_heading = before[headings[-1].start() if headings else 0:]
        flags, target = (INSTALL.findall(under_its_heading) or [("", "")])[-1]
        blocks.append(Block(found.group(1), target.strip("'"), flags.strip()))
    return blocks


BLOCKS = [pytest.param(block, id=f"{document.name}#{number}")
          for document, heading in DOCUMENTS
          for number, block in enumerate(python_blocks(document, heading), start=1)]


def test_every_document_has_blocks_to_run() -> None:
    """The blocks are found (a change of fence would otherwise leave nothing checked), and
    each document says what a user installs before each block: the clone with extras a
    user's code needs, not the development install (the README's API block, before its
    own line, ran after ``pip install -e '.[test,...]'``)."""
    for document, heading in DOCUMENTS:
        blocks = python_blocks(document, heading)
        assert blocks, document
        for block in blocks:
            named = re.fullmatch(r"\.(?:\[([\w,]+)\])?", block.install)
            assert named and not block.flags, (document, block)
            assert not DEVELOPMENT_EXTRAS & set((named.group(1) or "").split(",")), (document, block)


def test_a_blocks_install_line_is_the_last_before_it(tmp_path: Path) -> None:
    document = tmp_path / "doc.md"
    document.write_text("`pip install '.[dask]'`\n\n```python\na\n```\npip install .\n## S\n"
                        "(`pip install '.[dask,dataframe]'`):\n```python\nb\n```\n")
    assert python_blocks(document, None) == [Block("a\n", ".[dask]"), Block("b\n", ".[dask,dataframe]")]
    assert python_blocks(document, "## S") == [Block("b\n", ".[dask,dataframe]")]
    document.write_text("pip install -e '.[test]'\n```python\nc\n```\n# T\n```python\nd\n```\n")
    assert python_blocks(document, None) == [Block("c\n", ".[test]", "-e"), Block("d\n", "")]


@pytest.fixture(scope="module")
def materials(demo_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the blocks name, made once: the index, its model, a corpus and a dataset of it."""
    folder = tmp_path_factory.mktemp("materials")
    text = demo_text(40)
    (folder / "corpus.txt").write_bytes(text)
    (folder / "corpus").mkdir()
    lines = text.splitlines(keepends=True)
    (folder / "corpus" / "a.txt").write_bytes(b"".join(lines[:25]))
    (folder / "corpus" / "b.txt").write_bytes(b"".join(lines[25:]))
    run_cli("fastsubs-query", demo_index, "-n", "10", "-z", "--format", "parquet", "-i", folder / "corpus.txt",
            "-o", folder / "OUT")
    return folder


def run_block(python: str | Path, block: Block, materials: Path, demo_index: Path, folder: Path) -> None:
    """Run ``block`` with ``python`` in ``folder``, beside what the docs name; it must succeed."""
    for name in ("corpus.txt", "corpus", "OUT"):
        (folder / name).symlink_to(materials / name)
    (folder / "model.fsidx").symlink_to(demo_index)
    shutil.copy(DEMO_MODEL, folder / "model.arpa.gz")
    script = folder / "block.py"
    script.write_text(block.code)
    result = subprocess.run([str(python), str(script)], cwd=folder, capture_output=True, timeout=300,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert result.returncode == 0, f"{block.code}\n{result.stderr.decode()[-3000:]}"


@pytest.mark.parametrize("block", BLOCKS)
def test_the_block_runs_as_pasted(block: Block, materials: Path, demo_index: Path, tmp_path: Path) -> None:
    run_block(sys.executable, block, materials, demo_index, tmp_path)


@pytest.fixture(scope="session")
def installed_as_documented(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The python of a fresh virtual environment into which ``pip install TARGET`` was run
    in the clone, as the docs say it (``.``, ``.[dask]``): made on first use, one per target."""
    made: dict[str, Path] = {}

    def python(target: str) -> Path:
        if target not in made:
            venv = tmp_path_factory.mktemp("documented-install") / "venv"
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
            result = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", target], cwd=REPO,
                                    capture_output=True, timeout=900)
            assert result.returncode == 0, f"pip install {target}:\n{result.stderr.decode()[-3000:]}"
            made[target] = venv / "bin" / "python"
        return made[target]

    return python


@pytest.mark.packaging
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("block", BLOCKS)
def test_the_block_runs_after_the_install_line_of_its_document(block: Block, materials: Path, demo_index: Path,
                                                               tmp_path: Path,
                                                               installed_as_documented: Callable[[str], Path]) -> None:
    """In an environment holding fastsubs as the block's install line installs it, and
    nothing else: no test extra, no editable clone."""
    python = installed_as_documented(block.install)
    where = subprocess.run([str(python), "-c", "import fastsubs; print(fastsubs.__file__)"], cwd=tmp_path,
                           capture_output=True, check=True, timeout=120).stdout.decode().strip()
    assert Path(where).is_relative_to(python.parent.parent), where
    run_block(python, block, materials, demo_index, tmp_path)
