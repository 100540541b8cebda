"""Measurements of fastsubs, installed as ``fastsubs.bench``.

``fastsubs-bench`` (``cli``) has two commands: ``complexity`` (search effort against K
and V, the paper's figure) and ``synth`` (large valid ARPA models of a real model's
shape, for build scale and index size).  The figures of the README's performance section
come from modules run with ``python -m fastsubs.bench.<name>``: ``bench`` (warm search,
start-up, workers), ``corpus`` (a corpus read once: first pass, private memory, workers,
threads), ``formats`` (output formats and compression against workers, the API's
threads), ``build`` (a build's time, memory and temporary disk), ``index_size`` (an
index's bytes per n-gram by order and part) and ``scaling`` (workers on many cores).
``exhaustive_baseline`` is the yardstick the search is compared with, ``reference_terms`` the
back-off chains the tests' exhaustive scorers use, ``processes``
measures whole processes, and ``arpa_text`` writes ``synth``'s models as ARPA text.
"""
