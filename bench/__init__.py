"""Measurements of fastsubs, installed as ``fastsubs.bench``.

``complexity`` is the ``fastsubs-bench complexity`` command (search effort against K and
V, the paper's figure); ``bench`` (warm search, start-up, workers, build) and ``corpus``
(a corpus read once: first pass, private memory, workers, threads) print the figures of
the README's Performance section (``python -m fastsubs.bench.bench``,
``python -m fastsubs.bench.corpus``); ``exhaustive_baseline`` is the yardstick the search
is compared with, and ``processes`` measures whole processes.
"""
