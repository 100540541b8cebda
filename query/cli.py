"""``fastsubs-query``: substitutes for every word of a text, in the original tool's format.

A thin layer over :mod:`fastsubs.query.runner`; no search logic lives here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from fastsubs.cli_support import run_reporting_errors

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


HELP = """Print the most likely substitutes of every word of INPUT (one sentence per line).

Output (as the original ai-ku/fastsubs tool): a line per token and one for </s>,
"word<TAB>sub1 lp1<TAB>sub2 lp2 ...", best first, log10 scores with 8 decimals.
Without -n or -p this lists 100 substitutes (the original listed the whole
vocabulary: pass -n with the vocabulary size for that).

\b
Examples:
  fastsubs-query demo.fsidx -n 10 < sentences.txt
  fastsubs-query demo.fsidx -p 0.9 -i corpus.txt.gz -o subs.txt.gz
  fastsubs-query demo.fsidx -t -z -n 20 < records.tsv
  fastsubs-query demo.fsidx --workers 2 -i corpus.txt -o subs.txt
"""


@app.command(help=HELP)
def query(
    index: Path = typer.Argument(..., help="Index directory made by 'fastsubs-index build'."),
    count: Optional[int] = typer.Option(None, "-n", "--count", min=1,
                                        help="List at most this many substitutes (capped at vocabulary size - 1)."),
    probability: Optional[float] = typer.Option(
        None, "-p", "--probability", min=0.0, max=1.0,
        help="Stop once the listed substitutes surely hold this share of the probability mass."),
    normalize: bool = typer.Option(False, "-z", "--normalize",
                                   help="Print p/sum(p) over the listed substitutes instead of log10 scores."),
    targets: bool = typer.Option(False, "-t", "--targets",
                                 help="Input records are name<TAB>id<TAB>index<TAB>text: substitutes of one token."),
    skip_bad_records: bool = typer.Option(False, "--skip-bad-records",
                                          help="With -t: skip a malformed record with a warning instead of stopping."),
    input_path: Optional[Path] = typer.Option(None, "-i", "--input", help="Read from this file (.gz/.bz2/.xz ok)."),
    output_path: Optional[Path] = typer.Option(None, "-o", "--output", help="Write to this file (.gz/.bz2/.xz ok)."),
    workers: int = typer.Option(1, "--workers", "-w", min=1, help="Worker processes (each opens the index)."),
    stats: bool = typer.Option(False, "--stats", help="Print search statistics on stderr at the end."),
) -> None:
    from fastsubs.query.runner import execute  # the search stack loads only once arguments are valid

    run_reporting_errors("fastsubs-query", lambda: execute(
        index, count=count, probability=probability, normalize=normalize, targets=targets,
        skip_bad_records=skip_bad_records, input_path=input_path, output_path=output_path,
        workers=workers, stats=stats))


def main() -> None:
    app(prog_name="fastsubs-query")


if __name__ == "__main__":
    sys.exit(main())
