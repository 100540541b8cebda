"""fastsubs on Dask, for corpora that outgrow one machine (``pip install '.[dask]'`` in the clone).

::

    import dask.bag as db
    import fastsubs
    from fastsubs.dask import substitutes_bag, to_textfiles

    lines = db.read_text("corpus/*.txt", encoding="utf-8", errors="surrogateescape")
    subs = substitutes_bag(lines, "/shared/model.fsidx", fastsubs.QueryOptions(n=100))
    to_textfiles(subs, "subs/*.txt")     # each file as fastsubs-query writes it for that input file
    to_parquet(lines, "subs.parquet", "/shared/model.fsidx", fastsubs.QueryOptions(n=100))  # a dataset

Place the index where every worker can read it (a copy on each node, or a shared
read-only filesystem); each worker process opens it once.  ``fastsubs-query --dask``
runs whole files the same way from the command line.
"""

from fastsubs.query.dask import substitutes_bag, substitutes_frame, to_parquet, to_textfiles

__all__ = ["substitutes_bag", "substitutes_frame", "to_parquet", "to_textfiles"]
