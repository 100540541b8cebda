"""``fastsubs-index``: build an index from an ARPA model, and show what an index holds.

A thin layer over :mod:`fastsubs.indexer.build`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from fastsubs.cli_support import run_reporting_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Compile ARPA language models into fastsubs indexes.", no_args_is_help=True)


@app.command(help="""Build the index of an ARPA model (plain, .gz, .bz2 or .xz).

\b
Examples:
  fastsubs-index build model.arpa.gz                # writes model.fsidx beside it
  fastsubs-index build model.arpa.gz -o /data/model.fsidx --force
""")
def build(
    model: Path = typer.Argument(..., help="The ARPA model file."),
    output: Optional[Path] = typer.Option(None, "-o", "--output",
                                          help="Index directory to write (default: MODEL with .fsidx)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing index at the output path."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No progress lines on stderr."),
) -> None:
    from fastsubs.indexer.build import build_index

    started = time.monotonic()

    def progress(message: str) -> None:
        if not quiet:
            print(f"[{time.monotonic() - started:7.1f}s] {message}", file=sys.stderr, flush=True)

    summary = run_reporting_errors("fastsubs-index", lambda: build_index(model, output, force=force,
                                                                         progress=progress))
    counts = ", ".join(f"{n:,} {order}-grams" for order, n in enumerate(summary.counts, start=1))
    print(f"built {summary.index}: {counts}; {summary.index_bytes / 2**20:.1f} MiB in {summary.seconds:.1f} s",
          file=sys.stderr)


@app.command(help="""Print the metadata of an index as JSON.

\b
Example:
  fastsubs-index info model.fsidx
""")
def info(index: Path = typer.Argument(..., help="Index directory.")) -> None:
    from fastsubs.query.index import Index

    def show() -> None:
        with Index(index) as opened:
            print(json.dumps(opened.meta, indent=2, sort_keys=True))

    run_reporting_errors("fastsubs-index", show)


def main() -> None:
    app(prog_name="fastsubs-index")


if __name__ == "__main__":
    sys.exit(main())
