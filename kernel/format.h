/* The on-disk index format, version 6: every constant and rule of it, once.
 *
 * Each constant is written once, in one of the lists below (X-macros: a list applies X to
 * each of its entries).  The C core reads them as FS_<name>; fastsubs._kernel.FORMAT exports
 * every entry of every list under its name (module_format.c applies the same lists), so
 * Python reads the format from here and spells none of it.  The rules (widths, lengths, a
 * pattern's layout) are the inline functions below; codec.c writes every record, header
 * and key with them and records.c, store.c and verify.c read with them.
 *
 * An index is one LMDB environment with these named databases:
 *
 *   meta         "header": the fixed binary header below, checked at every open;
 *                "meta":   a msgpack map for people (fastsubs-index info), checksummed
 *                          by the header.  Both are written last: an environment
 *                          without a header is an interrupted build (or an index of
 *                          format 1 or 2, whose msgpack map carries the magic).
 *   arrays       whole-vocabulary arrays by name (FS_ARRAYS), little-endian, each
 *                checksummed by the header.
 *   patterns<m>  for each order m = 2 ... N: the patterns "A _ B" of the m-grams, as
 *                records keyed by pattern keys, in key order, ended by an END record.
 *
 * Integers are little-endian everywhere but in keys (big-endian ids, so that LMDB's
 * byte order is the ids' order).  Nothing is aligned: the C core reads through the
 * unaligned types of common.h. */
#ifndef FASTSUBS_FORMAT_H
#define FASTSUBS_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------- names and strings */

/* Strings of the format: the C core reads them as FS_<name> (char arrays), Python as bytes. */
#define FS_FORMAT_STRINGS(X) \
    /* The first bytes of the header; future versions keep it, the version word after it, \
     * the header's length after that and the checksum at its end, so that any version's \
     * header is told apart from damage before its version is read. */ \
    X(HEADER_MAGIC, "fastsubs index\0\0") \
    /* The msgpack map's "magic" value (every format version has written it). */ \
    X(META_MAGIC, "fastsubs-index") \
    X(META_DB, "meta") \
    X(HEADER_KEY, "header") \
    X(META_KEY, "meta") \
    X(ARRAYS_DB, "arrays") \
    /* printf format of the database of the patterns of order m */ \
    X(PATTERNS_DB, "patterns%d")

#define FS_DECLARE_STRING(name, value) static const char FS_##name[] = value;
FS_FORMAT_STRINGS(FS_DECLARE_STRING)

/* ---------------------------------------------------------------- the arrays */

/* The whole-vocabulary arrays, in the header's order: name, item type (FS_ITEM_TYPES),
 * what it holds.  V words; ids are the order of the model's unigram section. */
#define FS_ARRAYS(X) \
    X(UNIGRAM_ALPHA, "unigram_alpha", SCORE)     /* [V] log10 p(w) */ \
    X(UNIGRAM_BETA, "unigram_beta", SCORE)       /* [V] log10 back-off weight of w (0 when none) */ \
    X(UNIGRAM_ORDER, "unigram_order", ID)        /* [V] ids by alpha descending, ties by id */ \
    X(WORD_OFFSETS, "word_offsets", OFFSET)      /* [V + 1] where each word's spelling starts in word_bytes */ \
    X(WORD_BYTES, "word_bytes", BYTE)            /* every word's UTF-8 spelling, back to back */ \
    X(SPELLING_ORDER, "spelling_order", ID)      /* [V] ids by spelling (bytes ascending, a prefix first) */ \
    /* the back-off tables of orders 2 ... N - 1, back to back (the header gives their \
     * lengths): each holds every back-off weight its order stores, once, the most \
     * frequent first, and the patterns' beta codes index it */ \
    X(BETA_VALUES, "beta_values", SCORE)

/* The item types of the arrays, and of what the core hands Python: name, kind ('u'
 * unsigned, 'f' IEEE float), bytes; all little-endian. */
