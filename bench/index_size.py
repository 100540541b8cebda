"""Where an index's bytes go: per n-gram, by order and by part.

    python -m fastsubs.bench.index_size INDEX [INDEX ...]

Reads the size report a build writes into the index's metadata (``sizes``, also shown by
``fastsubs-index info --json``: counted as the records were encoded, and the LMDB pages of
each database after writing) and prints, for every order, the bytes per n-gram of that
order spent on each part: ids, ``by_score`` positions, alphas, betas, keys, the records'
structure, and LMDB's own (page and node headers, room left free in pages); then the
whole index per n-gram of the model, the file's size included.  An n-gram of order m is
stored m times, once per slot, so its ids, alphas and betas cost m times their width.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import fastsubs
from fastsubs import format as fmt
from fastsubs.core import Core


def _file_bytes(index: Path) -> int:
    return sum(f.stat().st_size for f in index.iterdir() if f.is_file())


def report(index: Path) -> str:
    """The table of one index, as text."""
    with Core(index) as opened:
        meta = opened.meta
    sizes = meta.get("sizes")
    if sizes is None:
        return f"{index}: no size report (built before fastsubs recorded one: rebuild it)"
    total_ngrams = sum(meta["counts"])
    columns = (*fmt.PARTS, "lmdb", "total")
    lines = [f"{index}: {meta['order']}-gram model, {meta['vocab_size']:,} words, {total_ngrams:,} n-grams, "
             f"{meta['id_bytes']}-byte ids in keys, {fmt.id_bits(meta['vocab_size'])} bits in patterns; bytes per "
             "n-gram of each order",
             f"{'':>10} {'n-grams':>12} {'records':>10} " + " ".join(f"{c:>9}" for c in columns)]
    for line in sizes:
        if line["part"] == "arrays":
            continue
        ngrams = line["ngrams"]
        written = sum(line[part] for part in fmt.PARTS)
        values = [line[part] for part in fmt.PARTS] + [line["pages"] - written, line["pages"]]
        lines.append(f"{line['part']:>10} {ngrams:>12,} {line['records']:>10,} "
                     + " ".join(f"{v / ngrams:>9.2f}" for v in values))
    arrays = next(line for line in sizes if line["part"] == "arrays")
    pages = sum(line["pages"] for line in sizes)
    file_bytes = _file_bytes(index)
    lines.append(f"arrays (unigrams, spellings) {arrays['pages'] / 2**20:,.1f} MiB; pages of every database "
                 f"{pages / 2**20:,.1f} MiB; the file {file_bytes / 2**20:,.1f} MiB = "
                 f"{file_bytes / total_ngrams:.1f} bytes per n-gram of the model")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("indexes", nargs="+", type=Path, metavar="INDEX")
    args = parser.parse_args()
    print(f"fastsubs {fastsubs.__version__}")
    for index in args.indexes:
        try:
            print(report(index))
        except fastsubs.FastsubsError as error:  # (an index of another format, damage: its one line)
            sys.exit(f"index_size: {error}")


if __name__ == "__main__":
    main()
