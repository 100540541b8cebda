"""``fastsubs-query``: substitutes for every word of a text, in the original tool's format.

A thin layer over :mod:`fastsubs.query.run`; no search logic lives here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from fastsubs.cli.support import run_reporting_errors, single_threaded_blas, version_option

single_threaded_blas()  # before anything imports numpy

if TYPE_CHECKING:
    from fastsubs.options import QueryOptions

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


HELP = """Print the most likely substitutes of every word of the input (stdin, or -i FILE;
one sentence per line).

Output (as the original ai-ku/fastsubs tool): a line per token and one for </s>,
"word<TAB>sub1 lp1<TAB>sub2 lp2 ...", best first, log10 scores with 8 decimals.
Without -n or -p this lists 100 substitutes (the original listed the whole
vocabulary: pass -n with the vocabulary size for that).

With -o OUT the output goes to OUT.partial (its progress to OUT.partial.json) and
becomes OUT only when the whole input is done, with OUT.json beside it (what
produced it: fastsubs version, model, options, input); an interrupted run (Ctrl-C,
SIGTERM, kill -9, damaged input) is continued by the same command with --resume.
One run writes OUT at a time (it locks OUT.lock): a second one refuses.  Lines over
1 MiB are kept in $TMPDIR while they are searched.
With --format parquet, OUT is a directory of Parquet files (a dataset that pandas,
Dask and DuckDB read), written the same way.

\b
Examples:
  fastsubs-query demo.fsidx -n 10 < sentences.txt
  fastsubs-query demo.fsidx -p 0.9 -i corpus.txt.gz -o subs.txt.gz
  fastsubs-query demo.fsidx -p 0.9 -i corpus.txt.gz -o subs.txt.gz --resume
  fastsubs-query demo.fsidx -t -z -n 20 < records.tsv
  fastsubs-query demo.fsidx --workers 2 -i corpus.txt -o subs.txt
  fastsubs-query demo.fsidx --no-eos --format jsonl < sentences.txt
  fastsubs-query demo.fsidx --format parquet -i corpus.txt.gz -o subs/ --workers 2
  fastsubs-query demo.fsidx -n 100 --sample 20 --seed 1 < sentences.txt
  fastsubs-query demo.fsidx -t -n 100 --exclude '</s>' --exclude-from punct.txt -f jsonl < records.tsv
  fastsubs-query demo.fsidx --dask tcp://scheduler:8786 -i 'corpus/*.txt' -o subs/
