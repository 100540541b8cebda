"""``fastsubs-bench complexity``: the paper's figure — search effort against K and V.

The paper (Fig. 2) plots the mean number of iterations of its search against K on
log-log axes, one curve per vocabulary size (16K to 512K), with the exhaustive cost as
a dotted line, and reports growth as about K^0.59 at V = 64K.  This command runs the
search over a text for several K on one or more indexes (say, one model per vocabulary
size), counts the candidates evaluated per position, fits each log-log slope by least
squares (and, over all the indexes, the exponents of K and V of the paper's K^0.59·V^0.41),
prints the table (a column per index) and draws the curves to a PNG
(matplotlib: ``pip install '.[plot]'`` in the clone).  The command itself is registered
in :mod:`fastsubs.bench.cli`.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import typer

from fastsubs.cli.support import run_reporting_errors, single_threaded_blas
from fastsubs.errors import FastsubsError, missing_extra

single_threaded_blas()  # before anything imports numpy

DEFAULT_KS = "1,3,10,30,100,300,1000"


@dataclass(frozen=True)
class EffortCurve:
    """The effort of one index: its vocabulary size and a point per K."""

    name: str
    vocab_size: int
    points: list[EffortPoint]


@dataclass(frozen=True)
class EffortPoint:
    """Mean candidates evaluated per position when listing ``k`` substitutes."""

    k: int
    candidates: float


def measure_effort(index: Path, text: Path, ks: list[int], lines: int) -> EffortCurve:
    """Run the search over the first ``lines`` lines of ``text`` for every K."""
    from fastsubs.core import Core
    from fastsubs.limits import Limits
    from fastsubs.tokens import sentence_tokens, tokenize

    with open(text, "rb") as stream:
        sentences = [sentence_tokens(tokenize(line)) for line in islice(stream, lines)]
    with Core(index) as opened:
        points = []
        for k in ks:
            before = opened.stats
            for tokens in sentences:  # every position, as index.sentence(tokens, n=k) searches them
                opened.search(opened.sentence_ids(tokens), 1, len(tokens) + 2, Limits(k))
            done = opened.stats.since(before)
            points.append(EffortPoint(k, done.evaluated / max(done.positions, 1)))
        return EffortCurve(index.name, opened.vocab_size, points)


def fitted_slope(points: list[EffortPoint]) -> float:
    """Least-squares slope of log(candidates) against log(K)."""
    xs = [math.log(p.k) for p in points]
    ys = [math.log(p.candidates) for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


@dataclass(frozen=True)
class EffortFit:
    """Candidates per position as ``K^k_exponent · V^v_exponent`` (times a constant): the
    form of the paper's K^0.59·V^0.41."""

    k_exponent: float
    v_exponent: float


def fitted_exponents(curves: list[EffortCurve]) -> EffortFit | None:
    """Least squares of log(candidates) on log(K) and log(V) over every point of every curve.

    One slope per curve says how effort grows with K; how it grows with V needs the curves
    together.  None when they hold fewer than two vocabulary sizes (V's exponent is then
    undetermined); each curve holds two K or more, as the command requires.
    """
    if len({curve.vocab_size for curve in curves}) < 2:
        return None
    rows = [(math.log(p.k), math.log(curve.vocab_size), math.log(p.candidates))
            for curve in curves for p in curve.points]
    means = [sum(row[i] for row in rows) / len(rows) for i in range(3)]
    centred = [[value - mean for value, mean in zip(row, means)] for row in rows]
    skk = sum(k * k for k, _, _ in centred)
    svv = sum(v * v for _, v, _ in centred)
    skv = sum(k * v for k, v, _ in centred)
    sky = sum(k * y for k, _, y in centred)
    svy = sum(v * y for _, v, y in centred)
    determinant = skk * svv - skv * skv
    return EffortFit((sky * svv - svy * skv) / determinant, (svy * skk - sky * skv) / determinant)


def pyplot() -> Any:
    """matplotlib's pyplot, drawing to files; FastsubsError saying how to install it if missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise missing_extra("fastsubs-bench complexity needs matplotlib", "plot") from None
    return plt


def plot(curves: list[EffortCurve], title: str, png: Path) -> None:
    """Log-log plot: per index its measured points joined by a line, labelled with V and
    the fitted slope, and its exhaustive cost V as a dotted line in the same colour."""
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(5.5, 4.2), dpi=110)
    for curve in curves:
        ks = [p.k for p in curve.points]
        line, = axes.loglog(ks, [p.candidates for p in curve.points], "o-", markersize=3,
                            label=f"V = {curve.vocab_size:,} (slope {fitted_slope(curve.points):.2f})")
        axes.axhline(curve.vocab_size, linestyle=":", linewidth=1, color=line.get_color())
    axes.set_xlabel("K (substitutes listed)")
    axes.set_ylabel("candidates evaluated per position")
    axes.set_title(title, fontsize=9)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, title="dotted: exhaustive cost V", title_fontsize=7)
    figure.tight_layout()
    figure.savefig(png)
    plt.close(figure)


def table(curves: list[EffortCurve]) -> list[str]:
    """The rows of the printed table: K, then candidates per position for each index."""
    rows = ["K       " + "".join(f"{curve.name:>18}" for curve in curves),
            "V       " + "".join(f"{curve.vocab_size:>18,}" for curve in curves)]
    for i, point in enumerate(curves[0].points):
        rows.append(f"{point.k:<8}" + "".join(f"{curve.points[i].candidates:>18,.1f}" for curve in curves))
    rows.append("slope   " + "".join(f"{fitted_slope(curve.points):>18.3f}" for curve in curves))
    fit = fitted_exponents(curves)
    if fit is not None:
        rows.append(f"fit     K^{fit.k_exponent:.3f} V^{fit.v_exponent:.3f} (every point of every index)")
    return rows


HELP = """Plot candidates evaluated per position against K (log-log), one curve per index.

\b
Arguments: one or more index directories, then the text.  Prints a row per K with the
candidates evaluated per position for each index, each index's log-log slope and, for
indexes of two or more vocabulary sizes, the exponents of K and V fitted to all of them.
Example (the paper's figure, one model per vocabulary size):
  fastsubs-bench complexity kn4-16k.fsidx kn4-64k.fsidx kn4-256k.fsidx heldout-dev.txt \\
      --ks 1,10,100,1000,16384 -o complexity.png
"""


def complexity(
    paths: list[Path] = typer.Argument(..., metavar="INDEX... TEXT",
                                       help="Index directories, then the text (one sentence per line)."),
    lines: int = typer.Option(300, "--lines", min=1, help="Use the first LINES lines of the text."),
    ks: str = typer.Option(DEFAULT_KS, "--ks", help="Comma-separated values of K."),
    output: Path = typer.Option(Path("complexity.png"), "-o", "--output", help="PNG file to write."),
) -> None:
    def run() -> None:
        pyplot()  # a missing extra is said before the measurement, not after it
        if len(paths) < 2:
            raise FastsubsError("give one or more index directories, then the text")
        *indexes, text = paths
        try:
            values = sorted({int(k) for k in ks.split(",")})
        except ValueError:
            values = []
        if len(values) < 2 or values[0] < 1:
            raise FastsubsError("--ks needs at least two values of K, all >= 1")
        curves = [measure_effort(index, text, values, lines) for index in indexes]
        print("\n".join(table(curves)))
        plot(curves, f"{lines} lines of {text.name}", output)
        print(f"wrote {output}", file=sys.stderr)

    run_reporting_errors("fastsubs-bench", run)
