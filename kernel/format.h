/* The on-disk index format, version 4: every constant of it, for the C core.
 *
 * fastsubs/format.py holds the same names for the indexer (a test compares the two, so
 * neither can change alone); its docstring describes the layout in prose.  In short, an
 * index is one LMDB environment with these named databases:
 *
 *   meta         "header": the fixed binary header below, checked at every open;
 *                "meta":   a msgpack map for people (fastsubs-index info), checksummed
 *                          by the header.  Both are written last: an environment
 *                          without a header is an interrupted build (or an index of
 *                          format 1 or 2, whose msgpack map carries the magic).
 *   arrays       whole-vocabulary arrays by name (FS_ARRAY_NAMES), little-endian,
 *                each checksummed by the header.
 *   patterns<m>  for each order m = 2 ... N: the patterns "A _ B" of the m-grams, as
 *                records keyed by pattern keys, in key order, ended by an END record.
 *
 * Integers are little-endian everywhere but in keys (big-endian ids, so that LMDB's
 * byte order is the ids' order).  Nothing is aligned: the C core reads through the
 * unaligned types of common.h. */
#ifndef FASTSUBS_FORMAT_H
#define FASTSUBS_FORMAT_H

/* ---------------------------------------------------------------- the header */

#define FS_FORMAT_VERSION 4
/* The first bytes of the header; future versions keep it, the version word after it,
 * the header's length after that and the checksum at its end, so that any version's
 * header is told apart from damage before its version is read. */
#define FS_HEADER_MAGIC "fastsubs index\0\0"
#define FS_HEADER_MAGIC_BYTES 16
/* The first format version with the header: an index of an earlier one has none. */
#define FS_HEADER_SINCE 3
/* The msgpack map's "magic" value (every format version has written it). */
#define FS_META_MAGIC "fastsubs-index"

#define FS_META_DB "meta"
#define FS_HEADER_KEY "header"
#define FS_META_KEY "meta"
#define FS_ARRAYS_DB "arrays"
/* printf format of the database of the patterns of order m */
#define FS_PATTERNS_DB "patterns%d"

/* Byte offsets of the header's fields (u32 unless said). */
#define FS_H_MAGIC 0
#define FS_H_VERSION 16
#define FS_H_BYTES 20          /* the header's length, its final checksum included */
#define FS_H_ORDER 24
#define FS_H_VOCAB_SIZE 28
#define FS_H_ID_BYTES 32
#define FS_H_BOS_ID 36         /* FS_NO_WORD: the model has no such word */
#define FS_H_EOS_ID 40
#define FS_H_UNK_ID 44
#define FS_H_META_BYTES 48     /* u64: length of the msgpack map */
#define FS_H_META_CHECKSUM 56
#define FS_H_JOINT_MIN 60      /* the fewest words of a pattern "_ d" that carries a joint order */
#define FS_H_VALUE_BOUND 64    /* f64: at least |v| of every finite alpha and beta of the index */
#define FS_H_ARRAYS 72         /* per array of FS_ARRAY_NAMES: u64 length in bytes, u32 checksum */
#define FS_H_ARRAY_ENTRY 12
/* after the arrays: per order m = 1 ... N, u64 n-grams; per order m = 2 ... N, u64
 * records of patterns<m> (END included); then the u32 checksum of all bytes before it */
#define FS_H_COUNTS (FS_H_ARRAYS + FS_N_ARRAYS * FS_H_ARRAY_ENTRY)
#define FS_HEADER_BYTES(order) (FS_H_COUNTS + 8 * (order) + 8 * ((order) - 1) + 4)

/* ---------------------------------------------------------------- the arrays */

/* In the header's order.  V words; ids are the order of the model's unigram section. */
#define FS_ARRAY_UNIGRAM_ALPHA 0   /* f32[V] log10 p(w) */
#define FS_ARRAY_UNIGRAM_BETA 1    /* f32[V] log10 back-off weight of w (0 when none) */
#define FS_ARRAY_UNIGRAM_ORDER 2   /* u32[V] ids by alpha descending, ties by id */
#define FS_ARRAY_WORD_OFFSETS 3    /* u64[V + 1] where each word's spelling starts in word_bytes */
#define FS_ARRAY_WORD_BYTES 4      /* u8[]  every word's UTF-8 spelling, back to back */
#define FS_ARRAY_SPELLING_ORDER 5  /* u32[V] ids by spelling (bytes ascending, a prefix first) */
#define FS_N_ARRAYS 6
#define FS_ARRAY_NAMES {"unigram_alpha", "unigram_beta", "unigram_order", "word_offsets", "word_bytes", \
                        "spelling_order"}
/* bytes per item of each array, in the same order */
#define FS_ARRAY_ITEM_BYTES {4, 4, 4, 8, 1, 4}

/* ---------------------------------------------------------------- pattern records */

/* A pattern "A _ B" of order m: the m-grams "A x B" of the model.  Its key is the slot
 * position (1 byte: how many words are left of the slot) and the m - 1 fixed words'
 * ids, FS_ID_BYTES each, big-endian. */
