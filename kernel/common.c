/* What common.h declares for every part of the core: failures, and the format's checksum. */
#include "common.h"

#include <stdarg.h>
#include <stdio.h>

void common_fail(Failure *failure, int code, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(failure->message, sizeof(failure->message), format, args);
    va_end(args);
    failure->code = code;
}

uint32_t common_checksum(const uint8_t *key, size_t key_len, const uint8_t *body, size_t body_len) {
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