#define FS_ITEM_TYPES(X) \
    X(ID, 'u', 4) \
    X(SCORE, 'f', 4) \
    X(OFFSET, 'u', 8) \
    X(BYTE, 'u', 1)

#define FS_ARRAY_INDEX(name, spelled, type) FS_ARRAY_##name,
enum { FS_ARRAYS(FS_ARRAY_INDEX) FS_N_ARRAYS };
#define FS_DECLARE_ITEM_TYPE(name, kind, bytes) FS_##name##_ITEM_KIND = kind, FS_##name##_ITEM_BYTES = bytes,
enum { FS_ITEM_TYPES(FS_DECLARE_ITEM_TYPE) };

/* ---------------------------------------------------------------- integer constants */

#define FS_FORMAT_INTEGERS(X) \
    X(FORMAT_VERSION, 6) \
    X(HEADER_MAGIC_BYTES, sizeof(FS_HEADER_MAGIC) - 1) \
    /* The first format version with the header: an index of an earlier one has none. */ \
    X(HEADER_SINCE, 3) \
    /* Byte offsets of the header's fields (u32 unless said). */ \
    X(H_MAGIC, 0) \
    X(H_VERSION, 16) \
    X(H_BYTES, 20)             /* the header's length, its final checksum included */ \
    X(H_ORDER, 24) \
    X(H_VOCAB_SIZE, 28) \
    X(H_ID_BYTES, 32) \
    X(H_BOS_ID, 36)            /* FS_NO_WORD: the model has no such word */ \
    X(H_EOS_ID, 40) \
    X(H_UNK_ID, 44) \
    X(H_META_BYTES, 48)        /* u64: length of the msgpack map */ \
    X(H_META_CHECKSUM, 56) \
    X(H_JOINT_MIN, 60)         /* the fewest words of a pattern "_ d" that carries a joint order */ \
    X(H_VALUE_BOUND, 64)       /* f64: at least |v| of every finite alpha and beta of the index */ \
    X(H_ARRAYS, 72)            /* per array of FS_ARRAYS: u64 length in bytes, u32 checksum */ \
    X(H_ARRAY_ENTRY, 12) \
    /* after the arrays: per order m = 1 ... N, u64 n-grams; per order m = 2 ... N, u64 \
     * records of patterns<m> (END included); per order m = 2 ... N, u32 entries of its \
     * back-off table in beta_values (0 for N); then the u32 checksum of all bytes before \
     * it (fs_header_bytes) */ \
    X(H_COUNTS, FS_H_ARRAYS + FS_N_ARRAYS * FS_H_ARRAY_ENTRY) \
    \
    /* A pattern "A _ B" of order m: the m-grams "A x B" of the model.  Its key is the slot \
     * position (1 byte: how many words are left of the slot) and the m - 1 fixed words' \
     * ids, fs_id_bytes each, big-endian (fs_key_bytes). */ \
    X(MAX_ORDER, 64) \
    \
    /* Every record's value starts with \
     *   u32 checksum   common_checksum of the record's key and the value's words after it \
     *   u8  kind       FS_BLOCK, FS_PATTERN or FS_END \
     *   u8  flags      FS_HAS_PREVIOUS: the next field is the previous record's last key; \
     *                  FS_HAS_JOINT: a PATTERN record whose pattern carries a joint order \
     *   u8[key_len]    the key of the last pattern of the record before (zeros for the first): \
     *                  a look-up checks that it landed where its key belongs, so a damaged \
     *                  B-tree is never read as "no such pattern" \
     * and is zero-padded to a whole number of 4-byte words, with at least FS_ID_TAIL bytes \
     * of padding where its last pattern's data ends with an id (fs_record_padding). */ \
    X(R_CHECKSUM, 0) \
    X(R_KIND, 4) \
    X(R_FLAGS, 5) \
    X(R_PREVIOUS, 6) \
    X(HAS_PREVIOUS, 1) \
    X(HAS_JOINT, 2) \
    /* Bytes a reader may load past a word id's last byte (it loads every id as the 4 bytes \
     * from its first: fs_id_bits): every id of a record is followed by at least this many \
     * bytes of it. */ \
    X(ID_TAIL, 3) \
    /* Many small patterns, keyed by the last one's key.  After the common part (the body): \
     *   u16 patterns, u16 restarts, u16 restart[restarts] (where each restart entry starts, \
     *   counted from the first entry), then one entry per pattern, in key order.  Each \
     *   restart begins a group of entries (up to the next restart); in a group, the first, \
     *   third, fifth ... entry begins with a code byte, whose low nibble is its own entry's \
     *   code and whose high nibble the next entry's (0 when the group has no next entry). \
     *   An entry's key is the key before it (zeros at a restart) plus a delta, a big-endian \
     *   integer of ``delta`` bytes added to its last bytes (the whole key, key_len bytes, \
     *   at a restart).  A code below FS_ENTRY_ESCAPED is the entry of the code table of \
     *   its order (FS_ENTRY_CODES_BETA below the highest order, FS_ENTRY_CODES_TOP there: \
     *   fs_entry_code) that gives its delta's bytes, its count of words and the width of \
     *   its beta codes, and the entry is \
     *     u8[delta]      the delta \
     *     data \
     *   A code of FS_ENTRY_ESCAPED gives them in the entry: \
     *     u8 head        delta << 4 | count, each in its nibble when it fits (fs_entry_head), \
     *                    else escaped: \
     *     [u8 delta]     when the head's delta nibble is FS_ENTRY_ESCAPED_DELTA (15 or more) \
     *     u8[delta]      the delta \
     *     [u8 count]     when the head's count nibble is FS_ENTRY_ESCAPED_COUNT (16 or more; \
     *                    FS_ENTRY_WIDE_COUNT: the count follows in a u32, 256 or more) \
     *     [u32 count]    when the count byte is FS_ENTRY_WIDE_COUNT \
     *     [u8 width]     below the highest order: the width of its beta codes \
     *     data \
     * (half a byte of structure for most entries: most patterns hold a word or two, with \
     * keys a byte or two from the one before; the tables are the commonest of kn4-64k's). \
     * The first entry restarts.  A block is either small, sized to fill what its LMDB leaf \
     * page has left, or big: led by a pattern too big for a leaf's block (over \
     * FS_BLOCK_MAX_COUNT words, or a long entry), whose record LMDB keeps in overflow pages of \
     * their own, and taking the patterns after it until the block ends near the end of its \
     * last page (codec.c: pack).  A pattern too big for a leaf's block that would otherwise \
     * leave most of its last overflow page empty (2 KB on average) shares its pages with its \
     * neighbours instead. */ \
    X(BLOCK, 1) \
    X(BLOCK_RESTART, 32)       /* the writer restarts every this many entries of a run of small patterns */ \
    X(BLOCK_MAX_COUNT, 255)    /* the most words of a pattern in a small block */ \
    X(BLOCK_PATTERNS, 0)       /* body offset of the u16 count of patterns */ \
    X(BLOCK_RESTARTS, 2)       /* body offset of the u16 count of restarts */ \
    X(BLOCK_RESTART_TABLE, 4)  /* body offset of the restart table */ \
    X(RESTART_BYTES, 2)        /* bytes of each restart table entry */ \
    X(ENTRY_ESCAPED, 15)       /* the code of an entry that gives its fields in a head */ \
    X(ENTRY_ESCAPED_DELTA, 15) /* the head's delta nibble when the delta's length follows in a byte */ \
    X(ENTRY_ESCAPED_COUNT, 0)  /* the head's count nibble when the count follows the key in a byte */ \
    X(ENTRY_WIDE_COUNT, 0)     /* that byte when the count follows it in a u32 */ \
    /* One pattern, keyed by its own key: u32 count, u8 width of its beta codes (0 at the \
     * highest order), then data (and a joint order, below). */ \
    X(PATTERN, 2) \
    X(PATTERN_COUNT, 0)        /* body offset of the u32 count */ \
    X(PATTERN_WIDTH, 4)        /* body offset of the u8 width of its beta codes */ \
    X(PATTERN_DATA, 5)         /* body offset of the data */ \
    /* The last record of a database, keyed by FS_END_KEY_BYTE x (key_len + 1) (after every \
     * pattern key); nothing after the common part. */ \
    X(END, 3) \
    X(END_KEY_BYTE, 0xFF) \
    /* Patterns "_ d" of at least this many words carry a joint order unless the build says \
     * otherwise (the header's joint_min): smaller ones are read whole by the search soon \
     * enough that a joint order would not pay for its bytes. */ \
    X(JOINT_MIN_DEFAULT, 64)

