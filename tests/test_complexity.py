"""fastsubs-bench complexity: the paper's effort-against-K figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli, shared
from fastsubs.query.complexity import EffortPoint, fitted_slope


def test_fitted_slope_recovers_a_power_law() -> None:
    points = [EffortPoint(k, 7.0 * k ** 0.59) for k in (1, 10, 100, 1000)]
    assert fitted_slope(points) == pytest.approx(0.59)


def test_complexity_prints_the_table_and_writes_a_png(small_index: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "effort.png"
    result = run_cli("fastsubs-bench", "complexity", small_index, shared("heldout-dev.txt"), "--lines", "5",
                     "--ks", "1,10,100", "-o", png)
    rows = result.stdout.decode().splitlines()
    assert [row.split()[0] for row in rows[:3]] == ["K=1", "K=10", "K=100"]
    effort = [float(row.split("=")[2].replace(",", "")) for row in rows[:3]]
    assert effort == sorted(effort) and effort[0] >= 1
    assert rows[3].startswith("log-log slope ")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
