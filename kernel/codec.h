/* The index format's bytes, made and parsed in one place (format.h gives the layout).
 *
 * Writing: every pattern record, END record, pattern key and header an index holds is made
 * here (the indexer hands a batch of sorted n-grams and gets records back; a test hands one
 * record's fields and gets its bytes).  Parsing: a record's common part, a BLOCK's table and
 * entries, a pattern's data, and the header's fields, read where they lie; the look-up
 * (records.c), the whole-index checks (verify.c), the open (store.c) and the reference
 * decoder the tests and tools use (fastsubs._kernel.decode_record) all parse through these
 * functions, so a record's layout is written and read by the same rules.
 *
 * Parsing checks that every part lies inside its record; what the parts say (ids
 * increasing, positions a permutation, keys in order) is checked above, by records.c. */
#ifndef FASTSUBS_CODEC_H
#define FASTSUBS_CODEC_H

#include "common.h"

/* ---------------------------------------------------------------- parsing, in place */

/* One pattern's data, in place (format.h): ``count`` ids (packed, id_bits each), positions by
 * score (none when count is 1), alphas, beta codes, and for a pattern "_ d" that has one,
 * its joint order (the reader computes the keys: fs_joint_key). */
typedef struct {
    const uint8_t *ids, *positions;
    /* (a pattern that stores its values elsewhere, format.h, has alpha at its n-gram's alpha
     * in the pattern holding it, or in its cache slot, and beta_table at its code's entry of
     * the table, beta_width 0 and no beta_codes) */
    const ix_f32 *alpha;
    const uint8_t *beta_codes;  /* beta_width bits each (pattern_beta) */
    const ix_f32 *beta_table;   /* the order's back-off table; NULL: the highest order stores none (they are 0) */
    unsigned beta_width;
    const uint8_t *joint;       /* NULL: no joint order */
    uint32_t count;
    unsigned position_bits;     /* of each position by score and of the joint order (0: one word) */
    float beta_sup;             /* max(0, largest back-off weight): the search's bound (set by the checks) */
} DiskPattern;

/* Beta code i of ``codes`` of 1, 2 or 4 bits each, packed from the low bits of each byte up. */
static inline __attribute__((always_inline)) uint32_t beta_code_bits(const uint8_t *codes, unsigned width,
                                                                     uint32_t i) {
    size_t bit = (size_t)i * width;
    return (uint32_t)(codes[bit >> 3] >> (bit & 7)) & ((1u << width) - 1u);
}

/* Beta code i of ``codes``, ``width`` bits each (format.h: FS_BETA_WIDTHS).
 * Inlined: where the width is a constant, one load. */
static inline __attribute__((always_inline)) uint32_t beta_code(const uint8_t *codes, unsigned width, uint32_t i) {
    switch (width) {
    case 0:
        return 0;
    case 8:
        return codes[i];
    case 16:
        return load_u16(codes + 2 * (size_t)i);
    case 24:
        return load_u24(codes + 3 * (size_t)i);
    case 32:
        return load_u32(codes + 4 * (size_t)i);
    default:
        return beta_code_bits(codes, width, i);
    }
}

/* The back-off weight of entry i of a pattern below the highest order. */
static inline float pattern_beta(const DiskPattern *p, uint32_t i) {
    return p->beta_table[beta_code(p->beta_codes, p->beta_width, i)];
}

/* What a pattern's data holds besides ids, positions and alphas (codec_pattern_fields's ``flags``). */
#define PATTERN_HAS_BETA 1u
#define PATTERN_HAS_JOINT 2u
/* a pattern of one word whose values lie in another pattern (fs_values_elsewhere): its
 * data is its id, and the fields give no alpha and no beta codes (alpha NULL) */
#define PATTERN_VALUES_ELSEWHERE 4u

/* The PATTERN_VALUES_ELSEWHERE flag of the pattern of ``count`` words of ``order`` whose key
 * is ``key``, with or without a joint order. */
static inline unsigned codec_key_flags(const uint8_t *key, int order, uint64_t count, int has_joint) {
    return fs_values_elsewhere(count, key[0], (unsigned)order, has_joint) ? PATTERN_VALUES_ELSEWHERE : 0u;
}

/* The bytes of the data of a pattern of ``count`` words (``flags``), its beta codes
 * ``beta_width`` bits each, that starts at ``data`` and may run to ``end``, or -1 when it
 * does not fit there or the width is none of the format's. */
int64_t codec_data_bytes(const uint8_t *data, const uint8_t *end, uint64_t count, unsigned id_bits, unsigned flags,
                         unsigned beta_width);