#define FS_DECLARE_INTEGER(name, value) FS_##name = (value),
enum { FS_FORMAT_INTEGERS(FS_DECLARE_INTEGER) };

/* 32-bit words of the format (unsigned, beyond an enum's int). */
#define FS_FORMAT_WORDS(X) \
    /* common_checksum(key, words): sum of words[i] (2i + 1) FS_VALUE_WEIGHT + key[j] (2j + 1) \
     * FS_KEY_WEIGHT, mod 2^32.  Odd weights: changing any one word or key byte, whatever \
     * the change, changes the sum.  Arrays, the metadata and the header use it with no key, \
     * over their bytes zero-padded to whole words. */ \
    X(VALUE_WEIGHT, 0x9E3779B1u) \
    X(KEY_WEIGHT, 0x85EBCA6Bu) \
    /* Stands for a word the model lacks (header ids) and for an out-of-vocabulary context \
     * word in a model without <unk>, which matches no n-gram. */ \
    X(NO_WORD, 0xFFFFFFFFu)

#define FS_DECLARE_WORD(name, value) static const uint32_t FS_##name = (value);
FS_FORMAT_WORDS(FS_DECLARE_WORD)

/* Numbers of the format that are no integers. */
#define FS_FORMAT_REALS(X) \
    /* The log10 probability KenLM gives a word missing from a model without <unk>. */ \
    X(UNKNOWN_WORD_LOGPROB, -100.0)

