"""``fastsubs-index``: build an index from an ARPA model, show what an index holds, verify it.

A thin layer over :mod:`fastsubs.indexer.build`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from fastsubs import origin
from fastsubs.cli.support import run_reporting_errors, single_threaded_blas, version_option
from fastsubs.pipeline.processes import usable_cores

single_threaded_blas()  # before anything imports numpy

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Compile ARPA language models into fastsubs indexes.", no_args_is_help=True)


@app.callback()
def _commands(version: bool = version_option("fastsubs-index")) -> None:
    """The options of fastsubs-index itself (--version), before any command."""


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
    force: bool = typer.Option(False, "--force",
                               help="Replace an existing index at the output path (never anything else)."),
    quiet: bool = typer.Option(False, "-q", "--quiet",
                               help="No progress lines on stderr (there are none unless stderr is a terminal)."),
    jobs: Optional[int] = typer.Option(None, "-j", "--jobs", min=1,
                                       help="Processes that sort and encode the n-grams, beside the one that reads "
                                            "the model and writes the index (default: one per core)."),
    memory: str = typer.Option("1G", "--memory", metavar="SIZE",
                               help="Memory the build may use, all its processes together (e.g. 2G, 800M; "
                                    "default 1G); any model builds within it (its n-grams are sorted on disk in "
                                    "runs that fit)."),
) -> None:
    from fastsubs.errors import IndexExistsError
    from fastsubs.indexer.build import build_index

    limit = _size(memory)
    if limit is None:
        raise typer.BadParameter(f"expected a size such as 2G or 800M (at least 64M), found {memory!r}",
                                 param_hint="--memory")
    workers = jobs or usable_cores()

    started = time.monotonic()
    # Progress is for a person watching; a log or a pipe gets the closing summary only.
    show_progress = not quiet and sys.stderr.isatty()

    def progress(message: str) -> None:
        if show_progress:
            print(f"[{time.monotonic() - started:7.1f}s] {message}", file=sys.stderr, flush=True)

    def build_speaking_of_the_flag():
        try:
            return build_index(model, output, force=force, progress=progress, jobs=workers, memory=limit)
        except IndexExistsError as error:
            raise IndexExistsError(error.path, flag="--force", appeared=error.appeared) from None

    summary = run_reporting_errors("fastsubs-index", build_speaking_of_the_flag)
    counts = ", ".join(f"{n:,} {order}-grams" for order, n in enumerate(summary.counts, start=1))
    print(f"built {summary.index}: {counts}; {summary.index_bytes / 2**20:.1f} MiB in {summary.seconds:.1f} s",
          file=sys.stderr)


@app.command(help="""Say what an index holds: the model it was built from, its order, n-grams and
vocabulary, its size per order, and its build.  With --json, all of its metadata as JSON.

\b
Examples:
  fastsubs-index info model.fsidx
  fastsubs-index info model.fsidx --json
""")
def info(
    index: Path = typer.Argument(..., help="Index directory."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole metadata as JSON (for programs)."),
) -> None:
    from fastsubs.core import Core

    def show() -> None:
        with Core(index) as opened:
            meta = opened.meta
        print(json.dumps(meta, indent=2, sort_keys=True) if as_json else described(index, meta))

    run_reporting_errors("fastsubs-index", show)


def described(index: Path, meta: dict) -> str:
    """The lines ``fastsubs-index info`` shows a person: what the metadata says, in words."""
    mib = 2 ** 20
    source, build = meta.get("source", {}), meta.get("build", {})
    on_disk = sum(f.stat().st_size for f in index.iterdir() if f.is_file())
    parts = {part["part"]: part for part in meta.get("sizes", [])}
    # bytes per n-gram: what an index of a bigger model will take, order by order
    size = f"{on_disk / mib:,.1f} MiB ({on_disk / max(sum(meta['counts']), 1):,.1f} B/n-gram)"
    if parts:
        size += ": " + ", ".join(f"{name} {part['pages'] / mib:,.1f} MiB "
                                 f"({part['pages'] / max(part['ngrams'], 1):,.1f} B/n-gram)"
                                 for name, part in parts.items() if name != "arrays")
        size += f", the vocabulary's arrays {parts['arrays']['pages'] / mib:,.1f} MiB" if "arrays" in parts else ""
    words = f"{meta['vocab_size']:,} words, " + ("<unk> among them" if meta.get("has_unk") else "no <unk>")
    return "\n".join([
        f"{index}: a fastsubs index (format {meta.get('format_version')})",
        f"model:       {source.get('name')} ({source.get('size', 0):,} bytes, sha256 {source.get('sha256')})",
        f"order:       {meta['order']}",
        "n-grams:     " + ", ".join(f"{n:,} {m}-grams" for m, n in enumerate(meta["counts"], start=1)),
        f"vocabulary:  {words} ({meta.get('id_bytes')}-byte ids)",
        f"size:        {size}",
        f"built:       {build.get('built_at')} by fastsubs "
        f"{origin.spelled(build.get('fastsubs'), build.get('fastsubs_commit'))} (Python {build.get('python')})",
        f"read by:     fastsubs {origin.describe()}",
    ])


@app.command(help="""Check an index completely: every record's checksum and every pattern field by field,
and (given the model) sampled n-grams against the ARPA file.  Exit status 1 if anything is wrong.
When stderr is a terminal, a line says each part as it is done.

\b
Examples:
  fastsubs-index verify model.fsidx
  fastsubs-index verify model.fsidx model.arpa.gz --samples 5000
""")
def verify(
    index: Path = typer.Argument(..., help="Index directory."),
    model: Optional[Path] = typer.Argument(None, help="The ARPA model it was built from (optional)."),
    samples: int = typer.Option(1000, "--samples", min=1, help="N-grams per order to compare with the model."),
) -> None:
    from fastsubs.indexer.verify import verify_index

    show_progress = sys.stderr.isatty()  # as for build: a person watching, not a log

    def progress(message: str) -> None:
        if show_progress:
            print(message, file=sys.stderr, flush=True)

    report = run_reporting_errors("fastsubs-index", lambda: verify_index(index, model, samples, progress))
    for problem in report.problems:
        print(f"fastsubs-index: {index}: {problem}", file=sys.stderr)
    summary = (f"{report.records:,} records holding {report.patterns:,} patterns checked"
               + (f", {report.sampled_ngrams:,} n-grams compared with {model}" if model else ""))
    if report.problems:
        print(f"fastsubs-index: {index}: DAMAGED ({len(report.problems)} problem(s) shown); {summary}", file=sys.stderr)
        raise typer.Exit(1)
    print(f"{index}: OK; {summary}")


def _size(text: str) -> int | None:
    """Bytes of a size such as ``2G``, ``800M`` or ``65536K`` (at least 64 MiB), or None."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    number, unit = (text[:-1], text[-1].upper()) if text[-1:].upper() in units else (text, "")
    try:
        value = float(number) * units.get(unit, 1)
    except ValueError:
        return None
    return int(value) if value >= 64 << 20 else None


def main() -> None:
    app(prog_name="fastsubs-index")


if __name__ == "__main__":
    main()
