"""Shared fixtures: real indexes built from real model files, and the installed CLIs.

The project's data lives in ``../shared/data`` beside the repository (CI lays it there
too); tests needing the large benchmark model are marked ``slow``.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import Phase, settings

import fastsubs

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
REFERENCE = SHARED_DATA / "reference"
TEST_DATA = Path(__file__).resolve().parent / "data"
BIN = Path(sys.executable).parent


# ``--hypothesis-profile no-shrink``: report a failing example as found (tests/mutations.py
# runs the suite against planted bugs, where shrinking big models would take minutes).
settings.register_profile("no-shrink", phases=[Phase.explicit, Phase.reuse, Phase.generate])


def shared(name: str) -> Path:
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not here (the shared data folder sits beside the repository)")
    return path


def python_block(document: Path, after: str = "") -> str:
    """The first ```python block of ``document`` (a README or a page of docs/) after the
    line ``after``, as a user would paste it."""
    text = document.read_text()
    found = re.search(r"```python\n(.*?)```", text[text.index(after):], re.S)
    assert found is not None, f"no python block in {document} after {after!r}"
    return found.group(1)


def run_cli(program: str, *args: str | os.PathLike[str], input: bytes | None = None,
            check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[bytes]:
    """Run an installed console script (``fastsubs-index`` / ``fastsubs-query``) for real."""
    result = subprocess.run([str(BIN / program), *map(str, args)], input=input, capture_output=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{program} {args} failed ({result.returncode}): {result.stderr.decode()}")
    return result


def children(pid: int) -> list[int]:
    """The processes ``pid`` has forked and not yet reaped."""
    with open(f"/proc/{pid}/task/{pid}/children") as stream:
        return [int(child) for child in stream.read().split()]


def run_on_a_terminal(program: str, *args: str | os.PathLike[str], timeout: float = 600) -> tuple[int, bytes]:
    """Run an installed console script with stderr a pseudo-terminal (progress lines are
    printed only there): its exit status and what it wrote there."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen([str(BIN / program), *map(str, args)], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=terminal)
    os.close(terminal)
    shown = b""
    try:
        while True:
            try:
                block = os.read(controller, 65536)
            except OSError:  # EIO: the program closed its end
                break
            if not block:
                break
            shown += block
    finally:
        os.close(controller)
    return process.wait(timeout=timeout), shown.replace(b"\r\n", b"\n")


@pytest.fixture(scope="session")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kn4-small (5K words) compiled once per test session."""
    target = tmp_path_factory.mktemp("indexes") / "kn4-small.fsidx"
    fastsubs.build_index(shared("kn4-small.arpa.gz"), target)
    return target


@pytest.fixture(scope="session")
def tiny_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hand-written golden model."""
    target = tmp_path_factory.mktemp("indexes") / "tiny.fsidx"
    fastsubs.build_index(TEST_DATA / "tiny.arpa", target)
    return target
