"""The on-disk index format: the one contract between the indexer and the query engine.

An index is one LMDB environment (a directory).  Byte layouts are defined here and
both sides import the names below; the one place that writes a layout out by hand is
the builder's vectorized writer (``indexer/patterns.py`` fills the fields of all
records at once), which is checked against :func:`pattern_value_layout` by every test
that reads an index it built.

Named databases
---------------
``meta``      key ``b"meta"``: msgpack map (see :data:`META_KEYS`), written last, so an
              environment without it is recognised as incomplete.
``vocab``     word (UTF-8 bytes) -> word id, ``uint32`` little-endian.  Ids are the
              order of the unigram section, so per-word arrays are dense.
``arrays``    whole-vocabulary arrays, little-endian, viewed with ``numpy.frombuffer``:
              ``unigram_alpha``/``unigram_beta`` (float32[V]), ``unigram_order``
              (uint32[V], ids by alpha descending), ``word_offsets`` (uint64[V+1]) and
              ``word_bytes`` (all words concatenated) for id -> word.
``patterns{m}`` one database per n-gram order m >= 2.  A *pattern* ``A _ B`` is an
              n-gram of order m with one open slot; its key is
              ``slot position (1 byte) + ids of A then B (big-endian, id_bytes each)``.
              Its value describes every word x for which ``A x B`` is in the model:
              see :func:`pattern_value_layout`.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

MAGIC = "fastsubs-index"
#: 2: the header word of a pattern value is its checksum (1 held count and flags).
FORMAT_VERSION = 2

META_DB = b"meta"
META_KEY = b"meta"
VOCAB_DB = b"vocab"
ARRAYS_DB = b"arrays"

UNIGRAM_ALPHA = b"unigram_alpha"
UNIGRAM_BETA = b"unigram_beta"
UNIGRAM_ORDER = b"unigram_order"
WORD_OFFSETS = b"word_offsets"
WORD_BYTES = b"word_bytes"

#: Metadata key of the whole-vocabulary arrays' CRC-32s (``zlib.crc32`` of each value of
#: the ``arrays`` database, by key).  Pattern records carry their own checksum; these
#: arrays are read whole at every open, so a reader checks them there (~1 ms for 64K
#: words).  Optional: indexes built before it lack it (no format change).
ARRAY_CHECKSUMS = "array_crc32"
#: The values of the ``arrays`` database, each covered by :data:`ARRAY_CHECKSUMS`.
ARRAY_KEYS = (UNIGRAM_ALPHA, UNIGRAM_BETA, UNIGRAM_ORDER, WORD_OFFSETS, WORD_BYTES)

#: Keys every metadata map carries.
META_KEYS = (
    "magic", "format_version", "order", "counts", "vocab_size", "id_bytes",
    "has_unk", "unk_id", "bos_id", "eos_id", "max_unigram_beta", "source", "build",
)

#: Element types, as numpy dtype strings.  This module imports numpy only in the functions
#: that compute with it: the query engine's plain text path needs none (start-up).
ID_DTYPE = "<u4"
SCORE_DTYPE = "<f4"
OFFSET_DTYPE = "<u8"

#: Header word of a pattern value: :func:`record_checksum` of its key and the rest of the value.
HEADER_DTYPE = "<u4"

_MASK32 = 0xFFFFFFFF
#: Odd multipliers: a weighted sum mod 2^32 with odd weights changes whenever any one
#: word (or key byte) changes, whatever the change, so a flipped byte never goes unseen.
#: The i-th value word (after the header) is weighted by (2i + 1) * VALUE_WEIGHT mod 2^32,
#: the j-th key byte by (2j + 1) * KEY_WEIGHT mod 2^32 (the query's C kernel computes the
#: same sum from these two constants, tested against :func:`record_checksum`).
VALUE_WEIGHT = 0x9E3779B1
KEY_WEIGHT = 0x85EBCA6B

#: The log10 probability KenLM gives a word missing from a model without ``<unk>``.
UNKNOWN_WORD_LOGPROB = -100.0

#: Id standing for an out-of-vocabulary context word in a model without ``<unk>``:
#: it matches no n-gram.
NO_WORD = 0xFFFFFFFF


def has_magic(meta: object) -> bool:
    """Whether a decoded metadata value is a fastsubs index's (of any format version)."""
    return isinstance(meta, dict) and meta.get("magic") == MAGIC


def patterns_db_name(order: int) -> bytes:
    """Name of the LMDB database holding the patterns of n-grams of ``order``."""
    return b"patterns%d" % order


def id_bytes_for(vocab_size: int) -> int:
    """Bytes per word id inside pattern keys: the fewest that hold every id."""
    for width in (2, 3, 4):
        if vocab_size <= 1 << (8 * width):
            return width
    raise ValueError(f"vocabulary of {vocab_size} words does not fit 32-bit ids")


_KEY_STRUCTS = {2: "H", 4: "I"}


