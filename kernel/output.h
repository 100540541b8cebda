/* Writing substitutes in the original tool's text format: ``word score`` fields joined by
 * tabs, each score as ``"%.8f"`` writes it, the words read in place from the index. */
#ifndef FASTSUBS_OUTPUT_H
#define FASTSUBS_OUTPUT_H

#include "search.h"

/* Bytes write_fields needs at most for the fields of ``answers`` with ``values`` (NULL: their
 * scores); -1 if a word is outside the vocabulary. */
int64_t fields_size(const Store *s, const Scored *answers, const double *values, int64_t n);
/* Writes the fields at ``out`` (room: fields_size); returns the end of what it wrote. */
char *write_fields(const Store *s, const Scored *answers, const double *values, int64_t n, char *out);
/* -z lists substitutes down to the first whose p / Σp is below this (the original's rule). */
#define NORMALIZED_FLOOR 1e-8

#endif
