"""The command line's own part of the package: what its three tools share
(:mod:`fastsubs.cli.support`).  The tools are ``fastsubs.indexer.cli``, ``fastsubs.query.cli``
and ``fastsubs.bench.cli`` (the folders ``indexer/``, ``query/`` and ``bench/``); no module
of the library imports this package, nor ``fastsubs.query`` (tests/test_api_surface.py).
"""
