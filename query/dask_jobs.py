"""Running fastsubs on a Dask cluster: corpora that outgrow one machine.

Dask (``pip install fastsubs[dask]``) supplies the scheduler, the workers and the bags
of text partitions; fastsubs only supplies the per-partition work.  Every worker
process opens the index once, from a path it can read (a copy on each node, or one
shared read-only filesystem), and keeps it open for all the tasks it runs.

Two entry points:

* :func:`substitutes_bag` maps a ``dask.bag`` of sentences (str lines) to a bag of
  their output text, partition by partition, order kept.
* :func:`run_files` (``fastsubs-query --dask ADDRESS -i 'corpus/*.txt' -o out/``)
  processes each input file as one task and writes ``out/<file name>``; each output
  file is byte-identical to a single-machine run on that input file.
"""

from __future__ import annotations

import glob
import os
import threading
from collections.abc import Iterable
from pathlib import Path

from fastsubs.errors import FastsubsError
from fastsubs.query.engine import Engine
from fastsubs.query.records import OutputOptions
from fastsubs.query.runner import numbered_chunks, process_chunk
from fastsubs.query.search import SearchStats
from fastsubs.textio import open_binary

_engines: dict[str, Engine] = {}
# One search at a time per process: an Engine keeps scratch space (Dask may run
# several threads per worker; give workers one thread each for full speed).
_engine_lock = threading.Lock()


def _engine(index_path: str) -> Engine:
    engine = _engines.get(index_path)
    if engine is None:
        engine = _engines[index_path] = Engine(index_path)
    return engine


def _render_partition(lines: Iterable[str], index_path: str, options: OutputOptions) -> list[str]:
    encoded = [(number, line.encode("utf-8", "surrogateescape"))
               for number, line in enumerate(lines, start=1)]
    with _engine_lock:
        engine = _engine(index_path)
        return [process_chunk(engine, [item], options, "<bag>").text.decode("utf-8", "surrogateescape")
                for item in encoded]


def substitutes_bag(bag, index_path: str | os.PathLike[str], options: OutputOptions):
    """A bag with, for each sentence of ``bag``, the text ``fastsubs-query`` prints for it.

    Line numbers (for ``--format jsonl`` and ``--sample``) count within each partition.

    >>> import dask.bag as db                                   # doctest: +SKIP
    >>> lines = db.read_text("corpus/*.txt", errors="surrogateescape")
    >>> substitutes_bag(lines, "/shared/model.fsidx", OutputOptions(Limits(10))).to_textfiles("out/*.txt")
    """
    return bag.map_partitions(_render_partition, os.fspath(index_path), options)


def _process_file(job: tuple[str, str], index_path: str, options: OutputOptions) -> SearchStats:
    source, target = job
    totals = SearchStats()
    with _engine_lock, open_binary(source) as stream, open_binary(target, "wb") as out:
        engine = _engine(index_path)
        for chunk in numbered_chunks(stream):
            result = process_chunk(engine, chunk, options, source)
            out.write(result.text)
            totals.add(result.stats)
    return totals


def run_files(scheduler: str, index_path: str, pattern: str, output_dir: Path, options: OutputOptions) -> SearchStats:
    """Process every file matching ``pattern`` on the cluster at ``scheduler``; one output file each."""
    try:
        import dask.bag as db
        from distributed import Client
    except ImportError as error:
        raise FastsubsError(f"--dask needs Dask: pip install 'fastsubs[dask]' ({error})") from None
    sources = sorted(glob.glob(pattern))
    if not sources:
        raise FastsubsError(f"{pattern}: no input file matches")
    names = [os.path.basename(s) for s in sources]
    if len(set(names)) != len(names):
        raise FastsubsError(f"{pattern}: input files must have distinct names (they name the outputs)")
    output_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(os.path.abspath(s), str(output_dir.resolve() / n)) for s, n in zip(sources, names)]
    with Client(scheduler) as client:
        bag = db.from_sequence(jobs, npartitions=len(jobs))
        results = client.compute(bag.map(_process_file, os.path.abspath(index_path), options)).result()
    totals = SearchStats()
    for stats in results:
        totals.add(stats)
    return totals
