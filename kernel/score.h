/* What score.c gives the search (searcher.h): exact scores of a batch of new words. */
#ifndef FASTSUBS_SCORE_H
#define FASTSUBS_SCORE_H

#include "searcher.h"

/* Exact lp(x) of the n words of a batch into ``total``, dropping those that cannot reach
 * ``threshold`` (see score.c); returns how many are kept, their batch columns in ``live``. */
int score_batch(Searcher *searcher, int n_terms, const uint32_t *words, int n, const double *sup, double threshold,
                double *total, int *live);

#endif
