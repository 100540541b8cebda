"""fastsubs-bench complexity: the paper's effort-against-K figure, one curve per index."""

from __future__ import annotations

from pathlib import Path

import pytest

import fastsubs
from conftest import demo_text, run_cli
from fastsubs.bench.complexity import EffortCurve, EffortPoint, fitted_exponents, fitted_slope


def test_fitted_slope_recovers_a_power_law() -> None:
    points = [EffortPoint(k, 7.0 * k ** 0.59) for k in (1, 10, 100, 1000)]
    assert fitted_slope(points) == pytest.approx(0.59)


def power_law_curves(sizes: tuple[int, ...]) -> list[EffortCurve]:
    """Curves whose candidates are 3·K^0.59·V^0.41 exactly, one per vocabulary size."""
    return [EffortCurve(f"v{size}", size, [EffortPoint(k, 3.0 * k ** 0.59 * size ** 0.41)
                                           for k in (1, 10, 100, 1000)])
            for size in sizes]


def test_fitted_exponents_recover_the_papers_power_law() -> None:
    fit = fitted_exponents(power_law_curves((16_000, 64_000, 256_000)))
    assert fit is not None
    assert (fit.k_exponent, fit.v_exponent) == (pytest.approx(0.59), pytest.approx(0.41))


def test_one_vocabulary_size_fits_no_exponent_of_v() -> None:
    assert fitted_exponents(power_law_curves((64_000, 64_000))) is None


@pytest.fixture()
def text(tmp_path: Path) -> Path:
    path = tmp_path / "text.txt"
    path.write_bytes(demo_text(20))
    return path


def vocab_size(index: Path) -> int:
    with fastsubs.open_index(index) as opened:
        return opened.vocab_size


def test_one_column_per_index_and_a_png(demo_index: Path, tiny_index: Path, text: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "effort.png"
    result = run_cli("fastsubs-bench", "complexity", demo_index, tiny_index, text,
                     "--lines", "5", "--ks", "100,1,10", "-o", png)
    rows = [row.split() for row in result.stdout.decode().splitlines()]
    assert rows[0] == ["K", demo_index.name, tiny_index.name]
    sizes = [vocab_size(demo_index), vocab_size(tiny_index)]
    assert rows[1] == ["V"] + [f"{size:,}" for size in sizes]
    assert [row[0] for row in rows[2:5]] == ["1", "10", "100"]  # K ascending
    for column, size in enumerate(sizes, start=1):
        effort = [float(row[column].replace(",", "")) for row in rows[2:5]]
        # every search scores at least min(K, V - 1) words, and never more than V
        assert all(min(k, size - 1) <= e <= size for k, e in zip((1, 10, 100), effort)), effort
        assert effort == sorted(effort)
    assert rows[5][0] == "slope" and len(rows[5]) == 3
    assert rows[6][0] == "fit" and len(rows) == 7  # two vocabulary sizes: V's exponent too
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_text_alone_is_refused_in_one_line(text: Path) -> None:
    pytest.importorskip("matplotlib")
    result = run_cli("fastsubs-bench", "complexity", text, check=False)
    assert result.returncode != 0
    assert result.stderr.decode().strip().splitlines() == [
        "fastsubs-bench: error: give one or more index directories, then the text"]


def test_bad_ks_are_refused_in_one_line(demo_index: Path, text: Path) -> None:
    pytest.importorskip("matplotlib")
    result = run_cli("fastsubs-bench", "complexity", demo_index, text, "--ks", "1,ten",
                     check=False)
    assert result.returncode != 0
    assert result.stderr.decode().strip().splitlines() == [
        "fastsubs-bench: error: --ks needs at least two values of K, all >= 1"]
