/* What common.h declares for every part of the core: failures, and the format's checksum. */
#include "common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

void common_fail(Failure *failure, int code, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(failure->message, sizeof(failure->message), format, args);
    va_end(args);
    failure->code = code;
}

VECTOR_CLONES uint32_t common_checksum(const uint8_t *key, size_t key_len, const uint8_t *body, size_t body_len) {
    uint32_t total = 0, weight = FS_VALUE_WEIGHT, step = 2u * FS_VALUE_WEIGHT;
    size_t whole = body_len / 4;
    for (size_t i = 0; i < whole; i++, weight += step)  /* (2i + 1) * w mod 2^32 */
        total += load_u32(body + 4 * i) * weight;
    if (body_len % 4) {
        uint8_t last[4] = {0, 0, 0, 0};
        memcpy(last, body + 4 * whole, body_len % 4);
        total += load_u32(last) * weight;
    }
    weight = FS_KEY_WEIGHT;
    step = 2u * FS_KEY_WEIGHT;
    for (size_t j = 0; j < key_len; j++, weight += step)
        total += key[j] * weight;
    return total;
}

#define HUGE_PAGE ((uintptr_t)2 << 20)

void common_hint_huge(void *p, size_t size) {
#ifdef MADV_HUGEPAGE
    if (!p || size < 2 * HUGE_PAGE)
        return;
    uintptr_t start = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), end = ((uintptr_t)p + size) & ~(HUGE_PAGE - 1);
    if (end > start)
        (void)madvise((void *)start, end - start, MADV_HUGEPAGE);  /* (a hint: refused, it changes nothing) */
#else
    (void)p;
    (void)size;
#endif
}

void *common_malloc_big(size_t size) {
    void *p = malloc(size);
    common_hint_huge(p, size);
    return p;
}
