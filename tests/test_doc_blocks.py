"""Every Python block that the docs give a user to paste runs as pasted after ``make test``:
docs/output-formats.md, docs/dask.md, docs/api.md and the README's API section, each
block a script of its own, run in a folder that holds what the docs name (``model.fsidx``,
``model.arpa.gz``, ``corpus.txt``, ``corpus/*.txt`` and the dataset ``OUT``, written
by fastsubs-query from the demo model), so that a doc and the code cannot drift apart."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DEMO_MODEL, REPO, demo_text, run_cli

#: The documents, with the heading of the section whose blocks are the user's (None: all).
DOCUMENTS = [(REPO / "docs" / "output-formats.md", None), (REPO / "docs" / "dask.md", None),
             (REPO / "docs" / "api.md", None), (REPO / "README.md", "## Python API")]


def python_blocks(document: Path, heading: str | None) -> list[str]:
    """The ```python blocks of ``document`` (of its section ``heading`` alone, if given)."""
    text = document.read_text()
    if heading is not None:
        start = text.index(heading + "\n")
        following = re.search(r"^## ", text[start + len(heading):], re.M)
        text = text[start:start + len(heading) + (following.start() if following else len(text))]
    return re.findall(r"```python\n(.*?)```", text, re.S)


BLOCKS = [pytest.param(block, id=f"{document.name}#{number}")
          for document, heading in DOCUMENTS
          for number, block in enumerate(python_blocks(document, heading), start=1)]


def test_every_document_has_blocks_to_run() -> None:
    """The blocks are found (a change of fence would otherwise leave nothing checked)."""
    for document, heading in DOCUMENTS:
        assert python_blocks(document, heading), document


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


@pytest.mark.parametrize("block", BLOCKS)
def test_the_block_runs_as_pasted(block: str, materials: Path, demo_index: Path, tmp_path: Path) -> None:
    for name in ("corpus.txt", "corpus", "OUT"):
        (tmp_path / name).symlink_to(materials / name)
    (tmp_path / "model.fsidx").symlink_to(demo_index)
    shutil.copy(DEMO_MODEL, tmp_path / "model.arpa.gz")
    script = tmp_path / "block.py"
    script.write_text(block)
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, timeout=300,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert result.returncode == 0, f"{block}\n{result.stderr.decode()[-3000:]}"
