/* What every part of the search kernel shares: the index's number types as they are read
 * in place, and the bit counting the rank maps use.  No Python here: the search core, the
 * record store and the text writer are plain C, tested on their own (tests/c/). */
#ifndef FASTSUBS_COMMON_H
#define FASTSUBS_COMMON_H

#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

/* The index is little-endian, and so are the machines this reads it on. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "fastsubs reads its little-endian index format on little-endian machines only"
#endif

/* Arrays read in place from the index: an LMDB value starts wherever its key ends in the
 * page, so these may be unaligned; the types say so, and the compiler emits loads that
 * allow it (on x86-64 the same instructions). */
#if defined(__GNUC__)
typedef uint32_t ix_u32 __attribute__((aligned(1)));
typedef uint64_t ix_u64 __attribute__((aligned(1)));
typedef float ix_f32 __attribute__((aligned(1)));
#else
typedef uint32_t ix_u32;
typedef uint64_t ix_u64;
typedef float ix_f32;
#endif

/* A 64-bit hash of an address, for the tables that find what a reader keeps by where its
 * record lies in the map (Fibonacci hashing: the product's high bits mix every bit of the
 * address, its low bits only the address's low ones): take a place from bits of its upper
 * half, as each caller does (bits 32 and up), never from its low bits. */
static inline uint64_t address_hash(const void *p) {
    return (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
}

/* Unsigned integers read in place, at any address. */
static inline uint32_t load_u16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
/* (three bytes, little-endian, reading none past them: a pattern's beta codes end its data) */
static inline uint32_t load_u24(const uint8_t *p) {
    return load_u16(p) | (uint32_t)p[2] << 16;
}
static inline uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t load_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Word id ``i`` of a pattern's ids, packed ``bits`` bits each (format.h, fs_id_bits: 16 ...
 * 25, or 32) from the low bits of each byte up: of 16 bits, the 2 bytes there; else the 4
 * bytes from its first byte, shifted and masked (``mask``: the low ``bits`` bits), which
 * reads up to a byte past an id of 17 to 25 bits.  Every id of the format is followed by at
 * least FS_ID_TAIL bytes of its record (format.h): room for an id loaded as 4 bytes. */
static inline uint32_t load_id(const uint8_t *array, uint32_t i, unsigned bits, uint32_t mask) {
    if (bits == 16)  /* (every vocabulary of up to 65,536 words: one branch the CPU predicts) */
        return load_u16(array + 2 * (size_t)i);
    uint64_t bit = (uint64_t)i * bits;
    return (load_u32(array + (bit >> 3)) >> (bit & 7)) & mask;
}

/* Element ``i`` of an array of unsigned integers of ``bits`` bits (1 ... 32) packed from the
 * low bits of each byte up (format.h, fs_packed_bytes): the 8 bytes from its first byte,
 * shifted and masked.  It reads up to 7 bytes past the array's last byte, so every such
 * array of the format is followed by at least 7 more bytes of its record (a pattern's
 * positions by score and its joint order by its alphas at least: 4 bytes a word, and a
 * pattern with positions has 2 words or more). */
static inline uint32_t load_packed(const uint8_t *array, uint32_t i, unsigned bits) {
    uint64_t bit = (uint64_t)i * bits;
    return (uint32_t)(load_u64(array + (bit >> 3)) >> (bit & 7)) & (uint32_t)((1ull << bits) - 1u);
}

static inline uint32_t width_mask(unsigned width) {
    return width >= 4 ? 0xFFFFFFFFu : (1u << (8 * width)) - 1;
}

/* Bits set in x: one instruction where the code is compiled for a CPU that has it (see
 * TARGET_CLONES), a few shifts and adds otherwise. */
static inline uint32_t popcount64(uint64_t x) {
    return (uint32_t)__builtin_popcountll(x);
}

/* The functions that count bits run often enough to be compiled twice on x86-64, with
 * and without the popcnt instruction; the loader picks the one this CPU can run. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
#define TARGET_CLONES __attribute__((target_clones("popcnt", "default")))
#else
#define TARGET_CLONES
#endif

/* The checksum (common.c) sums a multiply per 4 bytes of every record a reader first
 * reads: compiled twice on x86-64 too, with AVX2 (8 words a multiply) and without. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define VECTOR_CLONES
#endif

#define NO_WORD FS_NO_WORD

/* Makes room for ``need`` items of ``size`` bytes in ``*items`` (capacity ``*cap``): 0, or
 * -1 when out of memory (what it held stays). */
static inline int grow(void **items, int *cap, int need, size_t size) {
    if (need <= *cap)
        return 0;
    int cap_ = 2 * need + 8;
    void *grown = realloc(*items, (size_t)cap_ * size);
    if (!grown)
        return -1;
    *items = grown;
    *cap = cap_;
    return 0;
}

#define GROW(items, cap, need) grow((void **)&(items), &(cap), (need), sizeof(*(items)))

/* grow() for 64-bit counts. */
static inline int grow64(void **items, int64_t *cap, int64_t need, size_t size) {
    if (need <= *cap)
        return 0;
    int64_t cap_ = 2 * need + 8;
    void *grown = realloc(*items, (size_t)cap_ * size);
    if (!grown)
        return -1;
    *items = grown;
    *cap = cap_;
    return 0;
}

#define GROW64(items, cap, need) grow64((void **)&(items), &(cap), (need), sizeof(*(items)))

/* Why a call failed, for the caller to report: a fixed buffer, so reporting never allocates. */
typedef struct {
    int code;           /* 0: no error; see the FS_E* codes */
    char message[240];
} Failure;

enum {
    FS_OK = 0,
    FS_EDAMAGED,        /* the index is damaged: a record fails its checksum or its layout */
    FS_ENOMEM,          /* out of memory */
    FS_ELMDB,           /* LMDB refused (message says why) */
    FS_EARGUMENT,       /* a caller's argument is out of range */
    FS_ENOTINDEX,       /* the path holds no fastsubs index (or an interrupted build) */
    FS_EVERSION,        /* an index of another format version */
    FS_ECLOSED,         /* the index was closed */
    FS_EINTERRUPTED,    /* a caller's interruption check said stop (its exception is already raised) */
};

void common_fail(Failure *failure, int code, const char *format, ...) __attribute__((format(printf, 3, 4)));

/* The format's checksum (format.h, FS_VALUE_WEIGHT): ``key`` bytes and ``body``'s bytes as
 * whole little-endian words (the last one zero-padded). */
uint32_t common_checksum(const uint8_t *key, size_t key_len, const uint8_t *body, size_t body_len);

/* malloc(size), the buffer's whole 2 MiB pages backed by huge pages when it is of 4 MiB or
 * more (common_hint_huge): for the build's buffers of a batch, filled once and freed. */
void *common_malloc_big(size_t size);

/* Asks the kernel to back the whole 2 MiB pages of [p, p + size) with huge pages (when
 * size is 4 MiB or more, as numpy does for its arrays), before anything is written there.
 * A buffer that big comes fresh from mmap and is faulted in a 4 KiB page at a time: those
 * faults were a third of the build's CPU time (its kernel time) on a 40M-n-gram model. */
void common_hint_huge(void *p, size_t size);

#endif
