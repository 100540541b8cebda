"""The run pipeline: what a text goes through on its way from input lines to finished
output, whoever drives the run (``fastsubs-query``'s processes and workers, its ``--dask``
tasks, :mod:`fastsubs.dask`'s partitions, :meth:`fastsubs.SubstituteIndex.table`).

* input: numbered lines in chunks (:mod:`~fastsubs.pipeline.lines`), lines of any length
  in bounded memory (:mod:`~fastsubs.pipeline.long_lines`), compressed text in and out
  (:mod:`~fastsubs.pipeline.textio`);
* a chunk through the C core into finished output (:mod:`~fastsubs.pipeline.chunks`), in
  each output format (:mod:`~fastsubs.pipeline.formats`); Parquet parts and their names
  (:mod:`~fastsubs.pipeline.parquet`, :mod:`~fastsubs.pipeline.parts`), Arrow tables with
  no file in between (:mod:`~fastsubs.pipeline.arrow`);
* the processes of a run: stop signals, the cores it may use, forked workers
  (:mod:`~fastsubs.pipeline.processes`, :mod:`~fastsubs.pipeline.workers`).

It stands on the core (:mod:`fastsubs.core`) and the query's options
(:mod:`fastsubs.options`); the public API and the command line stand on it
(docs/development.md, "Layout").
"""
