"""The on-disk index format (version 4): the one contract between the indexer and the query engine.

The C core reads it (``kernel/format.h`` holds the same constants; a test compares
the two) and the indexer writes it with the helpers below.  An index is one LMDB
environment (a directory):

``meta``
    ``header``: a fixed binary header (offsets ``H_*``) that the core reads and checks at
    every open, ending with its own checksum: magic, version, order N, vocabulary size V,
    id width, the ids of ``<s>``/``</s>``/``<unk>`` (:data:`NO_WORD` when absent), the
    length and checksum of the msgpack map and of every array, n-grams per order and
    records per pattern database.  ``meta``: a msgpack map for people (``fastsubs-index
    info``: source file, build details; :data:`META_KEYS`), checksummed by the header.
    Both are written last, so an environment without a header is an interrupted build
    (or an index of format 1 or 2, whose msgpack map carries :data:`MAGIC`).
``arrays``
    whole-vocabulary arrays by name (:data:`ARRAY_NAMES`), little-endian: the unigrams'
    alpha and beta (float32[V]), ids by alpha descending (uint32[V]), the words'
    spellings (``word_offsets`` uint64[V+1] into ``word_bytes``) and ids by spelling
    (uint32[V]: a word's id is found by binary search).  Ids are the order of the model's
    unigram section.
``patterns{m}``, m = 2 … N
    the patterns ``A _ B`` of the m-grams (every ``A x B`` of the model with the slot at
    one position), in key order.  A key is the slot position (1 byte) and the ids of the
    fixed words, big-endian, ``id_bytes`` each.  Small patterns are packed into BLOCK
    records (keyed by their last pattern's key, keys front-coded with a restart every
    :data:`BLOCK_RESTART` patterns), big ones are PATTERN records of their own, and an
    END record closes each database.  Every record carries the key of the record before
    it, so a look-up that lands elsewhere than its key belongs (a damaged B-tree) is
    damage, never "no such pattern".  A pattern's data: ids (strictly increasing),
    positions by score (alpha descending, ties by id; none for one word), alpha, and
    beta below the highest order.

Integers are little-endian except in keys; nothing is aligned.  Every record, array,
the metadata and the header carry a checksum (:func:`record_checksum`), so a flipped byte
is an error when it is read, never a different answer.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

#: The msgpack map's ``magic``; every format version has written it.
MAGIC = "fastsubs-index"
FORMAT_VERSION = 4
#: The first format version with the header: an index of an earlier one has none.
HEADER_SINCE = 3
#: The first bytes of the header (every version keeps them, and the version, length and
#: closing checksum that follow, so damage is told apart from a newer format).
HEADER_MAGIC = b"fastsubs index\0\0"

META_DB = b"meta"
HEADER_KEY = b"header"
META_KEY = b"meta"
ARRAYS_DB = b"arrays"
#: The words' database of format 2 (told apart from an interrupted build of format 3 or later by
#: fastsubs-index build --force, which replaces only what it recognises as an index).
FORMAT_2_VOCAB_DB = b"vocab"

#: Byte offsets of the header's fields (uint32 unless said; see kernel/format.h).
H_MAGIC = 0
H_VERSION = 16
H_BYTES = 20
H_ORDER = 24
H_VOCAB_SIZE = 28
H_ID_BYTES = 32
H_BOS_ID = 36
H_EOS_ID = 40
H_UNK_ID = 44
H_META_BYTES = 48  # uint64
H_META_CHECKSUM = 56
#: The fewest words of a pattern ``_ d`` that carries a joint order (see JOINT_MIN_DEFAULT).
H_JOINT_MIN = 60
#: float64: at least ``|v|`` of every finite alpha and beta of the index (the joint bound's
#: rounding slack is measured in it).
H_VALUE_BOUND = 64
H_ARRAYS = 72  # per array: uint64 length in bytes, uint32 checksum
H_ARRAY_ENTRY = 12

#: The arrays, in the header's order, with their element types (numpy dtype strings).
ARRAY_NAMES = (UNIGRAM_ALPHA, UNIGRAM_BETA, UNIGRAM_ORDER, WORD_OFFSETS, WORD_BYTES, SPELLING_ORDER) = (
    b"unigram_alpha", b"unigram_beta", b"unigram_order", b"word_offsets", b"word_bytes", b"spelling_order")
ARRAY_DTYPES = ("<f4", "<f4", "<u4", "<u8", "u1", "<u4")
#: Bytes per item of each array (what ARRAY_DTYPES give, written out for the C core's check).
ARRAY_ITEM_BYTES = (4, 4, 4, 8, 1, 4)
H_COUNTS = H_ARRAYS + len(ARRAY_NAMES) * H_ARRAY_ENTRY

#: Keys the msgpack map carries (for people; the search reads the header).
META_KEYS = (
    "magic", "format_version", "order", "counts", "vocab_size", "id_bytes",
    "has_unk", "unk_id", "bos_id", "eos_id", "max_unigram_beta", "source", "build", "sizes",
)

#: Element types, as numpy dtype strings.  This module imports numpy only in the functions
#: that compute with it.
ID_DTYPE = "<u4"
SCORE_DTYPE = "<f4"
OFFSET_DTYPE = "<u8"

MAX_ORDER = 64

#: Record layout (offsets of the part every record starts with) and kinds.
R_CHECKSUM = 0
R_KIND = 4
R_FLAGS = 5
R_PREVIOUS = 6
HAS_PREVIOUS = 1
#: A PATTERN record whose pattern ``_ d`` (order 2, slot first) carries a joint order after its
#: data: positions by joint key descending (ties by id), then float32 keys, the smallest float32
#: at or above the float64 sum of the word's unigram alpha and its alpha in the pattern.
HAS_JOINT = 2
#: Patterns ``_ d`` of at least this many words carry a joint order (smaller ones are read
#: whole by the search soon enough that a joint order would not pay for its bytes).
JOINT_MIN_DEFAULT = 64
BLOCK = 1
PATTERN = 2
END = 3
BLOCK_RESTART = 16
BLOCK_MAX_COUNT = 255
#: The body of a record (after its common part): a BLOCK's uint16 counts of patterns and of
#: restarts, its restart table (uint16 offsets of the restart entries from the first entry),
#: then its entries (shared key bytes, the rest of the key, the count, the data); a
#: PATTERN's uint32 count, then its data (kernel/format.h).
BLOCK_PATTERNS = 0
BLOCK_RESTARTS = 2
BLOCK_RESTART_TABLE = 4
RESTART_BYTES = 2
ENTRY_SHARED_BYTES = 1
ENTRY_COUNT_BYTES = 1
PATTERN_COUNT = 0
PATTERN_DATA = 4
END_KEY_BYTE = 0xFF

#: Odd weights of :func:`record_checksum`.
VALUE_WEIGHT = 0x9E3779B1
KEY_WEIGHT = 0x85EBCA6B
_MASK32 = 0xFFFFFFFF

#: The log10 probability KenLM gives a word missing from a model without ``<unk>``.
UNKNOWN_WORD_LOGPROB = -100.0
#: A word the model lacks (header ids), and an out-of-vocabulary context word in a model
#: without ``<unk>``: it matches no n-gram.
NO_WORD = 0xFFFFFFFF


def header_bytes(order: int) -> int:
    """Length of the header of a model of ``order``: fields, counts, records, checksum."""
    return H_COUNTS + 8 * order + 8 * (order - 1) + 4


def position_bytes(count):
    """Bytes of each ``by_score`` position of a pattern of ``count`` words (an int or a
    numpy array of them): none for one word, which has no order to keep."""
    import numpy as np

    width = np.where(count <= 1, 0, np.where(count <= 256, 1, np.where(count <= 65536, 2, 4)))
    return int(width) if np.ndim(width) == 0 else width


def pattern_data_bytes(count, id_bytes: int, has_beta: bool):
    """Bytes of the data of a pattern of ``count`` words (an int or a numpy array): ids,
    positions by score, alphas, and betas below the model's highest order."""
    return count * (id_bytes + position_bytes(count) + 4 + 4 * bool(has_beta))


