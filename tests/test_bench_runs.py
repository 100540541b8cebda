"""The benchmarks (``python -m fastsubs.bench.*``) run to their end on the demo index.

No figure is asserted (they report; the machine sets them): each is run as its docs say, on
a few lines, and must exit 0 with its rows.  They call the package's internals (the core's
open index, the API, the command line) and broke once unseen when those moved: the API's
threads row asked the core for ``batch()``, which only the public index has.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import demo_text


def bench(module: str, *args: str | Path, cwd: Path) -> str:
    result = subprocess.run([sys.executable, "-m", f"fastsubs.bench.{module}", *map(str, args)],
                            capture_output=True, text=True, cwd=cwd, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def text(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bench") / "text.txt"
    path.write_bytes(demo_text(40))
    return path


def test_formats_runs_every_format_and_the_apis_threads(demo_index: Path, text: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    out = bench("formats", "--index", demo_index, "--input", text, "--lines", "40", "--repeats", "1",
                "--workers", "1", "--threads", "1", "2", cwd=tmp_path)
    assert "bytes per position" in out and "2 threads:" in out


def test_scaling_runs_workers_and_threads(demo_index: Path, text: Path, tmp_path: Path) -> None:
    out = bench("scaling", "--index", demo_index, "--text", text, "--workers", "1", "--threads", "1,2",
                "--repeats", "1", cwd=tmp_path)
    assert "--workers  1:" in out and "2 threads, one index:" in out


def test_frames_runs_both_ways(demo_index: Path, text: Path, tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    out = bench("frames", "--index", demo_index, "--text", text, "--repeats", "1", cwd=tmp_path)
    assert "index.frame()" in out


def test_versions_runs_each_row_for_each_build(demo_index: Path, text: Path, tmp_path: Path) -> None:
    """Two builds (here the same, this Python's fastsubs on its path twice): a warm row per K
    and the first pass, each build's median as a fraction of the first build's."""
    out = bench("versions", "--build", f"a=:{demo_index}", "--build", f"b=:{demo_index}", "--held-out", text,
                "--corpus", text, "--ks", "10,p0.9", "--first-n", "10", "--rounds", "1", cwd=tmp_path)
    rows = [line for line in out.splitlines() if "(1.000)" in line]
    assert [row.split(":")[0] for row in rows] == ["warm batch(), K = 10, 40 lines", "warm batch(), -p 0.9, 40 lines",
                                                   "first pass, fastsubs-query -n 10 over 40 lines"], out
    assert all(", b " in row for row in rows), out