#define FS_DECLARE_REAL(name, value) static const double FS_##name = (value);
FS_FORMAT_REALS(FS_DECLARE_REAL)

/* ---------------------------------------------------------------- rules */

/* Bytes of each word id in keys: the fewest that hold every id of V words. */
static inline unsigned fs_id_bytes(uint64_t vocab_size) {
    return vocab_size <= (1u << 16) ? 2u : vocab_size <= (1u << 24) ? 3u : 4u;
}

/* Bits of each word id in a pattern's data: 16 up to 65,536 words (whole bytes, which a
 * reader loads as they are: kn4-64k's search reads ids 16 bits wide as fast as before they
 * were packed), the fewest that hold every id of V words up to 2^25, 32 above (a reader
 * loads an id as the 4 bytes from its first byte, shifted: the bit it starts at in that
 * byte, plus its bits, must fit 32).  Bigger vocabularies are where ids cost: 19 bits
 * instead of 24 for kn4-338k-pruned's 338,528 words. */
static inline unsigned fs_id_bits(uint64_t vocab_size) {
    unsigned bits = vocab_size <= 2u ? 1u : 64u - (unsigned)__builtin_clzll(vocab_size - 1u);
    return bits <= 16u ? 16u : bits <= 25u ? bits : 32u;
}

/* Bytes of a pattern key of n-grams of ``order``: the slot and order - 1 ids. */
static inline size_t fs_key_bytes(unsigned order, unsigned id_bytes) {
    return 1u + (size_t)id_bytes * (order - 1u);
}

