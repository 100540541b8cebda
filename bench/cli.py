"""``fastsubs-bench``: the measurement commands, a thin typer layer.

``complexity`` is the paper's figure (:mod:`fastsubs.bench.complexity`).
"""

from __future__ import annotations

import typer

from fastsubs.bench import complexity
from fastsubs.cli_support import single_threaded_blas, version_option

single_threaded_blas()  # before anything imports numpy

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Measurements of fastsubs' search.", no_args_is_help=True)

app.command(name="complexity", help=complexity.HELP)(complexity.complexity)


@app.callback()
def _commands(version: bool = version_option("fastsubs-bench")) -> None:
    """Keeps each measurement a subcommand."""


def main() -> None:
    app(prog_name="fastsubs-bench")
