/* bound_check: one alternative's bound as the search sums it (upper_term, kernel/searcher.h),
 * for given back-off weight sups over a list's sup, written exactly, so that a test can
 * compare it with the score's own sum of a word's chain (tests/test_rounding.py, model C).
 *
 *   bound_check INNER SUP_0 ... SUP_{n-1}
 *
 * SUP_0 is the longest step's.  The numbers are read with strtod (a C99 hexadecimal float,
 * Python's float.hex(), reads back exactly); upper_term(steps, n, INNER) is written the
 * same way on standard output. */
#include <stdio.h>
#include <stdlib.h>

#include "searcher.h"

#define MOST_STEPS 64

int main(int argc, char **argv) {
    int n = argc - 2;
    if (n < 0 || n > MOST_STEPS) {
        fputs("usage: bound_check INNER SUP_0 ... SUP_{n-1} (at most 64)\n", stderr);
        return 2;
    }
    SearchStep steps[MOST_STEPS] = {0};
    for (int i = 0; i < n; i++)
        steps[i].beta_sup = strtod(argv[2 + i], NULL);
    printf("%a\n", upper_term(steps, n, strtod(argv[1], NULL)));
    return 0;
}