/* Bytes of the header of a model of ``order``: fields, counts, records, checksum. */
static inline size_t fs_header_bytes(unsigned order) {
    return FS_H_COUNTS + 8u * order + 8u * (order - 1u) + 4u * (order - 1u) + 4u;
}

/* Offset in the header of the u32 length of order m's back-off table (m = 2 ... order). */
static inline size_t fs_header_beta_table(unsigned order, unsigned m) {
    return FS_H_COUNTS + 8u * order + 8u * (order - 1u) + 4u * (m - 2u);
}

/* An escaped block entry's head byte for a delta of ``delta`` bytes and ``count`` words. */
static inline uint8_t fs_entry_head(unsigned delta, unsigned count) {
    unsigned high = delta < FS_ENTRY_ESCAPED_DELTA ? delta : FS_ENTRY_ESCAPED_DELTA;
    unsigned low = count <= 15u ? count : FS_ENTRY_ESCAPED_COUNT;
    return (uint8_t)(high << 4 | low);
}

/* Bytes of an escaped block entry's head and fields for a delta of ``delta`` bytes and
 * ``count`` words (its width's byte with ``has_beta``), the delta and code aside. */
static inline unsigned fs_entry_head_bytes(unsigned delta, unsigned count, int has_beta) {
    return 1u + (delta >= FS_ENTRY_ESCAPED_DELTA) + (count > 15u) + (count > 255u ? 4u : 0u) + (has_beta ? 1u : 0u);
}

/* The code tables of block entries (the layout above): the fields code c gives, as
 * X(delta bytes, count, beta width) in code order, a delta of 0 bytes standing for the
 * whole key (key_len bytes).  FS_ENTRY_CODES_BETA serves the orders below the highest,
 * FS_ENTRY_CODES_TOP the highest (which stores no beta codes: width 0).  The commonest
 * fields of kn4-64k's entries: 97% of its 4-grams' and 86% of its 3-grams' take a code. */
#define FS_ENTRY_CODES_BETA(X) \
    X(1, 1, 0) X(2, 1, 0) X(1, 2, 0) X(1, 1, 2) X(1, 3, 0) X(0, 1, 0) X(1, 1, 1) X(2, 2, 0) \
    X(1, 4, 0) X(2, 1, 1) X(1, 2, 2) X(1, 1, 4) X(2, 1, 2) X(1, 5, 0) X(1, 3, 2)
#define FS_ENTRY_CODES_TOP(X) \
    X(1, 1, 0) X(2, 1, 0) X(3, 1, 0) X(4, 1, 0) X(1, 2, 0) X(0, 1, 0) X(1, 3, 0) X(3, 2, 0) \
    X(2, 2, 0) X(1, 4, 0) X(1, 5, 0) X(3, 3, 0) X(4, 2, 0) X(2, 3, 0) X(0, 2, 0)

/* The fields an entry code gives: its delta's bytes (0: the whole key), count and beta width. */
typedef struct {
    uint8_t delta, count, width;
} FsEntryCode;

#define FS_ENTRY_CODE(delta, count, width) {delta, count, width},
static const FsEntryCode FS_ENTRY_CODE_TABLES[2][FS_ENTRY_ESCAPED] = {
    {FS_ENTRY_CODES_TOP(FS_ENTRY_CODE)}, {FS_ENTRY_CODES_BETA(FS_ENTRY_CODE)}};
#undef FS_ENTRY_CODE

/* The fields of code ``code`` (below FS_ENTRY_ESCAPED) of an order with (``has_beta``) or
 * without beta codes. */
static inline FsEntryCode fs_entry_code(int has_beta, unsigned code) {
    return FS_ENTRY_CODE_TABLES[has_beta != 0][code];
}

/* The code whose fields are a delta of ``delta`` bytes (``key_len``: the whole key),
 * ``count`` words and beta codes of ``width`` bits, or FS_ENTRY_ESCAPED when none is. */