def joint_data_bytes(count):
    """Bytes of the joint order of a pattern of ``count`` words: positions and float32 keys."""
    return count * (position_bytes(count) + 4)


def has_magic(meta: object) -> bool:
    """Whether a decoded msgpack metadata value is a fastsubs index's (of any format version)."""
    return isinstance(meta, dict) and meta.get("magic") == MAGIC


PATTERNS_DB = b"patterns%d"


def patterns_db_name(order: int) -> bytes:
    """Name of the LMDB database holding the patterns of n-grams of ``order``."""
    return PATTERNS_DB % order


def is_patterns_db(name: bytes) -> bool:
    """Whether ``name`` is a :func:`patterns_db_name`."""
    return name.startswith(PATTERNS_DB.split(b"%")[0]) and name[len(PATTERNS_DB) - 2:].isdigit()


def id_bytes_for(vocab_size: int) -> int:
    """Bytes per word id in keys and records: the fewest that hold every id."""
    for width in (2, 3, 4):
        if vocab_size <= 1 << (8 * width):
            return width
    raise ValueError(f"vocabulary of {vocab_size} words does not fit 32-bit ids")


def key_length(order: int, id_bytes: int) -> int:
    """Bytes of a pattern key of n-grams of ``order``: the slot and ``order - 1`` ids."""
    return 1 + id_bytes * (order - 1)


