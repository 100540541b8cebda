/* Substitutes drawn in proportion to their probability (--sample), the same draws for any
 * number of workers and on any machine.
 *
 * The random stream of a position depends only on the seed, the input line and the
 * position: it is numpy's Generator(PCG64(SeedSequence([seed, line, position]))), written
 * out here (SeedSequence's entropy pool, PCG64's XSL-RR generator, the uniform doubles of
 * Generator.random), and a draw is Generator.choice's with replacement and p given: the
 * first substitute whose cumulative probability is above a uniform double.  So the draws
 * are those of numpy's ``choice(ids, size=draws, replace=True, p=p)``, which the tests
 * compare them with, made without numpy and without the GIL. */
#ifndef FASTSUBS_SAMPLE_H
#define FASTSUBS_SAMPLE_H

#include <stdint.h>

/* ``draws`` positions into ``answers``' ``n`` (>= 1) substitutes, drawn with replacement in
 * proportion to ``probabilities`` (p / sum p, search.h; some above 0, or each draw would
 * be 0/0), into ``out``; ``cumulative``: room for ``n`` doubles. */
void sample_draws(const double *probabilities, int64_t n, uint64_t seed, uint64_t line, uint64_t position,
                  int64_t draws, int64_t *out, double *cumulative);

#endif
