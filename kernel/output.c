/* The text writer: see output.h. */
#include "output.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The most bytes append_score writes for |value| < 1e4: "-10000.00000000" (rounded up). */
#define SHORT_SCORE 15
/* The longest "%.8f" of a double: 309 digits, sign, point, 8 decimals. */
#define LONG_SCORE 330

/* Appends ``value`` as ``"%.8f"`` would.  Fast path: value * 1e8 rounded to an integer.
 * For |value| < 1e4 the product is below 2^40, so its rounding error is below 2^-13;
 * unless it lies within 1e-3 of a half, it then rounds as the exact product does.  Other
 * values go to the C library's formatter, which rounds the exact binary value, as
 * Python's does. */
static char *append_score(char *out, double value) {
    double scaled = value * 1e8, rounded = nearbyint(scaled);
    if (fabs(value) < 1e4 && fabs(fabs(scaled - rounded) - 0.5) > 1e-3) {
        static const char pairs[] =
            "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
            "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
            "8081828384858687888990919293949596979899";
        uint64_t digits = (uint64_t)fabs(rounded);
        uint32_t fraction = (uint32_t)(digits % 100000000u);
        uint64_t whole = digits / 100000000u;
        int whole_digits = 1;
        for (uint64_t rest = whole; rest >= 10; rest /= 10)
            whole_digits++;
        if (signbit(value))
            *out++ = '-';
        char *end = out + whole_digits + 9, *p = end;  /* written right to left, in place */
        for (int i = 0; i < 4; i++, fraction /= 100) {  /* two digits at a time */
            p -= 2;
            memcpy(p, &pairs[2 * (fraction % 100)], 2);
        }
        *--p = '.';
        do
            *--p = (char)('0' + whole % 10);
        while ((whole /= 10) != 0);
        return end;
    }
    if (isnan(value)) {  /* Python writes every NaN so, the C library "-nan" for some */
        memcpy(out, "nan", 3);
        return out + 3;
    }
    return out + snprintf(out, LONG_SCORE + 1, "%.8f", value);
}

int64_t fields_size(const Store *s, const Scored *answers, const double *values, int64_t n) {
    /* room per field: the word, ' ', '\t' and the score; the last field also room for
     * the 16-byte copy of write_fields and the formatter's terminating zero */
    int64_t size = 16 + 1;
    for (int64_t i = 0; i < n; i++) {
        if (answers[i].word >= s->vocab_size)
            return -1;
        size_t length;
        store_word(s, answers[i].word, &length);
        double value = values ? values[i] : answers[i].score;
        size += (int64_t)length + 2 + (fabs(value) < 1e4 ? SHORT_SCORE : LONG_SCORE);
    }
    return size;
}

char *write_fields(const Store *s, const Scored *answers, const double *values, int64_t n, char *out) {
    for (int64_t i = 0; i < n; i++) {
        if (i)
            *out++ = '\t';
        size_t length;
        const char *word = store_word(s, answers[i].word, &length);
        /* most words are short: copy a fixed 16 bytes (the room after the word is at
         * least that), the bytes past the word are overwritten next */
        if (length <= 16 && (size_t)(word - s->word_bytes) + 16 <= s->word_bytes_len)
            memcpy(out, word, 16);
        else
            memcpy(out, word, length);
        out += length;
        *out++ = ' ';
        out = append_score(out, values ? values[i] : answers[i].score);
    }
    return out;
}
