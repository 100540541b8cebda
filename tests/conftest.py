"""Shared fixtures: real indexes built from real model files, and the installed CLIs.

The project's data lives in ``../shared/data`` beside the repository (CI lays it there
too); tests needing the large benchmark model are marked ``slow``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fastsubs

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
REFERENCE = SHARED_DATA / "reference"
TEST_DATA = Path(__file__).resolve().parent / "data"
BIN = Path(sys.executable).parent


def shared(name: str) -> Path:
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not here (the shared data folder sits beside the repository)")
    return path


def run_cli(program: str, *args: str | os.PathLike[str], input: bytes | None = None,
            check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[bytes]:
    """Run an installed console script (``fastsubs-index`` / ``fastsubs-query``) for real."""
    result = subprocess.run([str(BIN / program), *map(str, args)], input=input, capture_output=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{program} {args} failed ({result.returncode}): {result.stderr.decode()}")
    return result


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