def pattern_key(slot: int, ids: tuple[int, ...] | list[int], id_bytes: int) -> bytes:
    """Key of the pattern whose fixed words are ``ids`` with the slot before ``ids[slot]``."""
    code = _KEY_STRUCTS.get(id_bytes)
    if code is not None:  # the common widths: one struct.pack call (this is on the query's hot path)
        return struct.pack(f">B{len(ids)}{code}", slot, *ids)
    return bytes((slot,)) + b"".join(i.to_bytes(id_bytes, "big") for i in ids)


def checksum_weights(length: int, key: bool = False) -> np.ndarray:
    """The (odd, uint64) weights of :func:`record_checksum` for ``length`` words or key bytes."""
    import numpy as np

    step = KEY_WEIGHT if key else VALUE_WEIGHT
    return ((2 * np.arange(length, dtype=np.uint64) + 1) * np.uint64(step)) & np.uint64(_MASK32)


def record_checksum(key: bytes, body: np.ndarray) -> int:
    """Checksum of a pattern record: key bytes and the value's words after the header.

    ``sum(body[i] * w_i) + sum(key[j] * u_j) mod 2^32`` with odd weights.  This is the
    definition; the builder computes it for all records at once (:func:`batch_checksums`)
    and the query in C (``fastsubs.query._kernel.checksum``), both tested against it.
    """
    import numpy as np

    key_bytes = np.frombuffer(key, dtype=np.uint8).astype(np.uint64)
    total = (body.astype(np.uint64) * checksum_weights(len(body))).sum(dtype=np.uint64)
    total += (key_bytes * checksum_weights(len(key_bytes), key=True)).sum(dtype=np.uint64)
    return int(total) & _MASK32


#: Records checksummed at once by :func:`batch_checksums`: bounds its temporaries.
CHECKSUM_BATCH = 1 << 18


def batch_checksums(words: np.ndarray, offsets: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """:func:`record_checksum` of many records at once (uint32 per record).

    ``words`` holds the records' values back to back (uint32, header words included
    but not summed), record g spanning ``words[offsets[g]:offsets[g + 1]]``; ``keys``
    is a uint8 matrix with one key per row (all keys of one database are equally long).
    """
    import numpy as np

    key_sums = (keys.astype(np.uint64) * checksum_weights(keys.shape[1], key=True)).sum(axis=1, dtype=np.uint64)
    result = np.empty(len(offsets) - 1, dtype=np.uint32)
    for first in range(0, len(result), CHECKSUM_BATCH):
        last = min(first + CHECKSUM_BATCH, len(result))
        body_starts = offsets[first:last] + 1
        lengths = offsets[first + 1:last + 1] - body_starts
        starts_in_batch = np.cumsum(lengths) - lengths
        record = np.repeat(np.arange(last - first), lengths)
        position = np.arange(int(lengths.sum())) - starts_in_batch[record]
        weights = checksum_weights(int(position.max()) + 1)[position]
        sums = np.add.reduceat(words[body_starts[record] + position].astype(np.uint64) * weights, starts_in_batch)
        result[first:last] = (sums + key_sums[first:last]) & np.uint64(_MASK32)
    return result


def pattern_count(value_words: int, has_beta: bool) -> int | None:
    """The number of words in a pattern whose value is ``value_words`` words long (None: no such length)."""
    hb = 1 if has_beta else 0
    if value_words == 3 + 2 * hb:
        return 1
    count, rest = divmod(value_words - 1 - hb, 3 + hb)
    return count if rest == 0 and count > 1 else None


def pattern_value_layout(count: int, has_beta: bool) -> list[tuple[str, str, int]]:
    """Fields of a pattern value, in order, as ``(name, dtype, length)``.

    ``header`` is the record's checksum.  Whether there are back-off weights follows
    from the order (patterns of the highest order have none) and the count from the
    value's length (:func:`pattern_count`).  ``max_beta`` (only with
    betas) is the largest back-off weight of ``A x B`` over x: what the search's
    bound needs.  ``ids``/``alpha``/``beta`` are sorted by word id, for exact
    look-ups with ``searchsorted``.  ``by_score`` (only when count > 1) lists
    positions into those arrays by alpha descending (ties by id): the sorted list
    the search reads.  Every field is 4 bytes wide, so offsets are ``4 * words``.
    """
    fields: list[tuple[str, str, int]] = [("header", HEADER_DTYPE, 1)]
    if has_beta:
        fields.append(("max_beta", SCORE_DTYPE, 1))
    fields += [("ids", ID_DTYPE, count), ("alpha", SCORE_DTYPE, count)]
    if has_beta:
        fields.append(("beta", SCORE_DTYPE, count))
    if count > 1:
        fields.append(("by_score", ID_DTYPE, count))
    return fields


def pattern_value_words(count, has_beta: bool):
    """Length of pattern values in 4-byte words: :func:`pattern_value_layout` summed.

    Works on one count or on a numpy array of counts (the builder sizes all records at once).
    """
    hb = 1 if has_beta else 0
    return 1 + hb * (1 + count) + 2 * count + count * (count > 1)