def end_key(order: int, id_bytes: int) -> bytes:
    """The key of a database's END record: after every pattern key."""
    return bytes([END_KEY_BYTE]) * (key_length(order, id_bytes) + 1)


def pattern_keys(slot: int, fixed: np.ndarray | list[list[int]], id_bytes: int) -> np.ndarray:
    """Keys (uint8 rows of :func:`key_length` bytes) of the patterns whose fixed words are the
    rows of ``fixed`` (ids), the slot before ``fixed[:, slot]``: the slot, then each id
    big-endian, ``id_bytes`` of its bytes, so that LMDB's byte order is the ids' order."""
    import numpy as np

    fixed = np.asarray(fixed, dtype=np.uint32).reshape(len(fixed), -1)
    keys = np.empty((len(fixed), 1 + id_bytes * fixed.shape[1]), dtype=np.uint8)
    keys[:, 0] = slot
    keys[:, 1:] = fixed.astype(">u4").view(np.uint8).reshape(len(fixed), -1, 4)[:, :, 4 - id_bytes:].reshape(
        len(fixed), -1)
    return keys


def pattern_key(slot: int, ids: tuple[int, ...] | list[int], id_bytes: int) -> bytes:
    """Key of the pattern whose fixed words are ``ids`` with the slot before ``ids[slot]``."""
    return pattern_keys(slot, [list(ids)], id_bytes)[0].tobytes()


def checksum_weights(length: int, key: bool = False) -> np.ndarray:
    """The (odd, uint64) weights of :func:`record_checksum` for ``length`` words or key bytes."""
    import numpy as np

    step = KEY_WEIGHT if key else VALUE_WEIGHT
    return ((2 * np.arange(length, dtype=np.uint64) + 1) * np.uint64(step)) & np.uint64(_MASK32)


def record_checksum(key: bytes, body: bytes) -> int:
    """The checksum of every part of an index: ``key`` bytes and ``body``'s 4-byte words.

    ``sum(word[i] * w_i) + sum(key[j] * u_j) mod 2^32`` with odd weights, ``body``
    zero-padded to whole little-endian words.  This is the definition; the builder
    computes it for many records at once (:func:`batch_checksums`) and the C core as
    ``fs_checksum``, both tested against it.
    """
    import numpy as np

    padded = bytes(body) + bytes(-len(body) % 4)
    words = np.frombuffer(padded, dtype="<u4").astype(np.uint64)
    key_bytes = np.frombuffer(bytes(key), dtype=np.uint8).astype(np.uint64)
    total = (words * checksum_weights(len(words))).sum(dtype=np.uint64)
    total += (key_bytes * checksum_weights(len(key_bytes), key=True)).sum(dtype=np.uint64)
    return int(total) & _MASK32


#: Records checksummed at once by :func:`batch_checksums`: bounds its temporaries.
CHECKSUM_BATCH = 1 << 18


def batch_checksums(words: np.ndarray, offsets: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """:func:`record_checksum` of many records at once (uint32 per record).

    ``words`` holds the records' values back to back as uint32 words, record g spanning
    ``words[offsets[g]:offsets[g + 1]]`` with its checksum word first (not summed) and at
    least one word after it;
    ``keys`` is a uint8 matrix with one key per row (keys of one call are equally long).
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


def pack_header(*, order: int, vocab_size: int, id_bytes: int, bos_id: int, eos_id: int, unk_id: int,
                meta: tuple[int, int], arrays: list[tuple[int, int]], counts: list[int],
                records: list[int], joint_min: int, value_bound: float) -> bytes:
    """The header's bytes: ``meta`` and each of ``arrays`` (in :data:`ARRAY_NAMES` order) as
    (length in bytes, checksum), n-grams per order 1 … N, records per order 2 … N, the
    joint orders' threshold and the bound on the values' magnitudes."""
    size = header_bytes(order)
    fields = bytearray(size - 4)
    fields[H_MAGIC:H_MAGIC + len(HEADER_MAGIC)] = HEADER_MAGIC
    struct.pack_into("<8I", fields, H_VERSION, FORMAT_VERSION, size, order, vocab_size, id_bytes,
                     bos_id, eos_id, unk_id)
    struct.pack_into("<QI", fields, H_META_BYTES, *meta)
    struct.pack_into("<Id", fields, H_JOINT_MIN, joint_min, value_bound)
    for number, (length, checksum) in enumerate(arrays):
        struct.pack_into("<QI", fields, H_ARRAYS + number * H_ARRAY_ENTRY, length, checksum)
    struct.pack_into(f"<{order}Q{order - 1}Q", fields, H_COUNTS, *counts, *records)
    return bytes(fields) + struct.pack("<I", record_checksum(b"", bytes(fields)))
