/* What every part of the search kernel shares: the index's number types as they are read
 * in place, and the bit counting the rank maps use.  No Python here: the search core, the
 * record store and the text writer are plain C, tested on their own (tests/c/). */
#ifndef FASTSUBS_COMMON_H
#define FASTSUBS_COMMON_H

#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

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

/* Id standing for an out-of-vocabulary context word in a model without <unk>
 * (fastsubs.format.NO_WORD): it matches no n-gram. */
#define NO_WORD 0xFFFFFFFFu

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
};

void fail(Failure *failure, int code, const char *format, ...) __attribute__((format(printf, 3, 4)));

#endif