static inline unsigned fs_entry_code_of(int has_beta, unsigned delta, size_t key_len, unsigned count,
                                        unsigned width) {
    for (unsigned c = 0; c < FS_ENTRY_ESCAPED; c++) {
        FsEntryCode e = fs_entry_code(has_beta, c);
        if ((e.delta ? e.delta : key_len) == delta && e.count == count && e.width == width)
            return c;
    }
    return FS_ENTRY_ESCAPED;
}

/* Bits of each position of a pattern of ``count`` words: the fewest that hold count - 1
 * (none for one word, which has no order to keep). */
static inline unsigned fs_position_bits(uint64_t count) {
    return count <= 1u ? 0u : 64u - (unsigned)__builtin_clzll(count - 1u);
}

/* Bytes of ``count`` unsigned integers of ``bits`` bits each, packed from the low bits of
 * each byte up (positions and beta codes: integer i takes bits i * bits ... (i + 1) * bits - 1
 * of the field, bit j being bit j % 8 of byte j / 8). */
static inline uint64_t fs_packed_bytes(uint64_t count, unsigned bits) {
    return (count * bits + 7u) / 8u;
}

/* A pattern's data, for ``count`` words, as offsets from its start:
 *   ids[count]        word ids, strictly increasing, packed fs_id_bits(V) bits each
 *                     (fs_packed_bytes)
 *   by_score[count]   positions into ids, alpha descending, ties by lower id, packed
 *                     fs_position_bits(count) bits each (fs_packed_bytes; none for one word)
 * then, for a pattern "_ d" (order 2, the slot first) of at least the header's joint_min
 * words (in a PATTERN record, flag FS_HAS_JOINT; no other record has one), its joint order:
 *   joint[count]      positions into ids, packed as by_score's: the words by joint key
 *                     descending, ties by lower id, a word's joint key being the smallest
 *                     float32 at or above the float64 sum alpha(x) + alpha(x d) of its
 *                     unigram alpha and its alpha in the pattern (fs_joint_key;
 *                     docs/algorithm.md, "The joint bound"), which the reader computes: the
 *                     keys are not stored
 * then
 *   alpha[count]      f32: log10 p of "A x B" for each x
 * and last, only for orders below N:
 *   beta[count]       beta codes, beta_width bits each, packed as positions are
 *                     (fs_packed_bytes): log10 back-off weight of "A x B" is
 *                     entry code of the order's back-off table (width 0: every code is 0),
 *                     the width (fs_beta_width_ok) given by the entry's code or head, or
 *                     by the PATTERN record.
 * Every field but the codes lies where the count alone says; the codes' length needs the
 * width (fs_pattern_end).  The packed orders come before the alphas, so that at least 8
 * bytes of the pattern follow each of them (load_packed reads up to 7 past its end).
 *
 * A pattern of one word outside its order's last slot, with no joint order
 * (fs_values_elsewhere), holds its id alone: no alpha and no beta code (its width 0).
 * Its n-gram's alpha and beta are stored once more, in the pattern of the n-gram's first
 * order - 1 words (the slot last), at the n-gram's last word, where a reader takes them
 * (kn4-64k: 14.0M of its 15.95M 4-gram patterns hold one word; their values were a sixth
 * of its index). */
typedef struct {
    uint64_t ids, positions, joint, alpha, beta;
    unsigned position_bits;
    int values;                 /* the data holds alphas and beta codes */
} FsPatternLayout;

/* Does a pattern of ``count`` words of order ``order``, ``slot`` words left of its slot,
 * store its values elsewhere (above)? */
static inline int fs_values_elsewhere(uint64_t count, unsigned slot, unsigned order, int has_joint) {
    return count == 1 && slot + 1u < order && !has_joint;
}