/* The pattern of ``count`` words whose data starts at ``data`` (codec_data_bytes found it
 * whole), its beta codes ``beta_width`` bits each, fields in place (no byte of the data is
 * read); ``beta_table``: its order's back-off table (with PATTERN_HAS_BETA).  With
 * PATTERN_VALUES_ELSEWHERE, alpha and beta_codes are NULL: the caller points them at the
 * values (records.c). */
void codec_pattern_fields(const uint8_t *data, uint32_t count, unsigned id_bits, unsigned flags,
                          const ix_f32 *beta_table, unsigned beta_width, DiskPattern *p);

/* A record as every kind starts. */
typedef struct {
    int kind, has_previous, has_joint;
    int order;                  /* of the database's n-grams */
    const uint8_t *key, *previous, *body, *end;  /* body: after the common part; end: of the value */
    size_t key_len;             /* of the database's pattern keys */
} DiskRecord;

/* The common part of the record ``value`` (``value_len`` bytes) whose LMDB key is ``key``
 * (``key_len`` bytes: a pattern key of the database's ``pattern_key_len``, or an END key one
 * longer), in the database of ``order``: 0, or -1 with the failure set (FS_EDAMAGED: its
 * key's length, its checksum, its kind, or a joint flag where none may be).  Without
 * ``sum`` its checksum is not summed again: the caller found it right (records_find_pattern's
 * CheckedRecords). */
int codec_open_record(const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len, int order,
                      size_t pattern_key_len, int sum, DiskRecord *r, Failure *failure);

/* A key as hex, for messages (at most the first 32 bytes). */
const char *codec_hex(const uint8_t *key, size_t len, char out[65]);

/* Where a BLOCK record's entries are, and its restart points. */
typedef struct {
    uint32_t n_patterns, n_restarts;
    const uint8_t *restarts, *entries;
} DiskBlock;

/* A BLOCK record's table: 0, or -1 when it does not fit the record. */
int codec_open_block(const DiskRecord *r, DiskBlock *b);

/* Where the next block entry is: its first byte, and whether its code came in the code byte
 * of the entry before it (format.h: entries pair up within each restart's group). */
typedef struct {
    const uint8_t *at;
    int paired;                 /* the entry is the second of its pair: its code is ``code`` */
    unsigned code;
} EntryCursor;

/* A cursor at the restart entry that starts ``at`` (the key before it is zeros). */
static inline EntryCursor codec_restart_cursor(const uint8_t *at) {
    return (EntryCursor){at, 0, 0};
}

/* One block entry's fields. */
typedef struct {
    unsigned delta;             /* bytes of its key's delta (key_len at a restart) */
    uint32_t count;
    unsigned beta_width;
    unsigned flags;             /* PATTERN_HAS_BETA as the order has it, PATTERN_VALUES_ELSEWHERE */
    const uint8_t *data;
} EntryFields;

/* Decodes the block entry at ``c`` (the key of the entry before it in ``key``, zeros at a
 * restart, which it turns into its own) into ``e`` and moves ``c`` to the next entry: 0,
 * or -1 when it does not fit the record (a delta past the key's first byte included). */
int codec_read_entry(const DiskRecord *r, EntryCursor *c, unsigned id_bits, unsigned has_beta, uint8_t *key,
                     EntryFields *e);

/* The key of the restart entry ``offset`` bytes into the block's entries (stored whole),
 * or NULL when the entry does not start a group with a whole key inside the record. */
const uint8_t *codec_restart_key(const DiskRecord *r, const DiskBlock *b, size_t offset, unsigned has_beta);

/* Whether what follows ``used_end`` in record ``r`` is its padding (fs_record_padding),
 * the data of its last pattern (``last_flags``) ending there. */
int codec_padding_ok(const DiskRecord *r, const uint8_t *used_end, unsigned last_flags);

/* The pattern of a PATTERN record, and what its data holds (codec_pattern_fields's flags)
 * into *flags: 0, or -1 when its layout does not fit the record. */
int codec_alone_pattern(const DiskRecord *r, unsigned id_bits, unsigned has_beta, const ix_f32 *beta_table,
                        DiskPattern *out, unsigned *flags);

/* Every entry of a BLOCK record in order, each checked to lie where the block's table puts
 * it: the first entry restarts, restarts are where the table says, the table is used up and
 * nothing but padding follows the last entry, whose key is the record's. */
typedef struct {
    const DiskRecord *record;
    DiskBlock block;
    const uint8_t *at;
    uint32_t entry, restart;
    unsigned id_bits, has_beta;
    EntryCursor cursor;
    uint8_t key[1 + 4 * FS_MAX_ORDER];  /* the entry's key */
    int restarts;               /* the entry restarts a group (its key whole) */
    EntryFields fields;
} CodecWalk;

