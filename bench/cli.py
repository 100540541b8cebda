"""``fastsubs-bench``: the measurement commands, a thin typer layer.

``complexity`` is the paper's figure (:mod:`fastsubs.bench.complexity`); ``synth`` writes
big synthetic ARPA models for measuring the index builder (:mod:`fastsubs.bench.synth`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from fastsubs.bench import complexity
from fastsubs.cli.support import run_reporting_errors, single_threaded_blas, version_option

single_threaded_blas()  # before anything imports numpy

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Measurements of fastsubs' search and build.", no_args_is_help=True)

app.command(name="complexity", help=complexity.HELP)(complexity.complexity)


@app.command(help="""Write a synthetic ARPA model of any size, for measuring the index builder.

\b
Its shape is a real model's: n-grams per order in the ratios of kn4-64k, Zipf-like
unigram probabilities, a few contexts with thousands of continuations and most with
one or two, back-off weights of both signs, every prefix of an n-gram an n-gram.
Written as it is made, in bounded memory (~135 MB at 512K words, whatever --ngrams);
the same arguments give the same bytes.  OUT ending in .gz is gzip-compressed.
Example (a model of the paper's scale):
  fastsubs-bench synth synth-100m.arpa.gz --ngrams 100M --order 4 --vocab 512K
""")
def synth(
    output: Path = typer.Argument(..., metavar="OUT", help="The model to write (.gz: gzip-compressed)."),
    ngrams: str = typer.Option(..., "--ngrams", metavar="COUNT",
                               help="N-grams of all orders together; K, M, G: thousand, million, billion "
                                    "(e.g. 100M)."),
    order: int = typer.Option(4, "--order", help="The model's highest order (2 or more)."),
    vocab: Optional[str] = typer.Option(None, "--vocab", metavar="COUNT",
                                        help="Unigrams, <unk> <s> </s> included (e.g. 512K; default: kn4-64k's "
                                             "share of --ngrams).  The other orders share the rest."),
    seed: int = typer.Option(1, "--seed", min=0, max=2**64 - 1, help="Another seed, another model of the same shape."),
) -> None:
    def run() -> None:
        from fastsubs.bench.arpa_text import synthesize
        from fastsubs.bench.synth import order_counts, parse_count

        counts = order_counts(parse_count(ngrams, "--ngrams"), order,
                              None if vocab is None else parse_count(vocab, "--vocab"))
        summary = synthesize(output, counts, seed)
        per_order = " / ".join(f"{count:,}" for count in counts)
        print(f"wrote {output}: {sum(counts):,} n-grams ({per_order}), {summary.bytes:,} bytes "
              f"in {summary.seconds:.1f} s", file=sys.stderr)

    run_reporting_errors("fastsubs-bench", run)


@app.callback()
def _commands(version: bool = version_option("fastsubs-bench")) -> None:
    """Keeps each measurement a subcommand."""


def main() -> None:
    app(prog_name="fastsubs-bench")