"""


@app.command(help=HELP)
def query(
    index: Path = typer.Argument(..., help="Index directory made by 'fastsubs-index build'."),
    count: Optional[int] = typer.Option(None, "-n", "--count", min=1,
                                        help="List at most this many substitutes (capped at vocabulary size - 1, "
                                             "with a note on stderr)."),
    probability: Optional[float] = typer.Option(
        None, "-p", "--probability", min=0.0, max=1.0, metavar="P",
        help="Stop after the L-th substitute once S/(S + p(V - L)) >= P (the original tool's rule), S being "
             "the listed substitutes' summed probability (10^lp), p the last one's and V the vocabulary size: "
             "the share they would hold if every word not listed were as likely as the last one listed.  Lists "
             "many more than the fewest substitutes that hold share P."),
    normalize: bool = typer.Option(False, "-z", "--normalize",
                                   help="Print p/sum(p) over the listed substitutes instead of log10 scores."),
    targets: bool = typer.Option(False, "-t", "--targets",
                                 help="Input records are name<TAB>id<TAB>index<TAB>text: substitutes of one token."),
    skip_bad_records: bool = typer.Option(False, "--skip-bad-records",
                                          help="With -t: skip a malformed record with a warning instead of stopping."),
    input_path: Optional[Path] = typer.Option(None, "-i", "--input", help="Read from this file (.gz/.bz2/.xz ok)."),
    output_path: Optional[Path] = typer.Option(None, "-o", "--output", help="Write to this file (.gz/.bz2/.xz ok)."),
    output_format: str = typer.Option("text", "--format", "-f",
                                      help="text (the original's format), jsonl (one JSON object per position; "
                                           "with --sample, one per position holding the draws) or parquet (-o "
                                           "names a directory: a dataset of a row per position; needs "
                                           "pip install '.[parquet]')."),
    no_eos: bool = typer.Option(False, "--no-eos", help="Omit the </s> position of every sentence."),
    sample: Optional[int] = typer.Option(None, "--sample", min=1,
                                         help="Print N 'word<TAB>sub' draws per position ('name<TAB>id<TAB>word"
                                              "<TAB>sub' with -t), in proportion to 10^lp over the listed "
                                              "substitutes (wordsub-n)."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**64 - 1,
                             help="Random seed for --sample (same output for any --workers)."),
    exclude: Optional[list[str]] = typer.Option(None, "--exclude", metavar="WORD",
                                                help="Never list WORD as a substitute (repeatable): the lists hold "
                                                     "the exact top K of the other words."),
    exclude_from: Optional[list[Path]] = typer.Option(None, "--exclude-from", metavar="FILE",
                                                      help="Never list the words of FILE (one per line) as "
                                                           "substitutes (repeatable)."),
    workers: int = typer.Option(1, "--workers", "-w", min=1,
                                help="Processes that search: this one and N - 1 forked; one per core is best. "
                                     "More than the cores this process may use is capped to their number, with "
                                     "a note on stderr."),
    dask: Optional[str] = typer.Option(None, "--dask", metavar="SCHEDULER",
                                       help="Run on the Dask cluster at this address: -i is a glob of input "
                                            "files, -o a directory that gets one output file per input file."),
    compress_level: Optional[int] = typer.Option(
        None, "--compress-level", metavar="LEVEL",
        help="Compression level of a .gz (1-9, default 6), .bz2 (1-9, default 9) or .xz (0-9, default 6) -o: "
             "lower is faster, higher is smaller.  The processes that search also compress."),
    resume: bool = typer.Option(False, "--resume",
                                help="Continue the interrupted run of this same command: keep the output of the "
                                     "input lines that OUT.partial already holds and search only the rest "
                                     "(needs -o; starts from the first line when there is nothing to resume)."),
    stats: bool = typer.Option(False, "--stats", help="Print search statistics on stderr at the end."),
    version: bool = version_option("fastsubs-query"),
) -> None:
    # The search stack loads only once the arguments are valid (start-up stays small).
    from fastsubs.options import FORMATS, QueryOptions
    from fastsubs.query.run import execute
    from fastsubs.query.word_lists import joined, read_word_list

    if output_format not in FORMATS:
        raise typer.BadParameter(f"expected one of {', '.join(FORMATS)}", param_hint="--format")
    excluded = run_reporting_errors("fastsubs-query", lambda: joined(
        exclude or (), *(read_word_list(path) for path in exclude_from or ())))
    options = QueryOptions(n=count, p=probability, normalize=normalize, targets=targets,
                           skip_bad_records=skip_bad_records, format=output_format, no_eos=no_eos, sample=sample,
                           seed=seed, exclude=excluded)
    if resume and output_path is None:
        raise typer.BadParameter("needs -o OUT (the output of the run to continue)", param_hint="--resume")
    if dask is not None:
        if resume:
            raise typer.BadParameter("is not available with --dask", param_hint="--resume")
        if input_path is None or output_path is None:
            raise typer.BadParameter("needs -i GLOB and -o DIRECTORY", param_hint="--dask")
        run_reporting_errors("fastsubs-query", lambda: _run_on_dask(dask, index, str(input_path), output_path,
                                                                    options, stats, count is not None))
        return
    run_reporting_errors("fastsubs-query", lambda: execute(
        index, options=options, input_path=input_path, output_path=output_path, workers=workers, stats=stats,
        resume=resume, compress_level=compress_level, count_given=count is not None))


def _run_on_dask(scheduler: str, index: Path, pattern: str, output_dir: Path, options: QueryOptions,
                 stats: bool, count_given: bool) -> None:
    from fastsubs.core import Core
    from fastsubs.query.cluster import run_files
    from fastsubs.query.run import format_stats, run_notes

    if index.is_dir():  # the workers' path: this machine may not see it
        with Core(index) as opened:
            for note in run_notes(opened, options, count_given):
                print(note, file=sys.stderr)
    totals = run_files(scheduler, str(index), pattern, output_dir, options)
    if stats:
        print(format_stats(totals), file=sys.stderr)


def main() -> None:
    app(prog_name="fastsubs-query")


if __name__ == "__main__":
    main()
