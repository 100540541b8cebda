"""``fastsubs-bench complexity``: the paper's figure — search effort against K.

The paper (Fig. 2) plots the mean number of candidates whose score is computed
exactly against K on log-log axes and reports growth as about K^0.59 at V = 64K.
This command runs the search over a text for several K, counts the candidates
evaluated per position, fits the log-log slope by least squares, prints the table
and draws the plot to a PNG (matplotlib: ``pip install fastsubs[plot]``).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import typer

from fastsubs.cli_support import run_reporting_errors, version_option
from fastsubs.errors import FastsubsError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Measurements of fastsubs' search.", no_args_is_help=True)

DEFAULT_KS = "1,3,10,30,100,300,1000"


@dataclass(frozen=True)
class EffortPoint:
    """Mean candidates evaluated per position when listing ``k`` substitutes."""

    k: int
    candidates: float


def measure_effort(index: Path, text: Path, ks: list[int], lines: int) -> list[EffortPoint]:
    """Run the search over the first ``lines`` lines of ``text`` for every K."""
    from fastsubs.query.engine import Engine
    from fastsubs.query.search import Limits
    from fastsubs.query.sentences import tokenize

    with open(text, "rb") as stream:
        sentences = [tokenize(line) for line in islice(stream, lines)]
    engine = Engine(index)
    try:
        points = []
        for k in ks:
            before = engine.searcher.stats.evaluated, engine.searcher.stats.positions
            for tokens in sentences:
                engine.sentence(tokens, Limits(k))
            evaluated = engine.searcher.stats.evaluated - before[0]
            positions = engine.searcher.stats.positions - before[1]
            points.append(EffortPoint(k, evaluated / max(positions, 1)))
        return points
    finally:
        engine.close()


def fitted_slope(points: list[EffortPoint]) -> float:
    """Least-squares slope of log(candidates) against log(K)."""
    xs = [math.log(p.k) for p in points]
    ys = [math.log(p.candidates) for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def pyplot() -> Any:
    """matplotlib's pyplot, drawing to files; FastsubsError saying how to install it if missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FastsubsError("plotting needs matplotlib: pip install 'fastsubs[plot]'") from None
    return plt


def plot(points: list[EffortPoint], slope: float, title: str, png: Path) -> None:
    """Log-log plot of the measured points and the fitted line."""
    plt = pyplot()
    ks = [p.k for p in points]
    ys = [p.candidates for p in points]
    mx = sum(math.log(k) for k in ks) / len(ks)
    my = sum(math.log(y) for y in ys) / len(ys)
    fit = [math.exp(my + slope * (math.log(k) - mx)) for k in ks]
    figure, axes = plt.subplots(figsize=(5, 4), dpi=120)
    axes.loglog(ks, ys, "o", label="measured")
    axes.loglog(ks, fit, "-", label=f"fit: slope {slope:.2f}")
    axes.set_xlabel("K (substitutes listed)")
    axes.set_ylabel("candidates evaluated per position")
    axes.set_title(title, fontsize=9)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(png)
    plt.close(figure)


@app.command(help="""Plot candidates evaluated per position against K (log-log) with the fitted slope.

\b
Example:
  fastsubs-bench complexity kn4-64k.fsidx heldout-dev.txt --lines 300 -o complexity.png
""")
def complexity(
    index: Path = typer.Argument(..., help="Index directory."),
    text: Path = typer.Argument(..., help="Text, one sentence per line."),
    lines: int = typer.Option(300, "--lines", min=1, help="Use the first LINES lines of TEXT."),
    ks: str = typer.Option(DEFAULT_KS, "--ks", help="Comma-separated values of K."),
    output: Path = typer.Option(Path("complexity.png"), "-o", "--output", help="PNG file to write."),
) -> None:
    def run() -> None:
        pyplot()  # a missing extra is said before the measurement, not after it
        values = sorted({int(k) for k in ks.split(",")})
        if len(values) < 2 or values[0] < 1:
            raise FastsubsError("--ks needs at least two values of K, all >= 1")
        points = measure_effort(index, text, values, lines)
        slope = fitted_slope(points)
        for point in points:
            print(f"K={point.k:<6} candidates/position={point.candidates:,.1f}")
        print(f"log-log slope {slope:.3f}")
        plot(points, slope, f"{index.name}: {lines} lines of {text.name}", output)
        print(f"wrote {output}", file=sys.stderr)

    run_reporting_errors("fastsubs-bench", run)


@app.callback()
def _commands(version: bool = version_option("fastsubs-bench")) -> None:
    """Keeps 'complexity' a subcommand (room for more measurements)."""


def main() -> None:
    app(prog_name="fastsubs-bench")