static inline FsPatternLayout fs_pattern_layout(uint64_t count, unsigned id_bits, int has_joint,
                                                int values_elsewhere) {
    FsPatternLayout at;
    at.position_bits = fs_position_bits(count);
    uint64_t positions = fs_packed_bytes(count, at.position_bits);
    at.values = !values_elsewhere;
    at.ids = 0;
    at.positions = fs_packed_bytes(count, id_bits);
    at.joint = at.positions + positions;
    at.alpha = at.joint + (has_joint ? positions : 0u);
    at.beta = at.alpha + (at.values ? 4u * count : 0u);
    return at;
}

/* The widths a beta code may have, narrowest first: 0 (one value for the whole pattern),
 * 1, 2 or 4 bits (a code never straddles two bytes), or 1, 2, 3 or 4 whole bytes (3: a
 * table of up to 16.7M values, as a generated model's random weights make, needs no
 * fourth byte of every code).  A reader keeps a width as its place in this list. */
#define FS_BETA_WIDTHS(X) X(0) X(1) X(2) X(4) X(8) X(16) X(24) X(32)
#define FS_BETA_WIDTH_ITEM(width) width,
static const uint8_t FS_BETA_WIDTH_LIST[] = {FS_BETA_WIDTHS(FS_BETA_WIDTH_ITEM)};
#undef FS_BETA_WIDTH_ITEM
enum { FS_BETA_WIDTH_COUNT = sizeof(FS_BETA_WIDTH_LIST) };

/* The place of ``width`` in FS_BETA_WIDTH_LIST, or -1 when the format has no such width. */
static inline int fs_beta_width_place(unsigned width) {
    for (int i = 0; i < FS_BETA_WIDTH_COUNT; i++)
        if (FS_BETA_WIDTH_LIST[i] == width)
            return i;
    return -1;
}

static inline int fs_beta_width_ok(unsigned width) {
    return fs_beta_width_place(width) >= 0;
}

/* The narrowest width that holds every code up to ``largest``. */
static inline unsigned fs_beta_width(uint32_t largest) {
    for (int i = 0; i < FS_BETA_WIDTH_COUNT - 1; i++)
        if (!((uint64_t)largest >> FS_BETA_WIDTH_LIST[i]))
            return FS_BETA_WIDTH_LIST[i];
    return 32u;
}

/* Where the data of ``at`` ends, its beta codes ``beta_width`` bits each (has_beta) or none. */
static inline uint64_t fs_pattern_end(FsPatternLayout at, uint64_t count, int has_beta, unsigned beta_width) {
    return at.beta + (has_beta && at.values ? fs_packed_bytes(count, beta_width) : 0u);
}

/* Bytes of zero padding after ``used`` bytes of a record's value whose last pattern's data
 * ends with an id (``id_last``: it stores its values elsewhere) or not: to a whole number of
 * 4-byte words, at least FS_ID_TAIL of them after an id. */
static inline uint64_t fs_record_padding(uint64_t used, int id_last) {
    uint64_t tail = id_last ? FS_ID_TAIL : 0u;
    return (used + tail + 3u) / 4u * 4u - used;
}

/* The joint key of a word whose unigram alpha is ``unigram`` and whose alpha in the pattern
 * is ``alpha``: the smallest float32 at or above their float64 sum.  When the sum rounded
 * down, the next float32 up is one step of its bits, up for a key of sign 0 and down for a
 * key of sign 1 (toward zero): nextafterf(key, INFINITY) for every key a sum can round to
 * (the infinities and -0.0 included), without its call or a branch (a search computes a key
 * for every entry of a joint order it reads, and the sums round down half the time). */
static inline float fs_joint_key(float unigram, float alpha) {
    double exact = (double)unigram + (double)alpha;
    float key = (float)exact;
    uint32_t bits, up = (double)key < exact;
    memcpy(&bits, &key, sizeof(bits));
    bits += up - (up & bits >> 31) * 2u;
    memcpy(&key, &bits, sizeof(key));
    return key;
}

#endif