#define FS_MAX_ORDER 64
/* Bytes of each word id in keys and records: the fewest that hold every id of V words. */
#define FS_ID_BYTES(vocab_size) ((vocab_size) <= (1u << 16) ? 2u : (vocab_size) <= (1u << 24) ? 3u : 4u)
#define FS_KEY_BYTES(order, id_bytes) (1u + (id_bytes) * ((order) - 1u))

/* Every record's value starts with
 *   u32 checksum   fs_record_checksum of the record's key and the value's words after it
 *   u8  kind       FS_BLOCK, FS_PATTERN or FS_END
 *   u8  flags      FS_HAS_PREVIOUS: the next field is the previous record's last key
 *   u8[key_len]    the key of the last pattern of the record before (zeros for the first):
 *                  a look-up checks that it landed where its key belongs, so a damaged
 *                  B-tree is never read as "no such pattern"
 * and is zero-padded to a whole number of 4-byte words. */
#define FS_R_CHECKSUM 0
#define FS_R_KIND 4
#define FS_R_FLAGS 5
#define FS_R_PREVIOUS 6
#define FS_HAS_PREVIOUS 1
#define FS_HAS_JOINT 2         /* a PATTERN record whose pattern carries a joint order (below) */
/* Many small patterns, keyed by the last one's key.  After the common part (the body):
 *   u16 patterns, u16 restarts, u16 restart[restarts] (where each restart entry starts,
 *   counted from the first entry), then one entry per pattern, in key order:
 *   u8 shared (leading key bytes equal to the previous entry's; 0 at a restart),
 *   u8[key_len - shared] the rest of the key, u8 count (1 ... FS_BLOCK_MAX_COUNT), data.
 * A restart entry every FS_BLOCK_RESTART entries, the first one included. */
#define FS_BLOCK 1
#define FS_BLOCK_RESTART 16
#define FS_BLOCK_MAX_COUNT 255
#define FS_BLOCK_PATTERNS 0        /* body offset of the u16 count of patterns */
#define FS_BLOCK_RESTARTS 2        /* body offset of the u16 count of restarts */
#define FS_BLOCK_RESTART_TABLE 4   /* body offset of the restart table */
#define FS_RESTART_BYTES 2         /* bytes of each restart table entry */
#define FS_ENTRY_SHARED_BYTES 1    /* an entry's shared-bytes field, before the rest of its key */
#define FS_ENTRY_COUNT_BYTES 1     /* an entry's count, after its key, before its data */
/* One pattern, keyed by its own key: u32 count, then data (and a joint order, below). */
#define FS_PATTERN 2
#define FS_PATTERN_COUNT 0         /* body offset of the u32 count */
#define FS_PATTERN_DATA 4          /* body offset of the data */
/* The last record of a database, keyed by FS_END_KEY_BYTE x (key_len + 1) (after every
 * pattern key); nothing after the common part. */
#define FS_END 3
#define FS_END_KEY_BYTE 0xFF

/* A pattern's data, for ``count`` words:
 *   ids[count]        id_bytes each, strictly increasing
 *   by_score[count]   positions into ids, alpha descending, ties by lower id;
 *                     FS_POSITION_BYTES(count) each (none for one word)
 *   alpha[count]      f32: log10 p of "A x B" for each x
 *   beta[count]       f32, only for orders below N: log10 back-off weight of "A x B" */
#define FS_POSITION_BYTES(count) ((count) <= 1u ? 0u : (count) <= 256u ? 1u : (count) <= 65536u ? 2u : 4u)
#define FS_PATTERN_DATA_BYTES(count, id_bytes, has_beta) \
    ((uint64_t)(count) * ((id_bytes) + FS_POSITION_BYTES(count) + 4u + ((has_beta) ? 4u : 0u)))

/* The joint order of a pattern "_ d" (order 2, the slot first) of at least the header's
 * joint_min words, after its data in its PATTERN record (flag FS_HAS_JOINT; no other
 * record has one):
 *   joint[count]      positions into ids, FS_POSITION_BYTES(count) each: the words by
 *                     joint key descending, ties by lower id
 *   key[count]        f32, in that order: the smallest float32 at or above the float64
 *                     sum alpha(x) + alpha(x d) of the unigram alpha of x and its alpha
 *                     in the pattern (docs/algorithm.md, "The joint bound") */
#define FS_JOINT_MIN_DEFAULT 64
#define FS_JOINT_DATA_BYTES(count) ((uint64_t)(count) * (FS_POSITION_BYTES(count) + 4u))

/* ---------------------------------------------------------------- checksums and words */

/* fs_record_checksum(key, words): sum of words[i] (2i + 1) FS_VALUE_WEIGHT + key[j] (2j + 1)
 * FS_KEY_WEIGHT, mod 2^32.  Odd weights: changing any one word or key byte, whatever
 * the change, changes the sum.  Arrays, the metadata and the header use it with no key,
 * over their bytes zero-padded to whole words. */
#define FS_VALUE_WEIGHT 0x9E3779B1u
#define FS_KEY_WEIGHT 0x85EBCA6Bu

/* Stands for a word the model lacks (header ids) and for an out-of-vocabulary context
 * word in a model without <unk>, which matches no n-gram. */
#define FS_NO_WORD 0xFFFFFFFFu
/* The log10 probability KenLM gives a word missing from a model without <unk>. */
#define FS_UNKNOWN_WORD_LOGPROB (-100.0)

#endif