/* Starts walking BLOCK record ``r``: 0, or -1 when its table does not fit. */
int codec_walk_block(CodecWalk *w, const DiskRecord *r, unsigned id_bits, unsigned has_beta);
/* The next entry into ``w``: 1, 0 after the last (the record well formed), -1 malformed. */
int codec_next_entry(CodecWalk *w);

/* ---------------------------------------------------------------- the header */

/* The header's fields (format.h's FS_H_* offsets), as the writer gives them and the open reads them. */
typedef struct {
    uint32_t version, length, order, vocab_size, id_bytes, bos, eos, unk, joint_min;
    uint64_t meta_bytes;
    uint32_t meta_checksum;
    double value_bound;
    uint64_t array_bytes[FS_N_ARRAYS];
    uint32_t array_checksum[FS_N_ARRAYS];
    uint64_t counts[FS_MAX_ORDER + 1];   /* n-grams of order m = 1 ... order */
    uint64_t records[FS_MAX_ORDER + 1];  /* records of patterns<m>, m = 2 ... order (END included) */
    uint32_t beta_tables[FS_MAX_ORDER + 1];  /* entries of order m's back-off table, m = 2 ... order */
    uint32_t checksum;          /* as stored (codec_read_header) */
} CodecHeader;

/* Writes the header of ``h`` (its length fs_header_bytes(h->order), its checksum made) to ``out``. */
void codec_write_header(const CodecHeader *h, uint8_t *out);
/* Reads the header ``bytes`` (``len`` of them): 0, or -1 when it is too short for the
 * fields its version, length and order say it holds (only version and length are set then). */
int codec_read_header(const uint8_t *bytes, size_t len, CodecHeader *h);

/* ---------------------------------------------------------------- writing records */

/* The key of the pattern whose fixed words are ids[0 .. n) with the slot before ids[slot]
 * into ``key`` (1 + n id_bytes bytes); its length. */
size_t codec_pattern_key(int slot, const uint32_t *ids, int n, unsigned id_bytes, uint8_t *key);

/* One pattern's fields, to be written as they are. */
typedef struct {
    const uint8_t *key;         /* the pattern's key */
    uint32_t count;
    int restarts;               /* in a BLOCK: the entry restarts a group (its key whole) */
    unsigned delta;             /* in a BLOCK: bytes of its key's difference from the entry before's
                                 * (codec_entry_deltas; key_len where it restarts) */
    const uint32_t *ids, *positions;  /* positions: by score (not written for one word) */
    const float *alpha;
    const uint32_t *beta_codes; /* NULL: none (the highest order); each < 2^beta_width */
    unsigned beta_width;        /* written as it is (a test may forge one the format has not) */
    const uint32_t *joint;      /* NULL: no joint order */
} CodecPattern;

/* One record's fields: its kind, the order of its database's n-grams, flags (written as
 * they are), the previous record's last key (NULL: zeros) and its patterns (one for a
 * PATTERN record, none for an END record). */
typedef struct {
    int kind, order;
    unsigned flags;
    const uint8_t *previous;
    const CodecPattern *patterns;
    uint32_t n_patterns;
} CodecRecord;

/* Sets the delta of each of the ``n`` entries of a BLOCK from their keys (the first one's
 * restarts). A batch's writer sets them from what it planned instead: see codec_plan_batch. */
void codec_entry_deltas(CodecPattern *patterns, uint32_t n, size_t key_len);

/* The length of the value of ``r`` in a database of ``key_len``-byte pattern keys. */
uint64_t codec_record_bytes(const CodecRecord *r, size_t key_len, unsigned id_bits);
/* Writes the value of ``r`` (codec_record_bytes of it) to ``out``, checksummed with its LMDB key
 * ``record_key`` (``record_key_len`` bytes): 0, or -1 with FS_EARGUMENT when a field does not
 * fit its width (an id, a position, a count, a restart offset). */
int codec_write_record(const CodecRecord *r, size_t key_len, unsigned id_bits, const uint8_t *record_key,
                       size_t record_key_len, uint8_t *out, Failure *failure);

/* The END record of a database of ``key_len``-byte pattern keys after the pattern key
 * ``previous`` (NULL: none): its key (key_len + 1 bytes) and value (codec_end_bytes). */
size_t codec_end_bytes(size_t key_len);
void codec_write_end(size_t key_len, const uint8_t *previous, uint8_t *key, uint8_t *value);

/* A record's value that names ``previous`` (``key_len`` bytes) as the key before it, its
 * checksum made again (the first record of a slot, once the slot before is known). */
void codec_name_previous(uint8_t *value, size_t value_len, const uint8_t *record_key, size_t key_len,
                         const uint8_t *previous);

/* ---------------------------------------------------------------- writing a batch */

/* Where the bytes of the records go (fastsubs-index info): the patterns' ids, positions by
 * score, alphas, betas, joint orders; their keys (the LMDB keys and the key deltas of
 * block entries) and the structure around them (each record's checksum, kind, flags and
 * previous key, a block's counts and restart table, the entries' codes and heads with the
 * widths they hold, a PATTERN's count and width, padding). */
#define CODEC_PARTS(X) X(ids) X(positions) X(alpha) X(beta) X(joint) X(keys) X(structure)
#define CODEC_PART_INDEX(name) CODEC_PART_##name,
enum { CODEC_PARTS(CODEC_PART_INDEX) CODEC_N_PARTS };

/* An order's back-off table as a hash of its values' float32 bits to their codes (open
 * addressing, at most half full), made once for all the batches of a slot: a generated
 * model's table holds a value per context, millions of them, and made for each batch of a
 * million rows the hash cost 49 ms a batch at 709K values and 740 ms at 16M (a third of a
 * billion-n-gram build's CPU while it encoded the 2-grams). */
typedef struct {
    uint64_t *slots;    /* bits << 32 | code + 1; 0: empty */
    uint32_t mask;      /* slots - 1 */
    unsigned shift;     /* a value's slot: (bits * 0x9E3779B1) >> shift */
} CodecBetaIndex;

/* The index of ``table`` (``len`` values; a value the table repeats keeps its first code):
 * 0, or -1 out of memory. */
int codec_beta_index(CodecBetaIndex *index, const float *table, uint32_t len, Failure *failure);
void codec_beta_index_free(CodecBetaIndex *index);

/* One batch of n-grams of one order, sorted by the key of their pattern with the slot at
 * ``slot`` and then by the word in the slot, whole patterns only. */
typedef struct {
    int order, slot, has_beta;
    unsigned id_bytes;          /* of the keys (the data's ids take fs_id_bits(vocab_size)) */
    size_t n;
    const uint32_t *ids;        /* n x order: the fixed words in key order, then the slot's word */
    const float *alpha, *beta;  /* n each (beta read only with has_beta) */
    const CodecBetaIndex *beta_index; /* with has_beta: the order's back-off table, which holds every beta */
    const float *unigram_alpha; /* for joint orders (order 2, slot 0), else NULL */
    uint32_t n_unigrams;        /* unigram_alpha's length */
    uint32_t vocab_size;        /* the model's (its ids take fs_id_bits(vocab_size) in the data) */
    uint32_t joint_min;
    const uint8_t *previous;    /* the last pattern key before the batch, or NULL */
    /* bytes free in the LMDB leaf page that the batch's first record goes to (the writer
     * sizes its blocks to fill pages; CODEC_FRESH_PAGE when the batch starts a page) */
    unsigned page_room;
    /* the first pattern's place in its run of small patterns (CodecBatch.run_phase of the
     * batch before; 0 at a slot's start) */
    unsigned run_phase;
    /* set when more rows of the slot follow: the batch's last block stays open (its rows
     * are not written: CodecBatch.rows_done), so that the records do not depend on where
     * the batches fall */
    int more;
} CodecRows;

/* A batch laid out in records (codec_plan_batch), then written (codec_write_batch). */
typedef struct {
    size_t n_records, key_len, n_groups;
    uint64_t values_bytes;
    uint64_t parts[CODEC_N_PARTS];
    double value_bound;         /* the largest |v| of a finite alpha or beta written */
    unsigned page_room;         /* bytes free in the leaf page of the batch's last record */
    /* with CodecRows.more: the rows written (those after them, the open block's, go first
     * in the next batch) and the place of the first of the others in its run */
    size_t rows_done, groups_done;
    unsigned run_phase;
    /* private to codec.c */
    uint8_t *keys;              /* n_groups keys */
    uint32_t *positions, *joint; /* by group, for the rows */
    uint32_t *beta_codes;       /* by row: its beta's entry of the table */
    CodecPattern *patterns;    /* per group */
    CodecRecord *records;
    uint64_t *offsets;          /* n_records + 1 */
    const CodecRows *rows;
} CodecBatch;

/* Bytes free in a fresh LMDB leaf page of 4 KiB (less its 16-byte header). */
#define CODEC_FRESH_PAGE 4080u

/* Groups the rows into patterns and the patterns into records (blocks that fill LMDB's leaf
 * pages, big patterns and joint orders alone): 0, or -1 out of memory. */
int codec_plan_batch(CodecBatch *b, const CodecRows *rows, Failure *failure);
/* Writes the records: their LMDB keys (key_len each) to ``keys``, value offsets
 * (n_records + 1) to ``offsets`` and values to ``values``: 0, or -1 with the failure set. */
int codec_write_batch(CodecBatch *b, uint8_t *keys, uint64_t *offsets, uint8_t *values, Failure *failure);
void codec_free_batch(CodecBatch *b);

#endif
